package rt

import (
	"fmt"
	"math"
)

// OptimFn is the update rule of an OptimStep.
type OptimFn uint8

// Optimizer update rules, after torch.optim's single-tensor
// implementations.
const (
	OptimSGD     OptimFn = iota // SGD: momentum, dampening, Nesterov, L2 weight decay
	OptimAdam                   // Adam; AdamW with Decoupled
	OptimAdaGrad                // AdaGrad (lr decay through H)
	OptimRMSProp                // RMSProp: centered, momentum
	numOptim
)

var optimNames = [...]string{OptimSGD: "SGD", OptimAdam: "Adam", OptimAdaGrad: "AdaGrad", OptimRMSProp: "RMSProp"}

// NumOptimFns is the number of optimizer update rules.
const NumOptimFns = int(numOptim)

func (f OptimFn) String() string {
	if int(f) < len(optimNames) {
		return optimNames[f]
	}
	return fmt.Sprintf("OptimFn(%d)", f)
}

// Slots of OptimStep.H, the values that change from step to step (with
// the step count t, 1-based, and the learning rate lr). They are a device
// input so that a recorded step serves every step. OptimStep.Hyper
// computes them.
const (
	OptimLR       = iota // lr; AdaGrad: lr / (1 + (t-1)·lrDecay)
	OptimFirst           // SGD: 1 on the first step (the momentum buffer starts as the gradient), else 0
	OptimStepSize        // Adam: lr / (1 - Beta1^t)
	OptimBC2Sqrt         // Adam: sqrt(1 - Beta2^t)
	OptimDecay           // Adam with Decoupled: 1 - lr·WeightDecay
	// OptimHyperLen is the number of elements of OptimStep.H.
	OptimHyperLen
)

// OptimStep updates N parameters in place with their gradients and
// optimizer state, in one dispatch. All operands are contiguous [N] refs
// of the parameters' dtype (f32 or f64), except H ([OptimHyperLen], the
// per-step values above) and Scale (optional, one element). The math runs
// in the parameters' dtype, in the order of torch.optim's single-tensor
// implementations (PyTorch 1.13), with the per-step values of H. For each
// i < N, with p = P[i]:
//
//	g = G[i]
//	if Scale:            g = g·Scale[0]; G[i] = g    (gradient clipping, as clip_grad_norm_ leaves p.grad)
//	if WeightDecay != 0 and not Decoupled: g = g + WeightDecay·p
//
//	SGD (S1: momentum buffer, present iff Momentum != 0):
//	  if Momentum != 0:
//	    b = H[First] != 0 ? g : S1[i]·Momentum + (1-Dampening)·g;  S1[i] = b
//	    g = Nesterov ? g + Momentum·b : b
//	  P[i] = p - H[LR]·g
//
//	Adam (S1: exp_avg, S2: exp_avg_sq):
//	  if Decoupled: p = p·H[Decay]                   (AdamW)
//	  m = S1[i]·Beta1 + (1-Beta1)·g;  S1[i] = m
//	  v = S2[i]·Beta2 + (1-Beta2)·g·g;  S2[i] = v
//	  P[i] = p - H[StepSize]·(m / (sqrt(v)/H[BC2Sqrt] + Eps))
//
//	AdaGrad (S1: sum):
//	  s = S1[i] + g·g;  S1[i] = s
//	  P[i] = p - H[LR]·(g / (sqrt(s) + Eps))
//
//	RMSProp (S1: square_avg; S2: grad_avg, present iff Centered; S3: momentum buffer, present iff Momentum != 0):
//	  q = S1[i]·Alpha + (1-Alpha)·g·g;  S1[i] = q
//	  if Centered: a = S2[i]·Alpha + (1-Alpha)·g;  S2[i] = a;  d = sqrt(q - a·a)
//	  else:        d = sqrt(q)
//	  d = d + Eps
//	  if Momentum != 0: b = S3[i]·Momentum + g/d;  S3[i] = b;  P[i] = p - H[LR]·b
//	  else:             P[i] = p - H[LR]·(g/d)
//
// The coefficients Momentum, 1-Dampening, Beta1, 1-Beta1, Beta2, 1-Beta2,
// Alpha, 1-Alpha, Eps and WeightDecay are computed in float64 and rounded
// to the dtype, as torch.optim's Python scalars are. Nesterov is for SGD
// (with a momentum and no dampening), Decoupled for Adam, Centered for
// RMSProp. A state operand is present exactly when its rule uses it. The
// operands must not overlap one another.
type OptimStep struct {
	Fn                            OptimFn
	P, G                          Ref
	S1, S2, S3                    Ref
	H, Scale                      Ref
	N                             int
	Momentum, Dampening           float64
	Beta1, Beta2, Eps             float64
	WeightDecay, Alpha            float64
	Nesterov, Decoupled, Centered bool
}

// OpName names the op: "OptimStep.Adam".
func (o *OptimStep) OpName() string { return "OptimStep." + o.Fn.String() }

func (*OptimStep) isOp() {}

// States reports which of S1, S2 and S3 the op's rule uses.
func (o *OptimStep) States() [3]bool {
	switch o.Fn {
	case OptimSGD:
		return [3]bool{o.Momentum != 0, false, false}
	case OptimAdam:
		return [3]bool{true, true, false}
	case OptimAdaGrad:
		return [3]bool{true, false, false}
	case OptimRMSProp:
		return [3]bool{true, o.Centered, o.Momentum != 0}
	}
	return [3]bool{}
}

