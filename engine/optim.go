package engine

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// OptimizerKind names an optimizer.
type OptimizerKind string

// Optimizers, with torch.optim's update rules.
const (
	SGD     OptimizerKind = "sgd"     // momentum, dampening, Nesterov, weight decay
	Adam    OptimizerKind = "adam"    // L2 weight decay added to the gradient
	AdamW   OptimizerKind = "adamw"   // decoupled weight decay
	AdaGrad OptimizerKind = "adagrad" // lr decay, initial accumulator
	RMSProp OptimizerKind = "rmsprop" // centered, momentum
)

// Optimizer configures the update a training step applies to the
// parameters. The learning rate is a run-time value (Trainer.SetLR), so a
// schedule never re-records the step; the other fields are fixed when the
// step is planned. Zero values take torch.optim's defaults where noted.
type Optimizer struct {
	Kind        OptimizerKind
	LR          float64 // initial learning rate
	Momentum    float64 // SGD, RMSProp
	Dampening   float64 // SGD
	Nesterov    bool    // SGD
	WeightDecay float64
	Beta1       float64 // Adam/AdamW; 0 means 0.9
	Beta2       float64 // Adam/AdamW; 0 means 0.999
	Eps         float64 // Adam/AdamW/RMSProp 1e-8, AdaGrad 1e-10 when 0
	Alpha       float64 // RMSProp smoothing; 0 means 0.99
	Centered    bool    // RMSProp
	LRDecay     float64 // AdaGrad
	InitAccum   float64 // AdaGrad initial accumulator value
	// ClipNorm, when positive, scales the gradients so that their global
	// L2 norm is at most ClipNorm before the update.
	ClipNorm float64
}

// optimSpec is a validated Optimizer with its defaults applied, and the
// fused update (rt.OptimStep) it plans.
type optimSpec struct {
	Optimizer
	state []string     // names of the persistent state buffers, in the order of S1, S2, S3
	step  rt.OptimStep // the update's rule and coefficients; operands unset
}

func newOptimSpec(o Optimizer) (*optimSpec, error) {
	s := &optimSpec{Optimizer: o}
	if o.LR < 0 || math.IsNaN(o.LR) {
		return nil, fmt.Errorf("engine: optimizer: learning rate %g", o.LR)
	}
	for _, v := range []float64{o.Momentum, o.Dampening, o.WeightDecay, o.Beta1, o.Beta2, o.Eps, o.Alpha, o.LRDecay, o.InitAccum, o.ClipNorm} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("engine: optimizer: non-finite parameter in %+v", o)
		}
	}
	if o.ClipNorm < 0 || o.WeightDecay < 0 || o.Momentum < 0 || o.Eps < 0 || o.Alpha < 0 {
		return nil, fmt.Errorf("engine: optimizer: negative ClipNorm, WeightDecay, Momentum, Eps or Alpha")
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	st := &s.step
	st.WeightDecay = o.WeightDecay
	switch o.Kind {
	case SGD:
		if o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0) {
			return nil, fmt.Errorf("engine: optimizer: Nesterov momentum requires a momentum and zero dampening")
		}
		st.Fn, st.Momentum, st.Dampening, st.Nesterov = rt.OptimSGD, o.Momentum, o.Dampening, o.Nesterov
		if o.Momentum > 0 {
			s.state = []string{"momentum"}
		}
	case Adam, AdamW:
		def(&s.Beta1, 0.9)
		def(&s.Beta2, 0.999)
		def(&s.Eps, 1e-8)
		if s.Beta1 < 0 || s.Beta1 >= 1 || s.Beta2 < 0 || s.Beta2 >= 1 {
			return nil, fmt.Errorf("engine: optimizer: betas (%g, %g) must be in [0, 1)", s.Beta1, s.Beta2)
		}
		st.Fn, st.Beta1, st.Beta2, st.Eps, st.Decoupled = rt.OptimAdam, s.Beta1, s.Beta2, s.Eps, o.Kind == AdamW
		s.state = []string{"exp_avg", "exp_avg_sq"}
	case AdaGrad:
		def(&s.Eps, 1e-10)
		st.Fn, st.Eps = rt.OptimAdaGrad, s.Eps
		s.state = []string{"sum"}
	case RMSProp:
		def(&s.Alpha, 0.99)
		def(&s.Eps, 1e-8)
		st.Fn, st.Alpha, st.Eps, st.Momentum, st.Centered = rt.OptimRMSProp, s.Alpha, s.Eps, o.Momentum, o.Centered
		s.state = []string{"square_avg"}
		if s.Centered {
			s.state = append(s.state, "grad_avg")
		}
		if s.Momentum > 0 {
			s.state = append(s.state, "momentum")
		}
	default:
		return nil, fmt.Errorf("engine: optimizer: unknown kind %q (want sgd, adam, adamw, adagrad or rmsprop)", o.Kind)
	}
	return s, nil
}

// hyper computes the per-step values of the update (rt.OptimStep's H)
// for step t (1-based) at learning rate lr.
func (s *optimSpec) hyper(t int, lr float64) []float64 { return s.step.Hyper(t, lr, s.LRDecay) }

// optimize appends the update: one rt.OptimStep over the flat parameter,
// gradient and state buffers, after, with ClipNorm, four ops that compute
// the clipping coefficient min(ClipNorm / (‖g‖ + 1e-6), 1) of
// torch.nn.utils.clip_grad_norm_ into a one-element scale.
func (g *gctx) optimize(s *optimSpec) error {
	p := g.p
	if g.block == nil {
		return fmt.Errorf("engine: optimizer given but no parameters are trained")
	}
	dt, n := g.block.dtype, g.block.shape[0]
	hyper := p.addTensor(&tensor{name: "hyper", dtype: dt, shape: []int{rt.OptimHyperLen}, input: true, defined: true})
	p.inputs = append(p.inputs, hyper)
	p.hyper = hyper
	g.begin(len(p.steps)+1, stepNode("optimizer", string(s.Kind)))
	sh := []int{n}
	op := s.step // a copy: the plan's own op
	op.P, op.G, op.H, op.N = p.ref(g.block), p.ref(g.paramsG), p.ref(hyper), n
	slots := []*rt.Ref{&op.S1, &op.S2, &op.S3}
	use := op.States()
	k := 0
	for _, name := range s.state {
		for !use[k] {
			k++
		}
		init := 0.0
		if name == "sum" {
			init = s.InitAccum
		}
		vals := make([]float64, n)
		for j := range vals {
			vals[j] = init
		}
		t := p.addTensor(&tensor{name: "optim." + name, dtype: dt, shape: sh, where: inWeights,
			init: rt.FromFloat64(dt, vals, n), persist: "optim." + name, defined: true})
		*slots[k] = p.ref(t)
		p.optState = append(p.optState, t)
		k++
	}
	if s.ClipNorm > 0 {
		c := g.tmp(dt, []int{1})
		g.emit(&rt.Reduce{Fn: rt.L2, X: op.G, Y: c, Outer: 1, N: n, Inner: 1})
		g.emit(&rt.Unary{Fn: rt.Affine, X: c, Y: c, Alpha: 1, Beta: 1e-6})
		g.emit(&rt.Binary{Fn: rt.Div, A: g.scalar(s.ClipNorm, dt, []int{1}), B: c, Y: c})
		g.emit(&rt.Unary{Fn: rt.Clip, X: c, Y: c, Alpha: math.Inf(-1), Beta: 1})
		op.Scale = c
	}
	g.emit(&op)
	p.optFrom = len(p.steps) // the step end appends
	g.end()
	return nil
}
