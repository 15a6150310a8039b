package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// ---- OptimStep ----

// optimGrain is the number of parameters one goroutine updates at least.
const optimGrain = 1 << 14

func optimOp(o *rt.OptimStep) {
	if o.P.DType == rt.F64 {
		optimStepF[float64](o)
	} else {
		optimStepF[float32](o)
	}
}

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
	sqrt := func(x T) T { return T(math.Sqrt(float64(x))) }
	parallelFor(n, optimGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			pi, gi := p[i], g[i]
			if has(rt.OptimFlagScale) {
				gi = T(gi * scale)
				g[i] = gi
			}
			if has(rt.OptimFlagWD) {
				gi = gi + T(wd*pi)
			}
			switch o.Fn {
			case rt.OptimSGD:
				if has(rt.OptimFlagMomentum) {
					b := gi
					if !first {
						b = T(s1[i]*c[0]) + T(c[1]*gi)
					}
					s1[i] = b
					if has(rt.OptimFlagNesterov) {
						gi = gi + T(c[0]*b)
					} else {
						gi = b
					}
				}
				p[i] = pi - T(lr*gi)
			case rt.OptimAdam:
				if has(rt.OptimFlagDecoupled) {
					pi = T(pi * h[rt.OptimDecay])
				}
				m := T(s1[i]*c[0]) + T(c[1]*gi)
				v := T(s2[i]*c[2]) + T(T(c[3]*gi)*gi)
				s1[i], s2[i] = m, v
				d := T(sqrt(v)/h[rt.OptimBC2Sqrt]) + eps
				p[i] = pi - T(h[rt.OptimStepSize]*T(m/d))
			case rt.OptimAdaGrad:
				s := s1[i] + T(gi*gi)
				s1[i] = s
				d := sqrt(s) + eps
				p[i] = pi - T(lr*T(gi/d))
			case rt.OptimRMSProp:
				q := T(s1[i]*c[0]) + T(T(c[1]*gi)*gi)
				s1[i] = q
				var d T
				if has(rt.OptimFlagCentered) {
					a := T(s2[i]*c[0]) + T(c[1]*gi)
					s2[i] = a
					d = sqrt(q - T(a*a))
				} else {
					d = sqrt(q)
				}
				d = d + eps
				if has(rt.OptimFlagMomentum) {
					b := T(s3[i]*c[2]) + T(gi/d)
					s3[i] = b
					p[i] = pi - T(lr*b)
				} else {
					p[i] = pi - T(lr*T(gi/d))
				}
			}
		}
	})
}
