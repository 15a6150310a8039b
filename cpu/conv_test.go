package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

type convCase struct {
	n, c, h, w, k, kh, kw  int
	sh, sw, pt, pl, pb, pr int
	dh, dw, g              int
	bias                   bool
	act                    rt.Activation
}

func (c convCase) out() (int, int) {
	oh := (c.h+c.pt+c.pb-c.dh*(c.kh-1)-1)/c.sh + 1
	ow := (c.w+c.pl+c.pr-c.dw*(c.kw-1)-1)/c.sw + 1
	return oh, ow
}

var convCases = []convCase{
	{n: 1, c: 3, h: 7, w: 9, k: 4, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
	{n: 2, c: 4, h: 11, w: 8, k: 6, kh: 3, kw: 2, sh: 2, sw: 1, pt: 2, pl: 0, pb: 1, pr: 1, dh: 1, dw: 2, g: 2, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 6, h: 9, w: 10, k: 6, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 0, pr: 1, dh: 1, dw: 1, g: 6, bias: true},                             // depthwise
	{n: 2, c: 4, h: 8, w: 7, k: 8, kh: 5, kw: 3, sh: 1, sw: 3, pt: 3, pl: 2, pb: 2, pr: 0, dh: 2, dw: 1, g: 4, act: rt.Activation{Fn: rt.Silu}},         // depthwise x2
	{n: 2, c: 8, h: 5, w: 6, k: 5, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Clip, Alpha: -0.5, Beta: 0.5}}, // 1x1
	{n: 1, c: 6, h: 5, w: 6, k: 4, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 2},                                                                      // 1x1 grouped
	{n: 1, c: 2, h: 1, w: 30, k: 3, kh: 1, kw: 5, sh: 1, sw: 2, pl: 2, pr: 2, dh: 1, dw: 3, g: 1, bias: true},                                           // 1-D
	{n: 1, c: 16, h: 12, w: 12, k: 33, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
	// Depthwise with KW == 3, StrideW == 1 (the fused-tap path).
	{n: 2, c: 4, h: 7, w: 9, k: 8, kh: 2, kw: 3, sh: 2, sw: 1, pt: 1, pl: 2, pb: 0, pr: 1, dh: 2, dw: 2, g: 4, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 3, h: 5, w: 4, k: 3, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 3, bias: true},
	{n: 1, c: 2, h: 3, w: 2, k: 2, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 3, pb: 2, pr: 3, dh: 1, dw: 2, g: 2}, // no interior
	// im2col packed into GEMM panels: padding wider than the input, K
	// beyond one block, and N-split small-M GEMMs.
	{n: 1, c: 48, h: 9, w: 5, k: 13, kh: 3, kw: 3, sh: 1, sw: 1, pt: 4, pl: 6, pb: 2, pr: 5, dh: 2, dw: 3, g: 1, bias: true},
	{n: 2, c: 6, h: 30, w: 20, k: 9, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 0, pb: 2, pr: 3, dh: 1, dw: 2, g: 1, bias: true, act: rt.Activation{Fn: rt.Gelu}},
	{n: 1, c: 4, h: 40, w: 40, k: 5, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1},
	{n: 1, c: 6, h: 23, w: 21, k: 4, kh: 2, kw: 3, sh: 1, sw: 3, pt: 0, pl: 4, pb: 1, pr: 0, dh: 2, dw: 1, g: 2, act: rt.Activation{Fn: rt.Relu}},
	// Stride-2 im2col rows wider than a vector (the even-element kernel),
	// with padding on both sides; and a 1×1 with many output channels
	// (the parallel no-pack GEMM splits rows).
	{n: 1, c: 3, h: 9, w: 111, k: 17, kh: 3, kw: 3, sh: 2, sw: 2, pt: 0, pl: 1, pb: 1, pr: 2, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 40, h: 13, w: 13, k: 200, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	// Direct convolutions (conv_direct.go): LeNet's layers at a batch,
	// output-channel blocks of uneven sizes, stride 2 and 3 phases with
	// dilation and uneven padding, depthwise with a multiplier, planes cut
	// into row chunks, and one image split between the workers.
	{n: 5, c: 1, h: 28, w: 28, k: 6, kh: 5, kw: 5, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 3, c: 6, h: 14, w: 14, k: 16, kh: 5, kw: 5, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true},
	{n: 2, c: 3, h: 17, w: 19, k: 20, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 0, pb: 2, pr: 1, dh: 1, dw: 2, g: 1, bias: true},
	{n: 1, c: 4, h: 16, w: 23, k: 10, kh: 3, kw: 2, sh: 3, sw: 2, pt: 2, pl: 1, pb: 0, pr: 2, dh: 2, dw: 1, g: 2, act: rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}},
	{n: 2, c: 7, h: 21, w: 15, k: 14, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 7, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 5, h: 120, w: 61, k: 5, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 5, bias: true},
	{n: 1, c: 3, h: 64, w: 67, k: 21, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 2, h: 5, w: 3, k: 3, kh: 5, kw: 5, sh: 1, sw: 1, pt: 3, pl: 4, pb: 3, pr: 4, dh: 1, dw: 1, g: 1},                                                 // padding wider than the input
	{n: 1, c: 3, h: 30, w: 29, k: 40, kh: 7, kw: 7, sh: 2, sw: 2, pt: 3, pl: 3, pb: 3, pr: 3, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}}, // many taps, many channels
	// A few large planes (a stem): their fill split by phase rows.
	{n: 1, c: 3, h: 115, w: 117, k: 10, kh: 7, kw: 7, sh: 2, sw: 2, pt: 3, pl: 3, pb: 2, pr: 3, dh: 1, dw: 1, g: 1, bias: true, act: rt.Activation{Fn: rt.Relu}},
	{n: 1, c: 2, h: 130, w: 131, k: 7, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1},
}

