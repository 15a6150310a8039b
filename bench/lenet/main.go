// Command lenet times LeNet-5 training epochs on MNIST with vrun, for
// bench/lenet_mnist.py, which runs it side by side with PyTorch: the same
// network (train.LeNet5), Adam at 1e-3, batch 64, shuffled, normalised, no
// augmentation, PyTorch's initialisation.
//
//	go run ./bench/lenet -device cpu -epochs 1 [-steps N] [-profile]
//
// It prints one line per epoch, "epoch E seconds S steps N cpu C" (C: the
// CPU seconds the process used for the epoch's steps 2..N, all threads,
// scaled to N steps; 0 where not measured), then "test accuracy A" (the
// fraction of the 10000 test images), and with -profile the per-op device
// times of the last step. -steps N stops each epoch after N steps (the
// seconds are then those of N steps).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	_ "github.com/vrun-go/vrun" // every backend, for rt.Open
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/gomnist"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

func main() {
	device := flag.String("device", "cpu", "device")
	epochs := flag.Int("epochs", 1, "epochs")
	steps := flag.Int("steps", 0, "stop each epoch after this many steps (0: the whole epoch)")
	batch := flag.Int("batch", 64, "batch size")
	profile := flag.Bool("profile", false, "print the per-op times of the last step")
	dataDir := flag.String("data", "", "folder of the MNIST files (default: the GoMNIST module's)")
	flag.Parse()
	if err := run(*dataDir, *device, *epochs, *steps, *batch, *profile); err != nil {
		log.Fatal(err)
	}
}

func run(dir, device string, epochs, steps, batch int, profile bool) error {
	var err error
	if dir == "" {
		if dir, err = gomnist.Dir(); err != nil {
			return err
		}
	}
	trainSet, err := data.ReadMNISTDir(dir, true)
	if err != nil {
		return err
	}
	testSet, err := data.ReadMNISTDir(dir, false)
	if err != nil {
		return err
	}
	if steps > 0 {
		idx := make([]int, min(steps*batch, trainSet.Len()))
		for i := range idx {
			idx[i] = i
		}
		if trainSet, err = trainSet.Subset(idx); err != nil {
			return err
		}
	}
	m, err := train.Arch("lenet", train.ArchOptions{Sample: []int{1, 28, 28}, Outputs: 10, Seed: 1})
	if err != nil {
		return err
	}
	net, err := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
	if err != nil {
		return err
	}
	dev, err := rt.Open(device, nil)
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Printf("device %s %s\n", dev.Info().Spec(), dev.Info().Name)
	t0 := time.Now()
	c0 := cpuTime() // the CPU time of an epoch: from one epoch's end to the next
	res, err := train.Run(context.Background(), train.Config{
		Net: net, Device: dev,
		Optimizer: engine.Optimizer{Kind: engine.Adam, LR: 1e-3},
		Train:     trainSet, Val: testSet,
		BatchSize: batch, Epochs: epochs, Shuffle: true, Seed: 1,
		Mean: []float64{0.1307}, Std: []float64{0.3081},
		Profile: profile,
		Progress: func(p train.Progress) {
			if p.Batch == 1 && p.EpochDone == nil {
				c0 = cpuTime() // after the epoch's first step: planning is not counted
			}
			if e := p.EpochDone; e != nil {
				// The validation that follows is not counted; the CPU time
				// covers steps 2..N of the epoch, scaled to N steps.
				c := (cpuTime() - c0).Seconds() * float64(p.Batches) / float64(max(p.Batches-1, 1))
				fmt.Printf("epoch %d seconds %.3f steps %d cpu %.3f\n", e.Epoch, e.Seconds, p.Batches, c)
			}
		},
	})
	if err != nil {
		return err
	}
	fmt.Printf("test accuracy %.4f\n", res.Final.Accuracy)
	fmt.Printf("total seconds %.3f\n", time.Since(t0).Seconds())
	if profile {
		sort.Slice(res.Profile, func(a, b int) bool { return res.Profile[a].Time > res.Profile[b].Time })
		var total time.Duration
		for _, p := range res.Profile {
			total += p.Time
		}
		fmt.Printf("profile of the last step: %.3f ms\n", float64(total)/1e6)
		for _, p := range res.Profile {
			fmt.Fprintf(os.Stdout, "  %-40s %-28s %9.3f ms %5.1f%%\n", p.Node, p.Op, float64(p.Time)/1e6, 100*float64(p.Time)/float64(total))
		}
	}
	return nil
}
