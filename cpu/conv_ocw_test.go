package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestOcwRun checks every channels-in-lanes kernel (each vector count,
// position count and partial last vector) against a float64 sum, with
// sentinels around every output and a clamp.
func TestOcwRun(t *testing.T) {
	if ocwMaxP(1) == 0 {
		t.Skip("no channels-in-lanes kernels here (needs AVX2 or AVX-512, not purego)")
	}
	for _, lv := range ewLevels() {
		if lv > levelGo {
			withLevel(lv, func() { t.Run(levelNames[lv], testOcwRun) })
		}
	}
}

func testOcwRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for nv := 1; nv <= 4; nv++ {
		for np := 1; np <= ocwMaxP(nv); np++ {
			for _, kb := range []int{16*nv - 15, 16*nv - 7, 16 * nv} {
				for _, clamp := range []bool{false, true} {
					nt := 1 + rng.IntN(40)
					offs := make([]int, nt)
					for i := range offs {
						offs[i] = rng.IntN(100)
					}
					x := randF32(rng, 100+np)
					w := randF32(rng, nt*16*nv)
					bias := randF32(rng, 16*nv)
					ldy := np + 3
					y := make([]float32, 16*nv*ldy+5)
					for i := range y {
						y[i] = 1234
					}
					lo, hi := float32(-0.5), float32(0.75)
					// In two chunks of taps (partial sums in acc) or one.
					acc := randF32(rng, np*16*nv+ocwStoreSlack(nv))
					if nt > 1 && clamp {
						h := nt / 2
						ocwRun(nv, np, x, offs[:h], maxOffset("test", offs[:h]), w, bias, acc, true, false, clamp, lo, hi)
						ocwRun(nv, np, x, offs[h:], maxOffset("test", offs[h:]), w[h*16*nv:], bias, acc, false, true, clamp, lo, hi)
					} else {
						ocwRun(nv, np, x, offs, maxOffset("test", offs), w, bias, acc, true, true, clamp, lo, hi)
					}
					ocwStore(nv, kb, np, acc, y, ldy)
					for k := 0; k < 16*nv; k++ {
						for j := 0; j < ldy; j++ {
							got := y[k*ldy+j]
							if k >= kb || j >= np {
								if got != 1234 {
									t.Fatalf("nv %d np %d kb %d: y[%d][%d] = %v written", nv, np, kb, k, j, got)
								}
								continue
							}
							s := float64(bias[k])
							sa := math.Abs(s)
							for ti, o := range offs {
								s += float64(w[ti*16*nv+k]) * float64(x[o+j])
								sa += math.Abs(float64(w[ti*16*nv+k]) * float64(x[o+j]))
							}
							if clamp {
								s = min(max(s, float64(lo)), float64(hi))
							}
							if math.Abs(float64(got)-s) > 1e-6*sa+1e-7 {
								t.Fatalf("nv %d np %d kb %d clamp %v: y[%d][%d] = %v, want %v", nv, np, kb, clamp, k, j, got, s)
							}
						}
					}
				}
			}
		}
	}
}

// TestOcwStore checks ocwStore's transposes (AVX-512 blocks of 16 × 16
// and the Go loop) against a plain copy, for every vector count, partial
// channel blocks and position counts off multiples of 16, with sentinels
// around the output rows.
func TestOcwStore(t *testing.T) {
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			t.Run(levelNames[lv], func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, 6))
				for nv := 1; nv <= 4; nv++ {
					kbs := []int{16*nv - 9, 16 * nv}
					if nv == 1 {
						kbs = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
					}
					for _, kb := range kbs {
						for _, npos := range []int{1, 7, 15, 16, 17, 33, 55, 169} {
							acc := randF32(rng, npos*16*nv+ocwStoreSlack(nv))
							ldy := npos + 5
							y := make([]float32, 16*nv*ldy)
							for i := range y {
								y[i] = 1234
							}
							ocwStore(nv, kb, npos, acc, y, ldy)
							for k := 0; k < 16*nv; k++ {
								for j := 0; j < ldy; j++ {
									want := float32(1234)
									if k < kb && j < npos {
										want = acc[j*16*nv+k]
									}
									if got := y[k*ldy+j]; got != want {
										t.Fatalf("nv %d kb %d npos %d: y[%d][%d] = %v, want %v", nv, kb, npos, k, j, got, want)
									}
								}
							}
						}
					}
				}
			})
		})
	}
}

