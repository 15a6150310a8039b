// Package train runs training loops: it attaches a loss to a model,
// picks the weights to train, feeds a dataset in batches for a number of
// epochs, logs every step, validates after each epoch, checkpoints and
// resumes, stops on a NaN loss (and, with DetectNaN, finds the op that
// produced it), draws the loss and accuracy curves, and exports the
// trained model. `vrun train` is a thin command line over it.
//
//	m, _ := train.Arch("lenet", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10})
//	net, _ := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
//	res, err := train.Run(ctx, train.Config{
//		Net: net, Device: dev, Train: trainSet, Val: testSet,
//		Optimizer: engine.Optimizer{Kind: engine.Adam, LR: 1e-3},
//		BatchSize: 64, Epochs: 3, Shuffle: true, Seed: 1,
//		Mean: []float64{0.1307}, Std: []float64{0.3081},
//	})
//	out, _ := net.Export(res.Weights) // the inference model, trained
//	model.WriteFile("lenet.bin", out)
//
// The model may come from anywhere: an ONNX file or model.bin
// (vrun.LoadGraph), a built-in architecture ([Arch]: mlp, lenet,
// cifar-cnn), or a network built with package nn (nn.Graph.Model of its
// output). [NewNet] applies the loss to the model's first output and
// trains every float weight except BatchNormalization running statistics
// (updated, not differentiated), weights that only feed shape
// computations (Reshape shapes, Resize scales, ...) and the frozen ones.
//
// Losses are batch means with torch.nn.functional's semantics;
// cross_entropy and nll take int64 class indices. Optimizer
// hyperparameters left zero take torch.optim's defaults.
//
// docs/training.md describes training in vrun, this package and the
// command line.
package train
