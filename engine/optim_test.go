package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/optimref"
	"github.com/vrun-go/vrun/rt"
)

// TestOptimizersTorch runs every optimizer configuration of
// testdata/optim for 20 steps and compares the weights after each step
// with torch.optim's (f64: rtol 1e-10; f32: rtol 1e-5).
func TestOptimizersTorch(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	optimref.Check(t, dev)
}

// TestOptimizerMixUps guards the test itself against a known failure of
// NN libraries: decoupled (AdamW) and L2 (Adam) weight decay mixed up, and
// optimizer moments swapped. Each wrong optimizer must be caught by the
// comparison TestOptimizersTorch makes: run on the CPU against another
// configuration's torch reference, it has to fail the tolerance.
func TestOptimizerMixUps(t *testing.T) {
	m, err := optimref.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]optimref.Config{}
	for _, c := range m.Optimizers {
		cfg[c.Name] = c
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	swapBetas := func(c optimref.Config) engine.Optimizer {
		o := c.Optimizer()
		o.Beta1, o.Beta2 = o.Beta2, o.Beta1
		return o
	}
	for _, tc := range []struct {
		name string
		run  engine.Optimizer // what the engine runs
		ref  string           // the torch reference it must not match
	}{
		{"adamw_as_adam_wd", cfg["adamw_wd"].Optimizer(), "adam_wd"},
		{"adam_wd_as_adamw", cfg["adam_wd"].Optimizer(), "adamw_wd"},
		{"adam_without_wd", cfg["adam"].Optimizer(), "adam_wd"},
		{"adamw_moments_swapped", swapBetas(cfg["adamw_betas_wd"]), "adamw_betas_wd"},
		{"adagrad_no_init_accum", func() engine.Optimizer {
			o := cfg["adagrad_full"].Optimizer()
			o.InitAccum = 0
			return o
		}(), "adagrad_full"},
		{"adagrad_no_lr_decay", func() engine.Optimizer {
			o := cfg["adagrad_full"].Optimizer()
			o.LRDecay = 0
			return o
		}(), "adagrad_full"},
		{"rmsprop_not_centered", func() engine.Optimizer {
			o := cfg["rmsprop_all"].Optimizer()
			o.Centered = false
			return o
		}(), "rmsprop_all"},
	} {
		for _, dt := range []rt.DType{rt.F32, rt.F64} {
			t.Run(tc.name+"_"+dt.String(), func(t *testing.T) {
				d, err := m.LoadData(dt, tc.ref)
				if err != nil {
					t.Fatal(err)
				}
				res, err := optimref.Train(dev, tc.run, d, d.Want, optimref.Options{})
				if err != nil {
					t.Fatal(err)
				}
				// Caught at the tolerance, and by a wide margin.
				if res.FirstFail < 0 || res.Worst < 100 {
					t.Errorf("the wrong optimizer matches reference %s: worst %.3g× tolerance", tc.ref, res.Worst)
				}
			})
		}
	}
}

