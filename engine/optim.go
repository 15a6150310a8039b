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

// optimSpec is a validated Optimizer with its defaults applied.
type optimSpec struct {
	Optimizer
	state []string // names of the persistent state buffers
}

func newOptimSpec(o Optimizer) (*optimSpec, error) {
	s := &optimSpec{Optimizer: o}
	if o.LR < 0 || math.IsNaN(o.LR) {
		return nil, fmt.Errorf("engine: optimizer: learning rate %g", o.LR)
	}
	if o.ClipNorm < 0 || o.WeightDecay < 0 || o.Momentum < 0 {
		return nil, fmt.Errorf("engine: optimizer: negative ClipNorm, WeightDecay or Momentum")
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	switch o.Kind {
	case SGD:
		if o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0) {
			return nil, fmt.Errorf("engine: optimizer: Nesterov momentum requires a momentum and zero dampening")
		}
		if o.Momentum > 0 {
			s.state = []string{"momentum"}
		}
	case Adam, AdamW:
		def(&s.Beta1, 0.9)
		def(&s.Beta2, 0.999)
		def(&s.Eps, 1e-8)
		if s.Beta1 >= 1 || s.Beta2 >= 1 {
			return nil, fmt.Errorf("engine: optimizer: betas (%g, %g) must be below 1", s.Beta1, s.Beta2)
		}
		s.state = []string{"exp_avg", "exp_avg_sq"}
	case AdaGrad:
		def(&s.Eps, 1e-10)
		s.state = []string{"sum"}
	case RMSProp:
		def(&s.Alpha, 0.99)
		def(&s.Eps, 1e-8)
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

// Hyper-parameter slots fed per step (they change with the step count or
// the learning rate).
const (
	hLR    = iota // learning rate (AdaGrad: decayed)
	hA            // SGD: momentum coefficient (0 on step 1); Adam: lr/bc1
	hB            // SGD: gradient coefficient (1 on step 1); Adam: 1/sqrt(bc2)
	hDecay        // AdamW: 1 - lr*wd
	numHyper
)

// hyper computes the per-step values for step t (1-based) at learning
// rate lr.
func (s *optimSpec) hyper(t int, lr float64) []float64 {
	h := make([]float64, numHyper)
	h[hLR] = lr
	switch s.Kind {
	case SGD:
		h[hA], h[hB] = s.Momentum, 1-s.Dampening
		if t == 1 {
			h[hA], h[hB] = 0, 1
		}
	case Adam, AdamW:
		bc1 := 1 - math.Pow(s.Beta1, float64(t))
		bc2 := 1 - math.Pow(s.Beta2, float64(t))
		h[hA], h[hB] = lr/bc1, 1/math.Sqrt(bc2)
		h[hDecay] = 1 - lr*s.WeightDecay
	case AdaGrad:
		h[hLR] = lr / (1 + float64(t-1)*s.LRDecay)
	}
	return h
}

// optimize appends the update: a few elementwise ops over the flat
// parameter, gradient and state buffers.
func (g *gctx) optimize(s *optimSpec) error {
	p := g.p
	if g.block == nil {
		return fmt.Errorf("engine: optimizer given but no parameters are trained")
	}
	dt, n := g.block.dtype, g.block.shape[0]
	hyper := p.addTensor(&tensor{name: "hyper", dtype: dt, shape: []int{numHyper}, input: true, defined: true})
	p.inputs = append(p.inputs, hyper)
	p.hyper = hyper
	g.begin(len(p.steps)+1, stepNode("optimizer", string(s.Kind)))
	sh := []int{n}
	h := func(i int) rt.Ref {
		r := p.ref(hyper)
		r.Off = int64(i * dt.Size())
		r.Shape, r.Strides = sh, []int{0}
		g.use(r)
		return r
	}
	state := map[string]rt.Ref{}
	for _, name := range s.state {
		init := 0.0
		if name == "sum" {
			init = s.InitAccum
		}
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = init
		}
		t := p.addTensor(&tensor{name: "optim." + name, dtype: dt, shape: sh, where: inWeights,
			init: rt.FromFloat64(dt, vals, n), persist: "optim." + name, defined: true})
		state[name] = p.ref(t)
		p.optState = append(p.optState, t)
	}
	P, G := p.ref(g.block), g.use(p.ref(g.paramsG))
	emit := func(op rt.Op) { g.emit(op) }
	bin := func(fn rt.BinaryFn, a, b, y rt.Ref) { emit(&rt.Binary{Fn: fn, A: a, B: b, Y: y}) }
	un := func(fn rt.UnaryFn, x, y rt.Ref, a, b float64) { emit(&rt.Unary{Fn: fn, X: x, Y: y, Alpha: a, Beta: b}) }

	if s.ClipNorm > 0 {
		tot := g.tmp(dt, []int{1})
		emit(&rt.Reduce{Fn: rt.SumSquare, X: G, Y: tot, Outer: 1, N: n, Inner: 1})
		un(rt.Sqrt, tot, tot, 0, 0)
		un(rt.Affine, tot, tot, 1, 1e-6)
		un(rt.Reciprocal, tot, tot, 0, 0)
		un(rt.Affine, tot, tot, s.ClipNorm, 0)
		un(rt.Clip, tot, tot, math.Inf(-1), 1)
		bin(rt.Mul, G, strided(tot, sh, []int{0}), G)
	}
	if s.WeightDecay > 0 && s.Kind != AdamW {
		t := g.tmp(dt, sh)
		un(rt.Affine, P, t, s.WeightDecay, 0)
		bin(rt.Add, G, t, G)
	}
	t := g.tmp(dt, sh)
	switch s.Kind {
	case SGD:
		if s.Momentum > 0 {
			buf := state["momentum"]
			bin(rt.Mul, buf, h(hA), buf)
			bin(rt.Mul, G, h(hB), t)
			bin(rt.Add, buf, t, buf)
			if s.Nesterov {
				un(rt.Affine, buf, t, s.Momentum, 0)
				bin(rt.Add, G, t, G)
			} else {
				G = buf
			}
		}
		bin(rt.Mul, G, h(hLR), t)
		bin(rt.Sub, P, t, P)
	case Adam, AdamW:
		m, v := state["exp_avg"], state["exp_avg_sq"]
		if s.Kind == AdamW && s.WeightDecay > 0 {
			bin(rt.Mul, P, h(hDecay), P)
		}
		un(rt.Affine, m, m, s.Beta1, 0)
		un(rt.Affine, G, t, 1-s.Beta1, 0)
		bin(rt.Add, m, t, m)
		un(rt.Square, G, t, 0, 0)
		un(rt.Affine, t, t, 1-s.Beta2, 0)
		un(rt.Affine, v, v, s.Beta2, 0)
		bin(rt.Add, v, t, v)
		un(rt.Sqrt, v, t, 0, 0)
		bin(rt.Mul, t, h(hB), t)
		un(rt.Affine, t, t, 1, s.Eps)
		bin(rt.Div, m, t, t)
		bin(rt.Mul, t, h(hA), t)
		bin(rt.Sub, P, t, P)
	case AdaGrad:
		sum := state["sum"]
		un(rt.Square, G, t, 0, 0)
		bin(rt.Add, sum, t, sum)
		un(rt.Sqrt, sum, t, 0, 0)
		un(rt.Affine, t, t, 1, s.Eps)
		bin(rt.Div, G, t, t)
		bin(rt.Mul, t, h(hLR), t)
		bin(rt.Sub, P, t, P)
	case RMSProp:
		sq := state["square_avg"]
		un(rt.Square, G, t, 0, 0)
		un(rt.Affine, t, t, 1-s.Alpha, 0)
		un(rt.Affine, sq, sq, s.Alpha, 0)
		bin(rt.Add, sq, t, sq)
		avg := g.tmp(dt, sh)
		if s.Centered {
			ga := state["grad_avg"]
			un(rt.Affine, G, t, 1-s.Alpha, 0)
			un(rt.Affine, ga, ga, s.Alpha, 0)
			bin(rt.Add, ga, t, ga)
			un(rt.Square, ga, t, 0, 0)
			bin(rt.Sub, sq, t, avg)
			un(rt.Sqrt, avg, avg, 0, 0)
		} else {
			un(rt.Sqrt, sq, avg, 0, 0)
		}
		un(rt.Affine, avg, avg, 1, s.Eps)
		if s.Momentum > 0 {
			buf := state["momentum"]
			bin(rt.Div, G, avg, t)
			un(rt.Affine, buf, buf, s.Momentum, 0)
			bin(rt.Add, buf, t, buf)
			bin(rt.Mul, buf, h(hLR), t)
		} else {
			bin(rt.Div, G, avg, t)
			bin(rt.Mul, t, h(hLR), t)
		}
		bin(rt.Sub, P, t, P)
	}
	g.end()
	return nil
}