func TestConv(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(25, 26))
	runConvCases(t, e, rng, []rt.DType{rt.F32, rt.F64, rt.F16}, true)
}

// TestConvLevels runs the f32 cases at every lower kernel level (AVX2,
// pure Go) too.
func TestConvLevels(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(27, 28))
	for _, lv := range ewLevels() {
		if lv == hwKernelLevel() {
			continue
		}
		withLevel(lv, func() { runConvCases(t, e, rng, []rt.DType{rt.F32}, false) })
	}
}

func runConvCases(t *testing.T, e *env, rng *rand.Rand, dts []rt.DType, transpose bool) {
	for _, dt := range dts {
		for ci, c := range convCases {
			oh, ow := c.out()
			cg := c.c / c.g
			nx, nw, ny := c.n*c.c*c.h*c.w, c.k*cg*c.kh*c.kw, c.n*c.k*oh*ow
			xv, wv := stored(dt, randVals(rng, nx, -1, 1)), stored(dt, randVals(rng, nw, -1, 1))
			bv := stored(dt, randVals(rng, c.k, -1, 1))
			xr, wr, yr := e.region(dt, nx, xv), e.region(dt, nw, wv), e.region(dt, ny, nil)
			op := &rt.Conv{X: xr.ref(nx), W: wr.ref(nw), Y: yr.ref(ny), N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow,
				KH: c.kh, KW: c.kw, StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.g, Act: c.act}
			if c.bias {
				op.Bias = e.region(dt, c.k, bv).ref(c.k)
			}
			e.run(op)
			want, scale := convRef(c, xv, wv, bv)
			for i := range want {
				want[i] = c.act.Fn.Apply(want[i], c.act.Alpha, c.act.Beta)
			}
			tol := map[rt.DType]float64{rt.F32: 1e-4, rt.F64: 1e-12, rt.F16: 2e-3}[dt]
			checkVals(t, fmt.Sprintf("conv %s #%d", dt, ci), e.values(yr), stored(dt, want), tol, func(i int) float64 { return scale[i] })
			if transpose && dt == rt.F32 && ci < 4 {
				testConvTranspose(t, e, c, rng)
			}
		}
	}
}

