package nn_test

import (
	"math"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/optimref"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// scheduleOf builds the schedule of a cases.json configuration: a function
// from the step and the metrics before it to the step's learning rate.
func scheduleOf(t *testing.T, c optimref.Schedule) optimref.LRFunc {
	t.Helper()
	var s nn.Schedule
	var err error
	switch c.Kind {
	case "step":
		s, err = nn.StepLR(c.LR, c.StepSize, c.Gamma)
	case "multistep":
		s, err = nn.MultiStepLR(c.LR, c.Milestones, c.Gamma)
	case "exponential":
		s, err = nn.ExponentialLR(c.LR, c.Gamma)
	case "warmup_cosine":
		s, err = nn.WarmupCosineLR(c.LR, c.Warmup, c.StartFactor, c.Total, c.MinLR)
	case "onecycle":
		s, err = nn.OneCycleLR(c.LR, c.Total, nn.OneCycleOptions{PctStart: c.PctStart, DivFactor: c.DivFactor, FinalDivFactor: c.FinalDiv})
	case "plateau":
		o := nn.DefaultPlateauOptions()
		o.Max, o.AbsThreshold = c.Mode == "max", c.ThresholdMode == "abs"
		o.Factor, o.Patience, o.Threshold, o.Cooldown, o.MinLR = c.Factor, c.Patience, c.Threshold, c.Cooldown, c.MinLR
		p, err := nn.NewPlateau(c.LR, o)
		if err != nil {
			t.Fatal(err)
		}
		return func(k int, metrics []float64) float64 {
			for p.Steps() < k {
				p.Step(metrics[p.Steps()])
			}
			return p.LR()
		}
	default:
		t.Fatalf("unknown schedule kind %q", c.Kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return func(k int, _ []float64) float64 { return s.LR(k) }
}

// TestSchedulesTorch compares every schedule's rates with
// torch.optim.lr_scheduler's, step by step (testdata/optim/gen.py).
// torch computes most schedules recursively (lr *= gamma), these are
// closed forms: they agree to rounding, rtol 1e-12.
func TestSchedulesTorch(t *testing.T) {
	m, err := optimref.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Schedules {
		t.Run(c.Name, func(t *testing.T) {
			lr := scheduleOf(t, c)
			for k, want := range c.LRs {
				got := lr(k, c.Metrics)
				if math.Abs(got-want) > 1e-12*c.LR+1e-12*math.Abs(want) {
					t.Fatalf("step %d: rate %.17g, torch %.17g", k, got, want)
				}
			}
		})
	}
}

// TestSchedulesTrainer trains with a schedule driving Trainer.SetLR
// between steps (the step is recorded once) and compares the weights
// after every step with torch.optim under the same
// torch.optim.lr_scheduler schedule; ReduceLROnPlateau is given each
// step's loss.
func TestSchedulesTrainer(t *testing.T) {
	m, err := optimref.Load()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	n := 0
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, c := range m.Optimizers {
			if c.Schedule == "" {
				continue
			}
			n++
			t.Run(c.Name+"_"+dt.String(), func(t *testing.T) {
				sc, ok := m.ScheduleConfigs[c.Schedule]
				if !ok {
					t.Fatalf("schedule %q not in cases.json", c.Schedule)
				}
				sc.LR = c.LR
				optimref.Run(t, dev, m, c, dt, scheduleOf(t, sc))
				// The schedule matters: a constant rate misses the reference.
				d, err := m.LoadData(dt, c.Name)
				if err != nil {
					t.Fatal(err)
				}
				res, err := optimref.Train(dev, c.Optimizer(), d, d.Want, optimref.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if res.FirstFail < 0 {
					t.Errorf("a constant rate %g matches the scheduled reference", c.LR)
				}
			})
		}
	}
	if n < 12 {
		t.Fatalf("%d scheduled runs, want 12 (6 schedules × f32, f64)", n)
	}
}

func TestScheduleErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() error
	}{
		{"step_size_0", func() error { _, err := nn.StepLR(0.1, 0, 0.5); return err }},
		{"step_nan_rate", func() error { _, err := nn.StepLR(math.NaN(), 3, 0.5); return err }},
		{"step_negative_gamma", func() error { _, err := nn.StepLR(0.1, 3, -0.5); return err }},
		{"multistep_negative_milestone", func() error { _, err := nn.MultiStepLR(0.1, []int{3, -1}, 0.5); return err }},
		{"exponential_inf_rate", func() error { _, err := nn.ExponentialLR(math.Inf(1), 0.9); return err }},
		{"cosine_total_not_after_warmup", func() error { _, err := nn.WarmupCosineLR(0.1, 5, 0.1, 5, 0); return err }},
		{"cosine_start_factor_0", func() error { _, err := nn.WarmupCosineLR(0.1, 5, 0, 10, 0); return err }},
		{"cosine_negative_min", func() error { _, err := nn.WarmupCosineLR(0.1, 0, 1, 10, -1); return err }},
		{"onecycle_pct_1", func() error { _, err := nn.OneCycleLR(0.1, 10, nn.OneCycleOptions{PctStart: 1}); return err }},
		{"onecycle_too_short", func() error { _, err := nn.OneCycleLR(0.1, 3, nn.OneCycleOptions{}); return err }},
		{"plateau_factor_1", func() error {
			o := nn.DefaultPlateauOptions()
			o.Factor = 1
			_, err := nn.NewPlateau(0.1, o)
			return err
		}},
		{"plateau_zero_options", func() error { _, err := nn.NewPlateau(0.1, nn.PlateauOptions{}); return err }},
		{"plateau_negative_patience", func() error {
			o := nn.DefaultPlateauOptions()
			o.Patience = -1
			_, err := nn.NewPlateau(0.1, o)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestScheduleEnds checks the documented behaviour outside torch's range:
// negative steps are step 0, the cosine stays at its minimum after total
// and OneCycle at its final rate.
func TestScheduleEnds(t *testing.T) {
	c, err := nn.WarmupCosineLR(0.1, 2, 0.5, 10, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if c.LR(-3) != 0.05 || c.LR(10) != 0.01 || c.LR(1000) != 0.01 {
		t.Errorf("cosine: LR(-3)=%g LR(10)=%g LR(1000)=%g, want 0.05 0.01 0.01", c.LR(-3), c.LR(10), c.LR(1000))
	}
	o, err := nn.OneCycleLR(1, 20, nn.OneCycleOptions{DivFactor: 10, FinalDivFactor: 100})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(o.LR(19)-1e-3) > 1e-15 || o.LR(500) != o.LR(19) || math.Abs(o.LR(0)-0.1) > 1e-15 {
		t.Errorf("onecycle: LR(0)=%g LR(19)=%g LR(500)=%g, want 0.1 0.001 0.001", o.LR(0), o.LR(19), o.LR(500))
	}
	p, err := nn.NewPlateau(1, nn.PlateauOptions{Factor: 0.5, Patience: 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{1, math.NaN(), math.NaN()} {
		p.Step(v)
	}
	if p.LR() != 0.25 || p.Best() != 1 {
		t.Errorf("plateau after 1, NaN, NaN with patience 0: rate %g best %g, want 0.25 and 1", p.LR(), p.Best())
	}
}