// TestOptimizerAcrossPlans alternates the trainer between two input
// shapes (two plans) whose gradients are the same; the parameters,
// optimizer state and step count live in buffers the plans share, so the
// run must still match torch.optim step by step.
func TestOptimizerAcrossPlans(t *testing.T) {
	m, err := optimref.Load()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	for _, c := range m.Optimizers {
		switch c.Name {
		case "sgd_momentum_wd", "sgd_nesterov", "adam_betas", "adamw_wd", "adagrad_full", "rmsprop_all", "sgd_clip":
		default:
			continue
		}
		for _, dt := range []rt.DType{rt.F32, rt.F64} {
			t.Run(c.Name+"_"+dt.String(), func(t *testing.T) {
				d, err := m.LoadData(dt, c.Name)
				if err != nil {
					t.Fatal(err)
				}
				res, err := optimref.Train(dev, c.Optimizer(), d, d.Want, optimref.Options{Split: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.FirstFail >= 0 {
					t.Errorf("weights differ from torch.optim from step %d on; worst %.3g× tolerance at step %d",
						res.FirstFail+1, res.Worst, res.WorstStep+1)
				}
			})
		}
	}
}

// TestOptimizerOpCount checks that the optimizer adds one primitive to a
// training step, the fused rt.OptimStep over the flat parameters, and,
// with ClipNorm, the four ops of the clipping coefficient: a trainer with
// the optimizer plans exactly those ops more than one without.
func TestOptimizerOpCount(t *testing.T) {
	m, err := optimref.Load()
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.LoadData(rt.F32, "sgd")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := optimref.Model(d.W0, false)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	in := map[string]*rt.Tensor{}
	for i, c := range d.C {
		n := len(c.Data) / c.Shape[0]
		in[fmt.Sprintf("c%d", i)] = &rt.Tensor{DType: c.DType, Shape: c.Shape[1:], Data: c.Data[:n]}
	}
	counts := func(o *engine.Optimizer) engine.Info {
		t.Helper()
		tr, err := engine.NewTrainer(mod, dev, engine.TrainOptions{Loss: "loss", Optimizer: o})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.Step(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		return tr.Info()
	}
	base := counts(nil)
	clip := map[string]int{"Reduce.L2": 1, "Unary.Affine": 1, "Binary.Div": 1, "Unary.Clip": 1}
	for _, tc := range []struct {
		case_ string
		opt   engine.Optimizer
		name  string // the OptimStep's op name
	}{
		{"sgd", engine.Optimizer{Kind: engine.SGD, LR: 0.1}, "OptimStep.SGD"},
		{"sgd_nesterov_wd", engine.Optimizer{Kind: engine.SGD, LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.01}, "OptimStep.SGD"},
		{"adam_wd", engine.Optimizer{Kind: engine.Adam, LR: 0.01, WeightDecay: 0.1}, "OptimStep.Adam"},
		{"adamw_clip", engine.Optimizer{Kind: engine.AdamW, LR: 0.01, WeightDecay: 0.1, ClipNorm: 1}, "OptimStep.Adam"},
		{"adagrad", engine.Optimizer{Kind: engine.AdaGrad, LR: 0.1, LRDecay: 0.1, InitAccum: 0.5}, "OptimStep.AdaGrad"},
		{"rmsprop_all_clip", engine.Optimizer{Kind: engine.RMSProp, LR: 0.01, Centered: true, Momentum: 0.5, WeightDecay: 0.1, ClipNorm: 2}, "OptimStep.RMSProp"},
	} {
		o := tc.opt
		t.Run(tc.case_, func(t *testing.T) {
			got := counts(&o)
			want := map[string]int{tc.name: 1}
			if o.ClipNorm > 0 {
				maps.Copy(want, clip)
			}
			added := 0
			for _, v := range want {
				added += v
			}
			if got.Ops-base.Ops != added {
				t.Errorf("the optimizer adds %d ops, want %d", got.Ops-base.Ops, added)
			}
			keys := maps.Clone(got.OpCounts)
			maps.Copy(keys, want)
			for k := range keys {
				if d := got.OpCounts[k] - base.OpCounts[k]; d != want[k] {
					t.Errorf("the optimizer adds %d ops %s, want %d", d, k, want[k])
				}
			}
		})
	}
}

// TestOptimizerF16 checks that an optimizer over f16 parameters, which
// rt.OptimStep does not implement, fails planning with ErrUnsupported
// naming the op.
func TestOptimizerF16(t *testing.T) {
	w := rt.FromFloat64(rt.F16, []float64{1, 2, 3}, 3)
	mod, err := optimref.Model([]*rt.Tensor{w}, false)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	_, err = engine.NewTrainer(mod, dev, engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.1}})
	if !errors.Is(err, rt.ErrUnsupported) || !strings.Contains(err.Error(), "OptimStep.Adam") {
		t.Fatalf("NewTrainer with f16 parameters: %v, want ErrUnsupported naming OptimStep.Adam", err)
	}
}
