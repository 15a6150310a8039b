package backendtest

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// ConvStrideY checks rt.Conv.StrideY on d, the images of Y (and Res) apart
// in a wider tensor, as the engine writes a Concat's parts at batch > 1:
// each case (odd sizes, batch 3, a 1x1 and 3x3 kernel, stride 2, groups,
// with and without bias, activation and a residual laid out like Y) runs
// at channel offset 2 of images K+3 channels wide. The images must match
// a float64 reference within 1e-4 of the sum of the magnitudes of their
// terms (f32), and the elements around them must keep their values. A
// device that refuses such a Conv must say so with an
// *rt.UnsupportedError.
func ConvStrideY(t *testing.T, d rt.Device) {
	t.Helper()
	type cs struct {
		n, c, h, w, k, kh, sh, pad, g int
		bias, res                     bool
		act                           rt.UnaryFn
	}
	cases := []cs{
		{3, 13, 5, 7, 17, 1, 1, 0, 1, false, false, rt.Relu},
		{3, 6, 9, 11, 12, 3, 1, 1, 1, true, false, rt.Relu},
		{2, 8, 11, 9, 10, 3, 2, 1, 2, true, true, rt.LeakyRelu},
		{2, 16, 7, 7, 32, 3, 1, 1, 1, true, true, 0},
	}
	rng := rand.New(rand.NewPCG(5, 7))
	vals := func(n int, lo, hi float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
		return v
	}
	for _, c := range cases {
		oh, ow := (c.h+2*c.pad-c.kh)/c.sh+1, (c.w+2*c.pad-c.kh)/c.sh+1
		ohw := oh * ow
		img := c.k * ohw
		wide, pre := img+3*ohw, 2*ohw
		ext := (c.n-1)*wide + img
		buf := func(v []float64) rt.Buffer { return Upload(t, d, Values(rt.F32, v).Data) }
		flat := func(b rt.Buffer, off, n int) rt.Ref {
			return rt.Ref{Buf: b, Off: int64(4 * off), DType: rt.F32, Shape: []int{n}}
		}
		x, w := vals(c.n*c.c*c.h*c.w, -1, 1), vals(c.k*c.c/c.g*c.kh*c.kh, -1, 1)
		op := rt.Conv{X: flat(buf(x), 0, len(x)), W: flat(buf(w), 0, len(w)),
			N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: c.kh, KW: c.kh,
			StrideH: c.sh, StrideW: c.sh, PadT: c.pad, PadL: c.pad, DilH: 1, DilW: 1, Groups: c.g,
			Act: rt.Activation{Fn: c.act, Alpha: 0.1}}
		var bias []float64
		if c.bias {
			bias = vals(c.k, -1, 1)
			op.Bias = flat(buf(bias), 0, c.k)
		}
		fill := vals(c.n*wide, -3, 3)
		res := vals(c.n*wide, -2, 2)
		yb := buf(fill)
		op.Y, op.StrideY = flat(yb, pre, ext), wide
		if c.res {
			op.Res = flat(buf(res), pre, ext)
		}
		var ue *rt.UnsupportedError
		if err := d.Supports(&op); err != nil {
			if !errors.As(err, &ue) {
				t.Fatalf("Conv %+v with StrideY: %v, want nil or an *rt.UnsupportedError", c, err)
			}
			t.Logf("Conv %+v with StrideY: %v", c, err)
			continue
		}
		Run(t, d, &op)
		got := Read(t, d, yb, rt.F32)
		// a float64 reference from the f32-rounded operands
		f32 := func(v float64) float64 { return float64(float32(v)) }
		cg, kg := c.c/c.g, c.k/c.g
		for i, g := range got[:c.n*wide] {
			n, e := i/wide, i%wide-pre
			if e < 0 || e >= img {
				if g != f32(fill[i]) {
					t.Fatalf("Conv %+v with StrideY: element %d outside Y = %v, was %v", c, i, g, fill[i])
				}
				continue
			}
			k, p := e/ohw, e%ohw
			oy, ox := p/ow, p%ow
			want, mag := 0.0, 1.0
			if c.bias {
				want, mag = f32(bias[k]), mag+math.Abs(bias[k])
			}
			for ci := 0; ci < cg; ci++ {
				xc := k/kg*cg + ci
				for u := 0; u < c.kh; u++ {
					for v := 0; v < c.kh; v++ {
						iy, ix := oy*c.sh-c.pad+u, ox*c.sh-c.pad+v
						if iy < 0 || iy >= c.h || ix < 0 || ix >= c.w {
							continue
						}
						xw := f32(x[((n*c.c+xc)*c.h+iy)*c.w+ix]) * f32(w[((k*cg+ci)*c.kh+u)*c.kh+v])
						want, mag = want+xw, mag+math.Abs(xw)
					}
				}
			}
			if c.res {
				want, mag = want+f32(res[i]), mag+math.Abs(res[i])
			}
			want = c.act.Apply(want, 0.1, 0)
			if math.Abs(g-want) > 1e-4*mag {
				t.Fatalf("Conv %+v with StrideY: image %d [%d] = %v, want %v (float64)", c, n, e, g, want)
			}
		}
	}
}
