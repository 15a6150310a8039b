package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// ---- OptimStep ----

// optimGrain is the number of parameters one goroutine updates at least.
const optimGrain = 1 << 14

func optimOp(o *rt.OptimStep) { byFloat(o.P.DType, o, optimStepF[float64], optimStepF[float32]) }

// optimStepF runs rt.OptimStep's per-element math in T. Every product is
// converted to T before it is added (T(a*b) + c), which the Go spec
// forbids fusing into a multiply-add, so the arithmetic rounds step by
// step as torch.optim's does on every architecture.
func optimStepF[T floatT](o *rt.OptimStep) {
	n := o.N
	p, g := lin[T](o.P, n), lin[T](o.G, n)
	s1, s2, s3 := lin[T](o.S1, n), lin[T](o.S2, n), lin[T](o.S3, n)
	h := lin[T](o.H, rt.OptimHyperLen)
	c64 := o.Coefs()
	var c [rt.OptimNumCoefs]T
	for i, v := range c64 {
		c[i] = T(v)
	}
	eps, wd := c[rt.OptimCoefEps], c[rt.OptimCoefWD]
	flags := o.Flags()
	has := func(bit uint32) bool { return flags&bit != 0 }
	var scale T
	if has(rt.OptimFlagScale) {
		scale = lin[T](o.Scale, 1)[0]
	}
	lr := h[rt.OptimLR]
	first := h[rt.OptimFirst] != 0
	hasScale, hasWD := has(rt.OptimFlagScale), has(rt.OptimFlagWD)
	momentum, nesterov := has(rt.OptimFlagMomentum), has(rt.OptimFlagNesterov)
	decoupled, centered := has(rt.OptimFlagDecoupled), has(rt.OptimFlagCentered)
	decay, bc2, stepSize := h[rt.OptimDecay], h[rt.OptimBC2Sqrt], h[rt.OptimStepSize]
	sqrt := func(x T) T { return T(math.Sqrt(float64(x))) }
	// The branches on flags are loop-invariant; each function has its own
	// loop so that the common cases (SGD, Adam) run without a switch per
	// element.
	parallelFor(n, optimGrain, func(lo, hi int) {
		p, g := p[lo:hi], g[lo:hi]
		var s1c, s2c, s3c []T
		if s1 != nil {
			s1c = s1[lo:hi]
		}
		if s2 != nil {
			s2c = s2[lo:hi]
		}
		if s3 != nil {
			s3c = s3[lo:hi]
		}
		// grad returns the i-th gradient after clipping scale and L2
		// weight decay, storing the scaled gradient back.
		grad := func(i int, pi T) T {
			gi := g[i]
			if hasScale {
				gi = T(gi * scale)
				g[i] = gi
			}
			if hasWD {
				gi = gi + T(wd*pi)
			}
			return gi
		}
		switch o.Fn {
		case rt.OptimSGD:
			if !momentum && !hasScale && !hasWD {
				for i := range p {
					p[i] = p[i] - T(lr*g[i])
				}
				return
			}
			for i, pi := range p {
				gi := grad(i, pi)
				if momentum {
					b := gi
					if !first {
						b = T(s1c[i]*c[0]) + T(c[1]*gi)
					}
					s1c[i] = b
					if nesterov {
						gi = gi + T(c[0]*b)
					} else {
						gi = b
					}
				}
				p[i] = pi - T(lr*gi)
			}
		case rt.OptimAdam:
			s1c, s2c = s1c[:len(p)], s2c[:len(p)]
			for i, pi := range p {
				gi := grad(i, pi)
				if decoupled {
					pi = T(pi * decay)
				}
				m := T(s1c[i]*c[0]) + T(c[1]*gi)
				v := T(s2c[i]*c[2]) + T(T(c[3]*gi)*gi)
				s1c[i], s2c[i] = m, v
				d := T(sqrt(v)/bc2) + eps
				p[i] = pi - T(stepSize*T(m/d))
			}
		case rt.OptimAdaGrad:
			for i, pi := range p {
				gi := grad(i, pi)
				s := s1c[i] + T(gi*gi)
				s1c[i] = s
				d := sqrt(s) + eps
				p[i] = pi - T(lr*T(gi/d))
			}
		case rt.OptimRMSProp:
			for i, pi := range p {
				gi := grad(i, pi)
				q := T(s1c[i]*c[0]) + T(T(c[1]*gi)*gi)
				s1c[i] = q
				var d T
				if centered {
					a := T(s2c[i]*c[0]) + T(c[1]*gi)
					s2c[i] = a
					d = sqrt(q - T(a*a))
				} else {
					d = sqrt(q)
				}
				d = d + eps
				if momentum {
					b := T(s3c[i]*c[2]) + T(gi/d)
					s3c[i] = b
					p[i] = pi - T(lr*b)
				} else {
					p[i] = pi - T(lr*T(gi/d))
				}
			}
		}
	})
}