func randF32(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.Float64()*2 - 1)
		if s[i] == 0 {
			s[i] = 0.5
		}
	}
	return s
}

// BenchmarkOcwKernel times one kernel call of each main shape over 576
// taps (a 64-channel 3×3) with its input and weights in cache.
func BenchmarkOcwKernel(b *testing.B) {
	if ocwMaxP(1) == 0 {
		b.Skip("no kernels")
	}
	for _, s := range [][2]int{{4, 6}, {3, 8}, {2, 12}, {1, 16}, {4, 4}, {4, 2}} {
		nv, np := s[0], s[1]
		b.Run(fmtShape(nv, np), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			nt := ocwBenchTaps
			offs := make([]int, nt)
			for i := range offs {
				offs[i] = (i/9)*225 + (i%9/3)*15 + i%3
			}
			x := randF32(rng, 64*225+64)
			w := randF32(rng, nt*16*nv)
			bias := randF32(rng, 16*nv)
			acc := make([]float32, 16*nv*np)
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				ocwRun(nv, np, x, offs, maxOffset("test", offs), w, bias, acc, true, true, true, 0, 1e9)
			}
			c := processCPU() - c0
			b.ReportMetric(float64(2*nt*16*nv*np)*float64(b.N)/c.Seconds()/1e9, "GFLOP/cpu-s")
		})
	}
}

