package train_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

// A checkpoint written every few steps, in the middle of an epoch,
// resumes to exactly the run that was never stopped: the same losses,
// epoch metrics and weights.
func TestCheckpointEveryResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 90
	x := make([]float64, n*6)
	y := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	for i := range y {
		if x[i*6]+x[i*6+1] > 0 {
			y[i] = 1
		}
	}
	d, err := data.NewDataset(rt.FromFloat64(rt.F32, x, n, 6), rt.FromFloat64(rt.I64, y, n), 2)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	dir := t.TempDir()
	run := func(epochs, every int, resume bool) *train.Result {
		m, err := train.Arch("mlp", train.ArchOptions{Sample: []int{6}, Outputs: 2, Seed: 4, Hidden: 16})
		if err != nil {
			t.Fatal(err)
		}
		net, err := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
		if err != nil {
			t.Fatal(err)
		}
		cfg := train.Config{Net: net, Device: dev, Optimizer: engine.Optimizer{Kind: engine.RMSProp, LR: 0.01, Momentum: 0.5},
			Train: d, Val: d, BatchSize: 8, Epochs: epochs, Shuffle: true, Seed: 9, CheckpointDir: dir, CheckpointEvery: every}
		if resume {
			if cfg.Resume, err = train.ReadCheckpoint(dir); err != nil {
				t.Fatal(err)
			}
		}
		res, err := train.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	straight := run(3, 0, false)
	// Evaluate on the final weights gives the run's final metrics.
	m, _ := train.Arch("mlp", train.ArchOptions{Sample: []int{6}, Outputs: 2, Seed: 4, Hidden: 16})
	net, _ := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
	ev, err := train.Evaluate(context.Background(), net, dev, straight.Weights, d, 8, nil, nil)
	if err != nil || ev != straight.Final {
		t.Errorf("Evaluate: %+v, %v; the run's final metrics %+v", ev, err, straight.Final)
	}
	run(2, 17, false) // 12 steps an epoch: the last checkpoint is step 17, batch 5 of epoch 2
	ck, err := train.ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Train.Steps != 17 || ck.Epoch != 1 || ck.Loader.Batch != 5 {
		t.Fatalf("checkpoint at step %d, epoch %d, batch %d; want 17, 1, 5", ck.Train.Steps, ck.Epoch, ck.Loader.Batch)
	}
	resumed := run(3, 0, true)
	if len(resumed.Losses) != len(straight.Losses) {
		t.Fatalf("%d losses, want %d", len(resumed.Losses), len(straight.Losses))
	}
	for k := range straight.Losses {
		if resumed.Losses[k] != straight.Losses[k] {
			t.Fatalf("step %d: loss %v, uninterrupted %v", k+1, resumed.Losses[k], straight.Losses[k])
		}
	}
	for e := range straight.Epochs {
		a, b := straight.Epochs[e], resumed.Epochs[e]
		if a.Train.Loss != b.Train.Loss || a.Train.Accuracy != b.Train.Accuracy || a.Val != b.Val {
			t.Errorf("epoch %d: %+v, uninterrupted %+v", e+1, b, a)
		}
	}
	for name, w := range straight.Weights {
		if string(resumed.Weights[name].Data) != string(w.Data) {
			t.Errorf("weight %s differs", name)
		}
	}
}
