package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// winoTol bounds the Winograd F(4,3) path's f32 error per output,
// relative to sum |x||w| over the output's taps (plus |bias|). The
// transforms multiply each input by up to 5·5 (B^T ⊗ B^T), each weight
// by fractions down to 1/24² (G ⊗ G) and the products by up to 8·8 (A^T ⊗
// A^T), and each output sums 36 products of the 6×6 patch (not only its
// own 3×3 window), so its rounding error is a few hundred f32 epsilons
// of that scale, where a direct sum of C·9 products stays within a few
// tens. TestWino measures at most 1.8e-6 on these cases with F(4,3)
// and 2.3e-7 with F(2,3) (whose coefficients are 0, ±1 and ±1/2), with
// the AVX-512 kernels and in pure Go (the largest is logged, `-v`); 2e-5
// leaves a margin of ten for other inputs while any wrong transform
// coefficient, tap or tile gives errors of order 1e-2 to 1.
const winoTol = 2e-5

// TestWino runs 3×3 stride-1 convolutions through both Winograd
// algorithms (forced) against a float64 reference: odd planes, padding 0, 1 and
// uneven, batch 1 and 3, channel counts off multiples of 16, planes
// smaller than a tile, with bias and fused or unfused activations.
func TestWino(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(71, 72))
	relu := rt.Activation{Fn: rt.Relu}
	cases := []convCase{
		{n: 1, c: 3, h: 7, w: 9, k: 4, pt: 1, pl: 1, pb: 1, pr: 1, bias: true},
		{n: 3, c: 17, h: 13, w: 11, k: 19, pt: 1, pl: 1, pb: 1, pr: 1, bias: true, act: relu},
		{n: 1, c: 33, h: 15, w: 17, k: 21, bias: true},                                                 // padding 0
		{n: 3, c: 5, h: 9, w: 6, k: 7, pt: 0, pl: 1, pb: 2, pr: 0, act: rt.Activation{Fn: rt.Sigmoid}}, // uneven
		{n: 1, c: 40, h: 29, w: 31, k: 70, pt: 1, pl: 1, pb: 1, pr: 1, bias: true, act: rt.Activation{Fn: rt.Clip, Alpha: -0.5, Beta: 0.5}},
		{n: 1, c: 2, h: 3, w: 3, k: 3, pt: 1, pl: 1, pb: 1, pr: 1},             // one tile
		{n: 1, c: 9, h: 1, w: 5, k: 5, pt: 1, pl: 2, pb: 1, pr: 2, bias: true}, // one row, wide pads
		{n: 3, c: 24, h: 57, w: 45, k: 25, pt: 1, pl: 1, pb: 1, pr: 1, bias: true, act: relu},
		{n: 1, c: 64, h: 14, w: 14, k: 48, pt: 1, pl: 1, pb: 1, pr: 1, bias: true, act: relu},
		{n: 2, c: 20, h: 12, w: 16, k: 18, pt: 1, pl: 1, pb: 1, pr: 1, bias: true, act: relu}, // rows of whole tiles
		{n: 1, c: 7, h: 10, w: 70, k: 9, pt: 2, pl: 0, pb: 0, pr: 2},                          // 17 tiles a row
	}
	for i := range cases {
		c := &cases[i]
		c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.g = 3, 3, 1, 1, 1, 1, 1
	}
	save, saveH := winoMode, homesMode
	defer func() { winoMode, homesMode = save, saveH }()
	// Three workers take the blocks of each step from their home ranges
	// (homesFor), and, with homesMode -1, as parallelFor deals them.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	for _, homesMode = range []int{0, -1} {
		for _, mode := range []int{1, 2} {
			winoMode = mode
			worst := runWinoCases(t, e, rng, cases)
			t.Logf("F(%d,3), homes %d: largest error %.3g of sum |x||w| (tolerance %g)", useWinoM(), homesMode, worst, winoTol)
		}
	}
}

func runWinoCases(t *testing.T, e *env, rng *rand.Rand, cases []convCase) float64 {
	worst := 0.0
	for ci, c := range cases {
		oh, ow := c.out()
		nx, nw, ny := c.n*c.c*c.h*c.w, c.k*c.c*9, c.n*c.k*oh*ow
		xv, wv := stored(rt.F32, randVals(rng, nx, -1, 1)), stored(rt.F32, randVals(rng, nw, -1, 1))
		bv := stored(rt.F32, randVals(rng, c.k, -1, 1))
		xr, wr, yr := e.region(rt.F32, nx, xv), e.region(rt.F32, nw, wv), e.region(rt.F32, ny, nil)
		op := &rt.Conv{X: xr.ref(nx), W: wr.ref(nw), Y: yr.ref(ny), N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow,
			KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: c.pt, PadL: c.pl, DilH: 1, DilW: 1, Groups: 1, Act: c.act}
		if c.bias {
			op.Bias = e.region(rt.F32, c.k, bv).ref(c.k)
		}
		if useWino(op) == nil {
			t.Fatalf("case %d: not a Winograd case", ci)
		}
		e.run(op)
		worst = max(worst, checkWino(t, fmt.Sprintf("case %d", ci), c, xv, wv, bv, e.values(yr)))
		if ci != 1 {
			continue
		}
		// The transformed weights are cached by address: new weights
		// written in place (twice, then the first ones again: the
		// uncached path) must be seen.
		for round, w := range [][]float64{stored(rt.F32, randVals(rng, nw, -1, 1)), stored(rt.F32, randVals(rng, nw, -1, 1)), wv} {
			raw := rt.FromFloat64(rt.F32, w, nw).Data
			if err := e.dev.Write(wr.buf, guard, raw); err != nil {
				t.Fatal(err)
			}
			e.run(op)
			worst = max(worst, checkWino(t, fmt.Sprintf("case %d, new weights %d", ci, round), c, xv, w, bv, e.values(yr)))
		}
	}
	return worst
}