func fmtShape(nv, np int) string {
	return string(rune('0'+nv)) + "x" + itoa(np)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

var ocwBenchTaps = 576

// TestConvOcw runs convolutions on the channels-in-lanes kernels (forced)
// against the float64 reference of runConvCases (tolerance 1e-4 of sum
// |x·w| per output): output channels off multiples of 16 and 64 (partial
// last vectors and blocks), widths from 1 to past two tiles, padding,
// stride 2, dilation, 1×1 in place and strided, batches, a weight tensor
// rewritten between runs (the packed-weight cache must see it), and
// activations fused (ReLU, Clip) and not (Sigmoid).
func TestConvOcw(t *testing.T) {
	if ocwMaxP(1) == 0 {
		t.Skip("no channels-in-lanes kernels here (needs AVX2 or AVX-512, not purego)")
	}
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(71, 72))
	relu := rt.Activation{Fn: rt.Relu}
	relu6 := rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	cases := []convCase{
		{n: 1, c: 40, h: 7, w: 7, k: 70, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 33, h: 14, w: 13, k: 27, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1},
		{n: 2, c: 20, h: 29, w: 31, k: 13, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu6},
		{n: 1, c: 24, h: 5, w: 45, k: 129, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 5, h: 3, w: 1, k: 48, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 37, h: 11, w: 19, k: 200, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu6}, // 1×1 in place
		{n: 3, c: 64, h: 5, w: 6, k: 100, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, act: rt.Activation{Fn: rt.Sigmoid}},
		{n: 1, c: 16, h: 13, w: 13, k: 17, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, g: 1, bias: true},                            // 1×1 stride 2
		{n: 1, c: 12, h: 20, w: 17, k: 24, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 2, dw: 2, g: 1, act: relu}, // dilated
		{n: 1, c: 3, h: 23, w: 23, k: 64, kh: 3, kw: 3, sh: 2, sw: 2, dh: 1, dw: 1, g: 1, bias: true, act: relu},                  // RGB stride 2
		{n: 1, c: 16, h: 13, w: 13, k: 64, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		// Three blocks of 64 channels: four groups of 3-4 rows on two workers.
		{n: 1, c: 21, h: 13, w: 13, k: 192, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
	}
	save, saveMode := convCases, ocwMode
	defer func() { convCases, ocwMode = save, saveMode }()
	convCases, ocwMode = cases, 1
	for _, c := range cases {
		oh, ow := c.out()
		o := &rt.Conv{X: rt.Ref{DType: rt.F32}, N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: c.kh, KW: c.kw,
			StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.g}
		if !useOcw(o) {
			t.Fatalf("%+v: not run by the channels-in-lanes kernels", c)
		}
	}
	runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
	runConvCases(t, e, rng, []rt.DType{rt.F32}, false)

	// Weights and bias rewritten in place between runs: the cached
	// packed copy must not be used.
	o := &rt.Conv{X: rt.Ref{DType: rt.F32}, N: 1, C: 9, H: 6, Width: 7, K: 20, OH: 6, OW: 7, KH: 3, KW: 3,
		StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	x, w, b := randF32(rng, 9*6*7), randF32(rng, 20*9*9), randF32(rng, 20)
	y := make([]float32, 20*6*7)
	for run := 0; run < 4; run++ {
		if run == 2 {
			w[5*81+7] += 1
		}
		if run == 3 {
			b[19] -= 2
		}
		ocwConv(o, x, w, b, y)
		for k := 0; k < 20; k++ {
			for oh := 0; oh < 6; oh++ {
				for ow := 0; ow < 7; ow++ {
					s, sa := float64(b[k]), math.Abs(float64(b[k]))
					for c := 0; c < 9; c++ {
						for i := 0; i < 3; i++ {
							for j := 0; j < 3; j++ {
								ih, iw := oh+i-1, ow+j-1
								if ih < 0 || ih >= 6 || iw < 0 || iw >= 7 {
									continue
								}
								p := float64(x[(c*6+ih)*7+iw]) * float64(w[((k*9+c)*3+i)*3+j])
								s += p
								sa += math.Abs(p)
							}
						}
					}
					if got := y[(k*6+oh)*7+ow]; math.Abs(float64(got)-s) > 1e-5*sa {
						t.Fatalf("run %d: y[%d][%d][%d] = %v, want %v", run, k, oh, ow, got, s)
					}
				}
			}
		}
	}
}

// TestOcwPick pins the heuristic on squeezenet's and ResNet-18's
// convolutions (with AVX-512; with AVX2 it picks none), on one worker
// and on two (where the 13×13 rows go to the direct kernels).
func TestOcwPick(t *testing.T) {
	if ocwMaxP(1) == 0 {
		t.Skip("no channels-in-lanes kernels here (needs AVX2 or AVX-512, not purego)")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		checkOcwPick(t, procs)
	}
}

func checkOcwPick(t *testing.T, procs int) {
	t.Helper()
	one := procs == 1
	for _, c := range []struct {
		c, h, k, kk, s, p int
		want              bool
	}{
		{64, 13, 256, 3, 1, 1, one},     // fire 11, 12 expand3x3
		{48, 13, 192, 3, 1, 1, one},     // fire 9, 10
		{32, 27, 128, 3, 1, 1, false},   // fire 6, 7: wide rows
		{16, 55, 64, 3, 1, 1, false},    // fire 3, 4
		{512, 13, 1000, 1, 1, 0, false}, // classifier 1×1
		{64, 13, 256, 1, 1, 0, false},   // expand1x1
		{512, 7, 512, 3, 1, 1, false},   // ResNet: 2.4 M weights, not constant
		{3, 224, 64, 3, 2, 0, false},    // first layer
	} {
		oh := (c.h+2*c.p-c.kk)/c.s + 1
		o := &rt.Conv{X: rt.Ref{DType: rt.F32}, N: 1, C: c.c, H: c.h, Width: c.h, K: c.k, OH: oh, OW: oh, KH: c.kk, KW: c.kk,
			StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, DilH: 1, DilW: 1, Groups: 1}
		want := c.want && ocwMaxV() == 4 // never with AVX2
		if got := useOcw(o); got != want {
			t.Errorf("%d workers, %d→%d %d×%d on %d×%d: useOcw = %v, want %v", procs, c.c, c.k, c.kk, c.kk, c.h, c.h, got, want)
		}
	}
	// ResNet's 512 3×3 with its weights in a buffer marked constant (as
	// the engine's are): no copy to compare, so the kernels take it.
	d := NewDevice()
	defer d.Close()
	wb, err := d.Alloc(4 * 512 * 512 * 9)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Free()
	o := &rt.Conv{X: rt.Ref{DType: rt.F32}, W: rt.Ref{Buf: wb, DType: rt.F32}, N: 1, C: 512, H: 7, Width: 7, K: 512, OH: 7, OW: 7,
		KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
	if useOcw(o) {
		t.Error("512→512 3×3 on 7×7, weights not marked constant: useOcw = true, want false")
	}
	rt.MarkConstant(wb)
	if useOcw(o) != (ocwMaxV() == 4) {
		t.Errorf("512→512 3×3 on 7×7, weights marked constant: useOcw = %v, want %v", useOcw(o), ocwMaxV() == 4)
	}
}
