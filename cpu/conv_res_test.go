package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// convResCases add MobileNetV2- and ResNet-like residual shapes to
// convCases: 1×1 projections (odd channel counts, planes cut into row
// chunks, 7×7 and 14×13 planes), a 3×3 stride-1 (Winograd or direct) and
// a depthwise 3×3 (dw3), each with ReLU6 or ReLU after the sum.
var convResCases = []convCase{
	{n: 1, c: 37, h: 14, w: 13, k: 24, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true},
	{n: 2, c: 19, h: 7, w: 7, k: 29, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}},
	{n: 1, c: 24, h: 57, w: 61, k: 16, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 16, h: 17, w: 15, k: 16, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 33, h: 9, w: 11, k: 33, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 33, bias: true, act: rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}},
}

// TestConvRes checks rt.Conv with a residual, Y = Act(Bias + conv + Res),
// against a float64 reference for every conv case and the residual ones,
// f32 and f64, with Res in its own buffer and with Res the same elements
// as Y (the kernels must read it before they write Y). Random non-zero
// inputs in [-1, 1]; tolerance 1e-4 (f32) and 1e-12 (f64) relative to
// the sum of the magnitudes of the terms.
func TestConvRes(t *testing.T) {
	testConvRes(t, []rt.DType{rt.F32, rt.F64}, append(append([]convCase{}, convCases...), convResCases...))
}

// testConvRes is TestConvRes for the dtypes dts and the cases cases.
func testConvRes(t *testing.T, dts []rt.DType, cases []convCase) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(61, 62))
	for _, dt := range dts {
		for ci, c := range cases {
			for _, same := range []bool{false, true} {
				oh, ow := c.out()
				cg := c.c / c.g
				nx, nw, ny := c.n*c.c*c.h*c.w, c.k*cg*c.kh*c.kw, c.n*c.k*oh*ow
				xv, wv := stored(dt, randVals(rng, nx, -1, 1)), stored(dt, randVals(rng, nw, -1, 1))
				bv, rv := stored(dt, randVals(rng, c.k, -1, 1)), stored(dt, randVals(rng, ny, -1, 1))
				xr, wr := e.region(dt, nx, xv), e.region(dt, nw, wv)
				var yr, rr *region
				if same {
					yr = e.region(dt, ny, rv)
					rr = yr
				} else {
					yr, rr = e.region(dt, ny, nil), e.region(dt, ny, rv)
				}
				op := &rt.Conv{X: xr.ref(nx), W: wr.ref(nw), Y: yr.ref(ny), Res: rr.ref(ny), N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow,
					KH: c.kh, KW: c.kw, StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.g, Act: c.act}
				if c.bias {
					op.Bias = e.region(dt, c.k, bv).ref(c.k)
				}
				if err := e.dev.Supports(op); err != nil {
					t.Fatalf("Supports: %v", err)
				}
				e.run(op)
				sum, scale := convRef(c, xv, wv, bv)
				want := make([]float64, ny)
				for i := range want {
					want[i] = c.act.Fn.Apply(sum[i]+rv[i], c.act.Alpha, c.act.Beta)
					scale[i] += math.Abs(rv[i])
				}
				tol := map[rt.DType]float64{rt.F32: 1e-4, rt.F64: 1e-12}[dt]
				checkVals(t, fmt.Sprintf("conv+res %s #%d same=%v", dt, ci, same), e.values(yr), stored(dt, want), tol, func(i int) float64 { return scale[i] })
			}
		}
	}
}

// BenchmarkConvRes times convolutions with a residual (rt.Conv.Res)
// against the same Conv followed by the Binary Add (and Unary activation)
// the engine emits without the fold: MobileNetV2's 1×1 projections
// (ReLU-free) and a ResNet 3×3 with the ReLU after the sum.
func BenchmarkConvRes(b *testing.B) {
	for _, c := range []struct {
		name           string
		c, h, k, kk, p int
		act            rt.UnaryFn
	}{
		{"mbv2/pw/144-24/56", 144, 56, 24, 1, 0, rt.Copy},
		{"mbv2/pw/384-64/14", 384, 14, 64, 1, 0, rt.Copy},
		{"mbv2/pw/960-160/7", 960, 7, 160, 1, 0, rt.Copy},
		{"resnet/64/56/3x3", 64, 56, 64, 3, 1, rt.Relu},
	} {
		for _, fused := range []bool{true, false} {
			name := c.name + "/add"
			if fused {
				name = c.name + "/fused"
			}
			b.Run(name, func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				ny := c.k * c.h * c.h
				op := &rt.Conv{X: benchBuf(b, d, rt.F32, c.c*c.h*c.h), W: benchBuf(b, d, rt.F32, c.k*c.c*c.kk*c.kk),
					Bias: benchBuf(b, d, rt.F32, c.k), Y: benchBuf(b, d, rt.F32, ny),
					N: 1, C: c.c, H: c.h, Width: c.h, K: c.k, OH: c.h, OW: c.h, KH: c.kk, KW: c.kk, StrideH: 1, StrideW: 1,
					PadT: c.p, PadL: c.p, DilH: 1, DilW: 1, Groups: 1, Act: rt.Activation{Fn: c.act}}
				res := benchBuf(b, d, rt.F32, ny)
				if fused {
					op.Res = res
					benchOps(b, d, op)
				} else {
					op.Act = rt.Activation{Fn: rt.Copy}
					ops := []rt.Op{op, &rt.Binary{Fn: rt.Add, A: op.Y, B: res, Y: op.Y}}
					if c.act != rt.Copy {
						ops = append(ops, &rt.Unary{Fn: c.act, X: op.Y, Y: op.Y})
					}
					benchOps(b, d, ops...)
				}
				b.ReportMetric(2*float64(ny*c.c*c.kk*c.kk)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
