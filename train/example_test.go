package train_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

// mnistSubset returns the first n images of the real MNIST training and
// test sets.
func mnistSubset(n int) (trainSet, testSet *data.Dataset) {
	dir, err := gomnist.Dir()
	if err != nil {
		log.Fatal(err)
	}
	first := func(isTrain bool) *data.Dataset {
		d, err := data.ReadMNISTDir(dir, isTrain)
		if err != nil {
			log.Fatal(err)
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		s, err := d.Subset(idx)
		if err != nil {
			log.Fatal(err)
		}
		return s
	}
	return first(true), first(false)
}

// Train the built-in MLP on 2000 real MNIST digits, validate on 2000
// test digits after each epoch, and export the trained inference model.
func Example() {
	trainSet, testSet := mnistSubset(2000)
	m, err := train.Arch("mlp", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	net, err := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
	if err != nil {
		log.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	res, err := train.Run(context.Background(), train.Config{
		Net: net, Device: dev,
		Optimizer: engine.Optimizer{Kind: engine.Adam, LR: 2e-3},
		Train:     trainSet, Val: testSet,
		BatchSize: 50, Epochs: 3, Shuffle: true, Seed: 1,
		Mean: []float64{0.1307}, Std: []float64{0.3081},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("trained:", net.Params)
	fmt.Println("steps:", res.Steps, "epochs:", len(res.Epochs))
	fmt.Println("test accuracy above 85%:", res.Final.Accuracy > 0.85)

	out, err := net.Export(res.Weights) // the original graph, trained weights
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exported inputs and outputs:", out.Tensors[out.Inputs()[0]].Name, out.Tensors[out.Outputs()[0]].Name)
	// Output:
	// trained: [1.weight 1.bias 3.weight 3.bias]
	// steps: 120 epochs: 3
	// test accuracy above 85%: true
	// exported inputs and outputs: x logits
}

// Attach a loss to a model from anywhere (here one built with
// model.Builder, as an ONNX import would give): the loss takes the first
// output and a new target input; every float weight trains except the
// frozen ones and those that only feed a shape.
func ExampleNewNet() {
	b := model.NewBuilder()
	b.Input("x", rt.F32, -1, 4)
	w := b.Weight("fc.weight", rt.F32, []int64{3, 4}, make([]float32, 12))
	bias := b.Weight("fc.bias", rt.F32, []int64{3}, make([]float32, 3))
	scale := b.Weight("scale", rt.F32, []int64{1}, []float32{0.5})
	like := b.Weight("like", rt.F32, []int64{1, 3}, make([]float32, 3)) // read only for its shape
	y := b.Op("Gemm", []string{"x", w, bias}, model.Attrs{"transB": 1})
	y = b.Op("Mul", []string{y, scale}, nil)
	b.Node("out", "Expand", []string{y, b.Op("Shape", []string{like}, nil)}, []string{"y"}, nil)
	b.Output("y")
	m, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	net, err := train.NewNet(m, train.NetOptions{Loss: train.MSE, Freeze: []string{"scale"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("trained:", net.Params)
	fmt.Println("frozen:", net.Frozen)
	fmt.Println("output per sample:", net.OutSample, "target input:", net.Target, "loss output:", net.LossName)
	// Output:
	// trained: [fc.weight fc.bias]
	// frozen: [scale like]
	// output per sample: [3] target input: target loss output: loss
}

// Checkpoint after each epoch, and resume: the resumed run takes the
// steps the uninterrupted one would have.
func ExampleReadCheckpoint() {
	trainSet, testSet := mnistSubset(500)
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dev := cpu.NewDevice()
	defer dev.Close()
	runTo := func(epochs int, resume bool) *train.Result {
		m, err := train.Arch("mlp", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10, Seed: 1})
		if err != nil {
			log.Fatal(err)
		}
		net, err := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
		if err != nil {
			log.Fatal(err)
		}
		cfg := train.Config{Net: net, Device: dev, Optimizer: engine.Optimizer{Kind: engine.SGD, LR: 0.05, Momentum: 0.9},
			Train: trainSet, Val: testSet, BatchSize: 50, Epochs: epochs, Shuffle: true, Seed: 3,
			CheckpointDir: dir, EpochCheckpoints: true}
		if resume {
			if cfg.Resume, err = train.ReadCheckpoint(dir); err != nil {
				log.Fatal(err)
			}
		}
		res, err := train.Run(context.Background(), cfg)
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	first := runTo(1, false) // writes dir/last.ckpt after epoch 1
	resumed := runTo(3, true)
	os.RemoveAll(dir)
	straight := runTo(3, false)
	_, err = os.Stat(filepath.Join(dir, train.CheckpointFile))
	fmt.Println("steps:", first.Steps, resumed.Steps, "checkpoint written:", err == nil)
	fmt.Println("same final loss as without the break:", resumed.Final.Loss == straight.Final.Loss)
	// Output:
	// steps: 10 30 checkpoint written: true
	// same final loss as without the break: true
}
