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
// once into a dense Y and once at channel offset 2 of images K+3
// channels wide. The strided images must equal the dense ones within
// 1e-6 (f32; both runs compute the same sums, but a backend may pick
// another kernel for each), and the elements around them must keep
// their values. A device that refuses such a Conv (or the case's dense
// Conv) must say so with an *rt.UnsupportedError.
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
		if c.bias {
			op.Bias = flat(buf(vals(c.k, -1, 1)), 0, c.k)
		}
		fill := vals(c.n*wide, -3, 3)
		res := vals(c.n*wide, -2, 2)
		dense, strided := op, op
		dense.Y = flat(buf(make([]float64, c.n*img)), 0, c.n*img)
		yb := buf(fill)
		strided.Y, strided.StrideY = flat(yb, pre, ext), wide
		if c.res {
			rd := make([]float64, 0, c.n*img)
			for n := 0; n < c.n; n++ {
				rd = append(rd, res[n*wide+pre:n*wide+pre+img]...)
			}
			dense.Res = flat(buf(rd), 0, len(rd))
			strided.Res = flat(buf(res), pre, ext)
		}
		var ue *rt.UnsupportedError
		if err := d.Supports(&dense); errors.As(err, &ue) {
			t.Logf("Conv %+v: %v", c, err) // a residual on a kernel without one
			continue
		} else if err != nil {
			t.Fatalf("Conv %+v, dense Y: %v", c, err)
		}
		if err := d.Supports(&strided); err != nil {
			if !errors.As(err, &ue) {
				t.Fatalf("Conv %+v with StrideY: %v, want nil or an *rt.UnsupportedError", c, err)
			}
			t.Logf("Conv %+v with StrideY: %v", c, err)
			continue
		}
		Run(t, d, &dense, &strided)
		want := Read(t, d, dense.Y.Buf, rt.F32)
		got := Read(t, d, yb, rt.F32)
		for i, g := range got[:c.n*wide] {
			n, e := i/wide, i%wide-pre
			if e < 0 || e >= img {
				if g != float64(float32(fill[i])) {
					t.Fatalf("Conv %+v with StrideY: element %d outside Y = %v, was %v", c, i, g, fill[i])
				}
				continue
			}
			if v := want[n*img+e]; math.Abs(g-v) > 1e-6*(1+math.Abs(v)) {
				t.Fatalf("Conv %+v with StrideY: image %d [%d] = %v, dense %v", c, n, e, g, v)
			}
		}
	}
}
