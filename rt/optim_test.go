package rt

import (
	"math"
	"strings"
	"testing"
)

// TestOptimStepCheck checks CheckOp's rules for OptimStep: the states each
// rule uses, the flags each rule allows and the coefficient ranges.
func TestOptimStepCheck(t *testing.T) {
	b := fakeBuf{1 << 20}
	v := func(n int) Ref { return Ref{Buf: b, DType: F32, Shape: []int{n}} }
	const n = 37
	p, h, s := v(n), v(OptimHyperLen), v(1)
	for _, tc := range []struct {
		name string
		op   OptimStep
		err  string // "" when valid
	}{
		{"sgd", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: n}, ""},
		{"sgd momentum", OptimStep{Fn: OptimSGD, P: p, G: v(n), S1: v(n), H: h, Scale: s, N: n, Momentum: 0.9}, ""},
		{"sgd momentum without buffer", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: n, Momentum: 0.9}, "S1 has no buffer"},
		{"sgd buffer without momentum", OptimStep{Fn: OptimSGD, P: p, G: v(n), S1: v(n), H: h, N: n}, "S1 given"},
		{"nesterov dampening", OptimStep{Fn: OptimSGD, P: p, G: v(n), S1: v(n), H: h, N: n, Momentum: 0.9, Dampening: 0.1, Nesterov: true}, "Nesterov"},
		{"nesterov without momentum", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: n, Nesterov: true}, "Nesterov"},
		{"adam", OptimStep{Fn: OptimAdam, P: p, G: v(n), S1: v(n), S2: v(n), H: h, N: n, Beta1: 0.9, Beta2: 0.999}, ""},
		{"adam one state", OptimStep{Fn: OptimAdam, P: p, G: v(n), S1: v(n), H: h, N: n}, "S2 has no buffer"},
		{"adam beta 1", OptimStep{Fn: OptimAdam, P: p, G: v(n), S1: v(n), S2: v(n), H: h, N: n, Beta1: 1}, "betas"},
		{"adam S3", OptimStep{Fn: OptimAdam, P: p, G: v(n), S1: v(n), S2: v(n), S3: v(n), H: h, N: n}, "S3 given"},
		{"decoupled sgd", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: n, Decoupled: true}, "Decoupled"},
		{"centered adagrad", OptimStep{Fn: OptimAdaGrad, P: p, G: v(n), S1: v(n), H: h, N: n, Centered: true}, "Centered"},
		{"rmsprop centered momentum", OptimStep{Fn: OptimRMSProp, P: p, G: v(n), S1: v(n), S2: v(n), S3: v(n), H: h, N: n, Centered: true, Momentum: 0.5}, ""},
		{"rmsprop momentum only", OptimStep{Fn: OptimRMSProp, P: p, G: v(n), S1: v(n), S3: v(n), H: h, N: n, Momentum: 0.5}, ""},
		{"rmsprop centered without S2", OptimStep{Fn: OptimRMSProp, P: p, G: v(n), S1: v(n), H: h, N: n, Centered: true}, "S2 has no buffer"},
		{"negative weight decay", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: n, WeightDecay: -1}, "negative"},
		{"nan eps", OptimStep{Fn: OptimAdaGrad, P: p, G: v(n), S1: v(n), H: h, N: n, Eps: math.NaN()}, "non-finite"},
		{"unknown rule", OptimStep{Fn: OptimFn(9), P: p, G: v(n), H: h, N: n}, "unknown"},
		{"short G", OptimStep{Fn: OptimSGD, P: p, G: v(n - 1), H: h, N: n}, "G has 36 elements"},
		{"short H", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: v(2), N: n}, "H has 2 elements"},
		{"no H", OptimStep{Fn: OptimSGD, P: p, G: v(n), N: n}, "[H] has no buffer"},
		{"negative N", OptimStep{Fn: OptimSGD, P: p, G: v(n), H: h, N: -1}, "out of range"},
	} {
		err := CheckOp(&tc.op)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && err == nil:
			t.Errorf("%s: accepted", tc.name)
		case tc.err != "" && !strings.Contains(err.Error(), tc.err):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
}

// TestOptimStepHyper checks the per-step values against torch.optim's
// formulas written out by hand.
func TestOptimStepHyper(t *testing.T) {
	adam := &OptimStep{Fn: OptimAdam, Beta1: 0.8, Beta2: 0.95, WeightDecay: 0.1}
	h := adam.Hyper(3, 0.02, 0)
	want := []float64{0.02, 0, 0.02 / (1 - 0.8*0.8*0.8), math.Sqrt(1 - 0.95*0.95*0.95), 1 - 0.02*0.1}
	for i := range want {
		if math.Abs(h[i]-want[i]) > 1e-15 {
			t.Errorf("Adam H[%d] = %v, want %v", i, h[i], want[i])
		}
	}
	if h := (&OptimStep{Fn: OptimSGD}).Hyper(1, 0.5, 0); h[OptimFirst] != 1 || h[OptimLR] != 0.5 {
		t.Errorf("SGD step 1: H = %v, want lr 0.5 and first 1", h)
	}
	if h := (&OptimStep{Fn: OptimSGD}).Hyper(2, 0.5, 0); h[OptimFirst] != 0 {
		t.Errorf("SGD step 2: H = %v, want first 0", h)
	}
	if h := (&OptimStep{Fn: OptimAdaGrad}).Hyper(5, 0.1, 0.05); math.Abs(h[OptimLR]-0.1/1.2) > 1e-16 {
		t.Errorf("AdaGrad step 5: lr %v, want %v", h[OptimLR], 0.1/1.2)
	}
}
