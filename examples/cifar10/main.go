// Command cifar10 trains a small CNN on CIFAR-10: conv(3→32, 3×3) - ReLU
// - max-pool, conv(32→64, 3×3) - ReLU - max-pool, linear (train.CIFARCNN),
// with Adam, random crops (padding 4) and horizontal flips.
//
//	go run ./examples/cifar10 -data ~/data/cifar-10-batches-bin   # the real data
//	go run ./examples/cifar10                                      # synthetic data
//
// -data takes the folder of the CIFAR-10 binary version (data_batch_1.bin
// … data_batch_5.bin and test_batch.bin, or the folder the archive
// cifar-10-binary.tar.gz unpacks into; docs/data.md says where to get it).
// Without -data the example writes a synthetic dataset in the same
// binary format to a temporary folder and trains on that: ten classes of
// coloured, oriented stripes with noise, which the network learns to tell
// apart in an epoch or two. CI runs it that way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"

	_ "github.com/vrun-go/vrun" // every backend, for rt.Open
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

type options struct {
	dataDir       string
	device        string
	epochs, batch int
	lr            float64
	seed          uint64
	synthetic     int // images per class and split of the synthetic set
	out           string
}

func main() {
	var o options
	flag.StringVar(&o.dataDir, "data", "", "folder of the CIFAR-10 binary batches (default: a synthetic dataset in that format)")
	flag.StringVar(&o.device, "device", "auto", "device: auto, cpu, vulkan, cuda:0, opencl:0")
	flag.IntVar(&o.epochs, "epochs", 10, "epochs")
	flag.IntVar(&o.batch, "batch", 64, "batch size")
	flag.Float64Var(&o.lr, "lr", 1e-3, "learning rate (Adam)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the weights, the shuffling and the augmentation")
	flag.IntVar(&o.synthetic, "synthetic", 100, "without -data: synthetic training images per class and batch file")
	flag.StringVar(&o.out, "o", "", "write the trained model to this model.bin")
	flag.Parse()
	if o.dataDir == "" && !isFlagSet("epochs") {
		o.epochs = 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(ctx context.Context, o options, w io.Writer) (*train.Result, error) {
	dir := o.dataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "cifar10-synthetic")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := WriteSynthetic(tmp, o.synthetic, o.seed); err != nil {
			return nil, err
		}
		dir = tmp
		fmt.Fprintf(w, "no -data: a synthetic dataset in CIFAR-10's binary format (%s)\n", dir)
	}
	trainSet, err := data.ReadCIFAR10Dir(dir, true)
	if err != nil {
		return nil, err
	}
	testSet, err := data.ReadCIFAR10Dir(dir, false)
	if err != nil {
		return nil, err
	}
	net, err := train.NewClassifier("cifar-cnn", []int{3, 32, 32}, 10, o.seed)
	if err != nil {
		return nil, err
	}
	dev, err := rt.Open(o.device, nil)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	info := dev.Info()
	fmt.Fprintf(w, "CIFAR-10 CNN: %d training and %d test images, device %s (%s), batch %d, %d epochs\n",
		trainSet.Len(), testSet.Len(), info.Spec(), info.Name, o.batch, o.epochs)
	res, err := train.Run(ctx, train.Config{
		Net: net, Device: dev,
		Optimizer: engine.Optimizer{Kind: engine.Adam, LR: o.lr},
		Train:     trainSet, Val: testSet,
		BatchSize: o.batch, Epochs: o.epochs, Shuffle: true, Seed: o.seed,
		// The CIFAR-10 channel statistics.
		Mean: []float64{0.4914, 0.4822, 0.4465}, Std: []float64{0.2470, 0.2435, 0.2616},
		CropPadding: 4, HFlip: true,
		Progress: func(p train.Progress) {
			if e := p.EpochDone; e != nil {
				fmt.Fprintf(w, "epoch %2d  %v\n", e.Epoch, *e)
			}
		},
	})
	if errors.Is(err, train.ErrInterrupted) {
		return res, err
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "test accuracy %.2f%% after %d epochs\n", 100*res.Final.Accuracy, len(res.Epochs))
	if o.out != "" {
		if err := net.ExportFile(o.out, res.Weights); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "wrote %s\n", o.out)
	}
	return res, nil
}

// WriteSynthetic writes a CIFAR-10-like dataset in the binary format of
// the real one (each record: a label byte, then 1024 red, 1024 green and
// 1024 blue bytes, rows top to bottom) into dir: data_batch_1.bin …
// data_batch_5.bin with perClass images of each class each, and
// test_batch.bin with as many. Class c is a pattern of stripes at angle
// c·18° in a colour of its own, at a random phase, with noise: a task a
// small CNN learns in a few hundred steps, not a trivial one.
func WriteSynthetic(dir string, perClass int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x63696661))
	names := []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}
	for _, name := range names {
		var b []byte
		for range 10 * perClass {
			c := rng.IntN(10)
			b = append(b, byte(c))
			angle := float64(c) * math.Pi / 10
			dx, dy := math.Cos(angle), math.Sin(angle)
			phase := rng.Float64() * 2 * math.Pi
			col := [3]float64{float64(c%3) / 2, float64((c/3)%3) / 2, float64(c % 2)}
			for ch := range 3 {
				for y := range 32 {
					for x := range 32 {
						s := 0.5 + 0.5*math.Sin(0.8*(float64(x)*dx+float64(y)*dy)+phase)
						v := 255 * (0.25 + 0.5*s*(0.3+0.7*col[ch]))
						v += rng.NormFloat64() * 40
						b = append(b, byte(max(0, min(255, v))))
					}
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