// useWinoM is the tile size winoMode forces.
func useWinoM() int {
	if winoMode == 2 {
		return 2
	}
	return 4
}

// checkWino compares a 3×3 stride-1 convolution's output got with a
// float64 reference and returns its largest error relative to sum |x||w|.
func checkWino(t *testing.T, name string, c convCase, xv, wv, bv, got []float64) float64 {
	t.Helper()
	oh, ow := c.out()
	worst := 0.0
	bad := 0
	for n := 0; n < c.n; n++ {
		for k := 0; k < c.k; k++ {
			for y := 0; y < oh; y++ {
				for x := 0; x < ow; x++ {
					s, sc := 0.0, 0.0
					if c.bias {
						s, sc = bv[k], math.Abs(bv[k])
					}
					for ch := 0; ch < c.c; ch++ {
						for i := 0; i < 3; i++ {
							for j := 0; j < 3; j++ {
								ih, iw := y-c.pt+i, x-c.pl+j
								if ih < 0 || ih >= c.h || iw < 0 || iw >= c.w {
									continue
								}
								p := xv[((n*c.c+ch)*c.h+ih)*c.w+iw] * wv[((k*c.c+ch)*3+i)*3+j]
								s += p
								sc += math.Abs(p)
							}
						}
					}
					q := ((n*c.k+k)*oh+y)*ow + x
					want := c.act.Fn.Apply(s, c.act.Alpha, c.act.Beta)
					d := math.Abs(got[q]-want) / math.Max(sc, 1e-3)
					worst = max(worst, d)
					if !(d <= winoTol) {
						if bad < 5 {
							t.Errorf("%s: y[%d][%d][%d][%d] = %v, want %v (error %.2g of sum |xw|)", name, n, k, y, x, got[q], want, d)
						}
						bad++
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values wrong", name, bad, len(got))
	}
	return worst
}

// TestInterleave2 checks the interleave kernel (and, back, deinterleave2)
// at lengths around the vector size, with sentinels past the end.
func TestInterleave2(t *testing.T) {
	if !interleave2(nil, nil, nil) {
		t.Skip("no interleave kernel here (needs AVX2 or AVX-512, not purego)")
	}
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 50} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(i+1), -float32(i+1)
		}
		dst := make([]float32, 2*n+3)
		for i := range dst {
			dst[i] = 99
		}
		if !interleave2(dst[:2*n], a, b) {
			t.Fatal("interleave2 reported no kernel")
		}
		for i := 0; i < n; i++ {
			if dst[2*i] != a[i] || dst[2*i+1] != b[i] {
				t.Fatalf("n=%d: dst[%d:%d] = %v, want %v %v", n, 2*i, 2*i+2, dst[2*i:2*i+2], a[i], b[i])
			}
		}
		for i := 2 * n; i < len(dst); i++ {
			if dst[i] != 99 {
				t.Fatalf("n=%d: dst[%d] = %v written past the end", n, i, dst[i])
			}
		}
		e, o := make([]float32, n), make([]float32, n)
		if !deinterleave2(e, o, dst[:2*n]) {
			t.Fatal("deinterleave2 reported no kernel")
		}
		for i := range e {
			if e[i] != a[i] || o[i] != b[i] {
				t.Fatalf("n=%d: deinterleave2 [%d] = %v %v", n, i, e[i], o[i])
			}
		}
	}
}

// TestWinoPick pins the shape heuristic's choices on the ResNet-18 and
// squeezenet 3×3 stride-1 layers to those BenchmarkConvShapes measured
// best (see winoPick), with the rates of AVX-512 (m) and of AVX2 (m2):
// F(4,3) for 64 on 56×56 and 128 on 28×28, F(2,3) for 256 on 14×14, the
// direct kernels elsewhere; with AVX2 F(2,3) for 64→256 on 13×13 and
// F(4,3) for 32→128 on 27×27 too.
func TestWinoPick(t *testing.T) {
	for _, c := range []struct{ c, h, k, m, m2 int }{
		{64, 56, 64, 4, 4}, {128, 28, 128, 4, 4}, {256, 14, 256, 2, 2}, {512, 7, 512, 0, 0},
		{16, 55, 64, 0, 0}, {32, 27, 128, 0, 4}, {48, 13, 192, 0, 0}, {64, 13, 256, 0, 2},
	} {
		o := &rt.Conv{X: rt.Ref{DType: rt.F32}, N: 1, C: c.c, H: c.h, Width: c.h, K: c.k, OH: c.h, OW: c.h, KH: 3, KW: 3,
			StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
		for _, lv := range []int{levelAVX512, levelAVX2} {
			m, want := 0, c.m
			if lv == levelAVX2 {
				want = c.m2
			}
			if wk := winoPick(o, winoRatesAt(lv)); wk != nil {
				m = wk.m
			}
			if m != want {
				t.Errorf("%s: %d→%d on %d×%d: F(%d,3) picked, want F(%d,3) (0: direct)", levelNames[lv], c.c, c.k, c.h, c.h, m, want)
			}
		}
	}
}