func testConvTranspose(t *testing.T, e *env, c convCase, rng *rand.Rand) {
	// The transpose of the forward conv c: input has c's output shape.
	dt := rt.F32
	H, W := c.out()
	C, K := c.k, c.c // X channels, Y channels
	OH, OW := c.h, c.w
	cg, kg := C/c.g, K/c.g
	nx, nw, ny := c.n*C*H*W, C*kg*c.kh*c.kw, c.n*K*OH*OW
	xv, wv, bv := stored(dt, randVals(rng, nx, -1, 1)), stored(dt, randVals(rng, nw, -1, 1)), stored(dt, randVals(rng, K, -1, 1))
	xr, wr, yr := e.region(dt, nx, xv), e.region(dt, nw, wv), e.region(dt, ny, nil)
	op := &rt.ConvTranspose{X: xr.ref(nx), W: wr.ref(nw), Y: yr.ref(ny), N: c.n, C: C, H: H, Width: W, K: K, OH: OH, OW: OW,
		KH: c.kh, KW: c.kw, StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.g, Bias: e.region(dt, K, bv).ref(K)}
	e.run(op)
	want, scale := make([]float64, ny), make([]float64, ny)
	for n := 0; n < c.n; n++ {
		for k := 0; k < K; k++ {
			for p := 0; p < OH*OW; p++ {
				want[(n*K+k)*OH*OW+p] = bv[k]
				scale[(n*K+k)*OH*OW+p] = math.Abs(bv[k]) + 1e-3
			}
		}
		for ch := 0; ch < C; ch++ {
			g := ch / cg
			for ih := 0; ih < H; ih++ {
				for iw := 0; iw < W; iw++ {
					for kk := 0; kk < kg; kk++ {
						for i := 0; i < c.kh; i++ {
							for j := 0; j < c.kw; j++ {
								oh, ow := ih*c.sh-c.pt+i*c.dh, iw*c.sw-c.pl+j*c.dw
								if oh < 0 || oh >= OH || ow < 0 || ow >= OW {
									continue
								}
								pr := xv[((n*C+ch)*H+ih)*W+iw] * wv[((ch*kg+kk)*c.kh+i)*c.kw+j]
								q := ((n*K+g*kg+kk)*OH+oh)*OW + ow
								want[q] += pr
								scale[q] += math.Abs(pr)
							}
						}
					}
				}
			}
		}
	}
	checkVals(t, fmt.Sprintf("convT %+v", c), e.values(yr), stored(dt, want), 1e-4, func(i int) float64 { return scale[i] })
}

// convRef is the float64 convolution of case c (bias included when
// c.bias, no activation) and the sum of its terms' magnitudes (at least
// 1e-3), the scale of its tolerance.
func convRef(c convCase, xv, wv, bv []float64) (sum, scale []float64) {
	oh, ow := c.out()
	cg, kg := c.c/c.g, c.k/c.g
	sum, scale = make([]float64, c.n*c.k*oh*ow), make([]float64, c.n*c.k*oh*ow)
	for n := 0; n < c.n; n++ {
		for k := 0; k < c.k; k++ {
			g := k / kg
			for y := 0; y < oh; y++ {
				for x := 0; x < ow; x++ {
					s, sc := 0.0, 0.0
					if c.bias {
						s, sc = bv[k], math.Abs(bv[k])
					}
					for ch := 0; ch < cg; ch++ {
						for i := 0; i < c.kh; i++ {
							for j := 0; j < c.kw; j++ {
								ih, iw := y*c.sh-c.pt+i*c.dh, x*c.sw-c.pl+j*c.dw
								if ih < 0 || ih >= c.h || iw < 0 || iw >= c.w {
									continue
								}
								p := xv[((n*c.c+g*cg+ch)*c.h+ih)*c.w+iw] * wv[((k*cg+ch)*c.kh+i)*c.kw+j]
								s += p
								sc += math.Abs(p)
							}
						}
					}
					q := ((n*c.k+k)*oh+y)*ow + x
					sum[q], scale[q] = s, math.Max(sc, 1e-3)
				}
			}
		}
	}
	return sum, scale
}