// Hyper returns the values of H for step t (1-based) at learning rate lr;
// lrDecay is AdaGrad's learning-rate decay (ignored by the other rules).
func (o *OptimStep) Hyper(t int, lr, lrDecay float64) []float64 {
	h := make([]float64, OptimHyperLen)
	h[OptimLR] = lr
	if t <= 1 {
		h[OptimFirst] = 1
	}
	switch o.Fn {
	case OptimAdam:
		bc1 := 1 - math.Pow(o.Beta1, float64(t))
		bc2 := 1 - math.Pow(o.Beta2, float64(t))
		h[OptimStepSize] = lr / bc1
		h[OptimBC2Sqrt] = math.Sqrt(bc2)
		h[OptimDecay] = 1 - lr*o.WeightDecay
	case OptimAdaGrad:
		h[OptimLR] = lr / (1 + float64(t-1)*lrDecay)
	}
	return h
}

// Coefs returns the op's constant coefficients in the order the kernels
// take them, computed in float64: for SGD Momentum and 1-Dampening; Adam
// Beta1, 1-Beta1, Beta2, 1-Beta2; RMSProp Alpha, 1-Alpha, Momentum;
// AdaGrad none; then, at OptimCoefEps and OptimCoefWD, Eps and
// WeightDecay.
func (o *OptimStep) Coefs() [OptimNumCoefs]float64 {
	var c [OptimNumCoefs]float64
	switch o.Fn {
	case OptimSGD:
		c[0], c[1] = o.Momentum, 1-o.Dampening
	case OptimAdam:
		c[0], c[1], c[2], c[3] = o.Beta1, 1-o.Beta1, o.Beta2, 1-o.Beta2
	case OptimRMSProp:
		c[0], c[1], c[2] = o.Alpha, 1-o.Alpha, o.Momentum
	}
	c[OptimCoefEps], c[OptimCoefWD] = o.Eps, o.WeightDecay
	return c
}

// Positions in OptimStep.Coefs.
const (
	OptimCoefEps  = 4
	OptimCoefWD   = 5
	OptimNumCoefs = 6
)

// Flag bits of OptimStep.Flags, as the kernels take them.
const (
	OptimFlagScale     = 1 << iota // Scale present
	OptimFlagWD                    // L2 weight decay added to the gradient
	OptimFlagMomentum              // SGD or RMSProp momentum buffer
	OptimFlagNesterov              // SGD Nesterov
	OptimFlagDecoupled             // AdamW
	OptimFlagCentered              // RMSProp centered
)

// Flags returns the op's switches as the kernels take them.
func (o *OptimStep) Flags() uint32 {
	var f uint32
	set := func(b bool, bit uint32) {
		if b {
			f |= bit
		}
	}
	set(o.Scale.Buf != nil, OptimFlagScale)
	set(o.WeightDecay != 0 && !o.Decoupled, OptimFlagWD)
	set(o.Momentum != 0 && (o.Fn == OptimSGD || o.Fn == OptimRMSProp), OptimFlagMomentum)
	set(o.Nesterov, OptimFlagNesterov)
	set(o.Decoupled, OptimFlagDecoupled)
	set(o.Centered, OptimFlagCentered)
	return f
}

// checkOptim checks the parameters of an OptimStep: a known rule, the
// flags its rule allows, finite coefficients in torch.optim's ranges and
// exactly the state operands the rule uses.
func checkOptim(o *OptimStep) error {
	name := o.OpName()
	if int(o.Fn) >= NumOptimFns {
		return fmt.Errorf("%s: unknown update rule", name)
	}
	for _, v := range []float64{o.Momentum, o.Dampening, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.Alpha} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: non-finite coefficient in momentum=%g dampening=%g betas=(%g, %g) eps=%g weight_decay=%g alpha=%g",
				name, o.Momentum, o.Dampening, o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.Alpha)
		}
	}
	if o.Momentum < 0 || o.Eps < 0 || o.WeightDecay < 0 || o.Alpha < 0 {
		return fmt.Errorf("%s: negative momentum (%g), eps (%g), weight decay (%g) or alpha (%g)", name, o.Momentum, o.Eps, o.WeightDecay, o.Alpha)
	}
	if o.Fn == OptimAdam && (o.Beta1 < 0 || o.Beta1 >= 1 || o.Beta2 < 0 || o.Beta2 >= 1) {
		return fmt.Errorf("%s: betas (%g, %g) outside [0, 1)", name, o.Beta1, o.Beta2)
	}
	if o.Nesterov && (o.Fn != OptimSGD || o.Momentum <= 0 || o.Dampening != 0) {
		return fmt.Errorf("%s: Nesterov needs SGD with a momentum and zero dampening", name)
	}
	if o.Decoupled && o.Fn != OptimAdam {
		return fmt.Errorf("%s: Decoupled weight decay is Adam's (AdamW)", name)
	}
	if o.Centered && o.Fn != OptimRMSProp {
		return fmt.Errorf("%s: Centered is RMSProp's", name)
	}
	use := o.States()
	for i, r := range []Ref{o.S1, o.S2, o.S3} {
		if has := r.Buf != nil; has != use[i] {
			if use[i] {
				return fmt.Errorf("%s: state S%d has no buffer", name, i+1)
			}
			return fmt.Errorf("%s: state S%d given, but the rule does not use it", name, i+1)
		}
	}
	return nil
}
