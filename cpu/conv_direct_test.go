package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestDcwRun checks the wide direct-convolution kernels against a float64
// sum: every row count of both block widths, output lengths around the
// vector and block sizes (the masked last vector), random non-zero
// values and tap offsets, with and without the clamp, and sentinels
// around each output row (nothing written past n).
func TestDcwRun(t *testing.T) {
	for _, lv := range ewLevels() {
		if lv > levelGo {
			withLevel(lv, func() { t.Run(levelNames[lv], testDcwRun) })
		}
	}
}

func testDcwRun(t *testing.T) {
	if dcwMaxKB(2) == 0 {
		t.Skip("no wide direct-convolution kernels here (needs AVX2 or AVX-512, not purego)")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	const sentinel = float32(-12345)
	for _, u := range []int{2, 4} {
		for kb := 1; kb <= dcwMaxKB(u); kb++ {
			for _, n := range []int{1, 7, 8, 15, 16, 17, 24, 31, 33, 40, 47, 56, 63, 64, 65, 97, 130} {
				for _, clamp := range []bool{false, true} {
					rows := 1 + rng.IntN(3)
					acc := rng.IntN(2) == 0
					name := fmt.Sprintf("u%d/kb%d/n%d/rows%d/clamp%v/acc%v", u, kb, n, rows, clamp, acc)
					ntaps := 1 + rng.IntN(23)
					offs, hi := randOffs(rng, ntaps, 50)
					ldxr := n + rng.IntN(5)
					x := randF32(rng, (rows-1)*ldxr+hi+n)
					ldw := ntaps + rng.IntN(3)
					w, bias := randF32(rng, kb*ldw), randF32(rng, kb)
					ldyr := n + rng.IntN(3)
					ldy := rows*ldyr + 3
					y := make([]float32, kb*ldy)
					y0 := make([]float32, len(y))
					for i := range y {
						y[i] = sentinel
						if r, q := (i%ldy)/ldyr, (i%ldy)%ldyr; acc && r < rows && q < n {
							y[i] = float32(rng.Float64()*2 - 1)
						}
						y0[i] = y[i]
					}
					lo, hiC := float32(-0.25), float32(0.5)
					dcwRun(u, kb, n, x, offs, w, ldw, bias, y, ldy, clamp, acc, lo, hiC, rows, ldxr, ldyr)
					for k := 0; k < kb; k++ {
						for i := 0; i < ldy; i++ {
							got := y[k*ldy+i]
							r, q := i/ldyr, i%ldyr
							if r >= rows || q >= n {
								if got != sentinel {
									t.Fatalf("%s: y[%d][%d] = %v written outside the rows", name, k, i, got)
								}
								continue
							}
							s, sc := float64(bias[k]), math.Abs(float64(bias[k]))
							if acc {
								s, sc = float64(y0[k*ldy+i]), math.Abs(float64(y0[k*ldy+i]))
							}
							for t, off := range offs {
								p := float64(w[k*ldw+t]) * float64(x[r*ldxr+q+off])
								s += p
								sc += math.Abs(p)
							}
							if clamp {
								s = math.Min(math.Max(s, float64(lo)), float64(hiC))
							}
							if d := math.Abs(float64(got) - s); d > 1e-5*sc+1e-7 {
								t.Fatalf("%s: y[%d] row %d [%d] = %v, want %v", name, k, r, q, got, s)
							}
						}
					}
				}
			}
		}
	}
}

// randOffs returns ntaps random tap offsets below lim and the largest.
func randOffs(rng *rand.Rand, ntaps, lim int) ([]int, int) {
	offs := make([]int, ntaps)
	hi := 0
	for i := range offs {
		offs[i] = rng.IntN(lim)
		hi = max(hi, offs[i])
	}
	return offs, hi
}

// TestDcwRunGap checks the wide kernels' compressed stores (dcwRunGap)
// against a float64 sum: flat runs over rows of wq of which the first
// ow are real, ending anywhere in a row (n not a whole number of rows,
// so that the table's last vector holds lanes of a row past n), with
// and without the clamp and accumulation, and sentinels everywhere else
// in y (no junk column and nothing past the last real output written).
func TestDcwRunGap(t *testing.T) {
	if kernelLevel() < levelAVX512 || dcwMaxKB(2) == 0 {
		t.Skip("compressed stores need the AVX-512 wide kernels")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	const sentinel = float32(-12345)
	for _, u := range []int{2, 4} {
		for kb := 1; kb <= dcwMaxKB(u); kb++ {
			for _, shape := range [][2]int{{14, 13}, {56, 55}, {9, 7}, {5, 3}, {20, 16}, {17, 15}, {30, 27}, {113, 112}, {8, 5}} {
				wq, ow := shape[0], shape[1]
				rowsAll := 1 + rng.IntN(5)
				tab := gapTable(rowsAll*wq, wq, ow)
				// n ends in the last row, inside its real outputs or
				// anywhere up to its junk columns.
				n := (rowsAll-1)*wq + 1 + rng.IntN(wq)
				clamp, acc := rng.IntN(2) == 0, rng.IntN(2) == 0
				name := fmt.Sprintf("u%d/kb%d/wq%d/ow%d/n%d/clamp%v/acc%v", u, kb, wq, ow, n, clamp, acc)
				ntaps := 1 + rng.IntN(23)
				offs, hi := randOffs(rng, ntaps, 50)
				x := randF32(rng, hi+n)
				ldw := ntaps + rng.IntN(3)
				w, bias := randF32(rng, kb*ldw), randF32(rng, kb)
				// real reports whether flat output q is stored, and where.
				real := func(q int) (int, bool) { return q/wq*ow + q%wq, q < n && q%wq < ow }
				ldy := rowsAll*ow + 3
				y := make([]float32, kb*ldy)
				for i := range y {
					y[i] = sentinel
				}
				y0 := make([]float32, len(y))
				for k := 0; k < kb; k++ {
					for q := 0; q < n; q++ {
						if i, ok := real(q); ok && acc {
							y[k*ldy+i] = float32(rng.Float64()*2 - 1)
						}
					}
				}
				copy(y0, y)
				lo, hiC := float32(-0.25), float32(0.5)
				dcwRunGap(u, kb, n, x, offs, hi, w, ldw, bias, y, ldy, clamp, acc, lo, hiC, 1, 0, 0, tab)
				want := slices.Clone(y0)
				for k := 0; k < kb; k++ {
					for q := 0; q < n; q++ {
						i, ok := real(q)
						if !ok {
							continue
						}
						s := float64(bias[k])
						if acc {
							s = float64(y0[k*ldy+i])
						}
						for t, off := range offs {
							s += float64(w[k*ldw+t]) * float64(x[q+off])
						}
						if clamp {
							s = math.Min(math.Max(s, float64(lo)), float64(hiC))
						}
						want[k*ldy+i] = float32(s)
					}
				}
				for i := range y {
					if d := math.Abs(float64(y[i]) - float64(want[i])); d > 1e-5*float64(ntaps+1) || (want[i] == sentinel) != (y[i] == sentinel) {
						t.Fatalf("%s: y[%d][%d] = %v, want %v", name, i/ldy, i%ldy, y[i], want[i])
					}
				}
			}
		}
	}
}

// TestDconvRun checks the packed-weight direct-convolution kernels
// (dconvRun) against a float64 sum: every row count, output lengths
// around the vector and block sizes of both AVX-512 and AVX2 (the
// masked last vector), random tap offsets, and sentinels around each
// output row (nothing written past n).
func TestDconvRun(t *testing.T) {
	for _, lv := range ewLevels() {
		if lv > levelGo {
			withLevel(lv, func() { t.Run(levelNames[lv], testDconvRun) })
		}
	}
}

func testDconvRun(t *testing.T) {
	if dconvMaxKB() == 0 {
		t.Skip("no direct-convolution kernels here (needs AVX2 or AVX-512, not purego)")
	}
	rng := rand.New(rand.NewPCG(67, 68))
	const sentinel = float32(-12345)
	for kb := 1; kb <= dconvMaxKB(); kb++ {
		for _, n := range []int{1, 3, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 33, 47, 48, 49, 63, 64, 65, 130} {
			ntaps := 1 + rng.IntN(20)
			offs := make([]int, ntaps)
			hi := 0
			for i := range offs {
				offs[i] = rng.IntN(40)
				hi = max(hi, offs[i])
			}
			x := make([]float32, hi+n)
			for i := range x {
				x[i] = float32(rng.Float64()*2 - 1)
			}
			w := make([]float32, ntaps*kb)
			for i := range w {
				w[i] = float32(rng.Float64()*2 - 1)
			}
			bias := make([]float32, kb)
			for i := range bias {
				bias[i] = float32(rng.Float64()*2 - 1)
			}
			ldy := n + rng.IntN(4)
			y := make([]float32, kb*ldy+2)
			for i := range y {
				y[i] = sentinel
			}
			dconvRun(kb, n, x, offs, w, bias, y, ldy)
			for i, got := range y {
				k, q := i/ldy, i%ldy
				if k >= kb || q >= n {
					if got != sentinel {
						t.Fatalf("kb%d/n%d: y[%d] = %v written outside the rows", kb, n, i, got)
					}
					continue
				}
				s, sc := float64(bias[k]), math.Abs(float64(bias[k]))
				for t, off := range offs {
					p := float64(w[t*kb+k]) * float64(x[q+off])
					s += p
					sc += math.Abs(p)
				}
				if d := math.Abs(float64(got) - s); d > 1e-5*sc+1e-7 {
					t.Fatalf("kb%d/n%d: y[%d][%d] = %v, want %v", kb, n, k, q, got, s)
				}
			}
		}
	}
}

// TestConvDirectPacked runs the convolution cases with the convolutions
// of one input channel per group on the packed-weight kernels (dconvRun)
// rather than the wide ones.
func TestConvDirectPacked(t *testing.T) {
	if dconvMaxKB() == 0 {
		t.Skip("no direct-convolution kernels here (needs AVX2 or AVX-512, not purego)")
	}
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(69, 70))
	defer func() { dcwAll = true }()
	dcwAll = false
	runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
}

// TestDcwNaN checks that a NaN reaching the fused ReLU stays NaN, as
// rt.Relu keeps it.
func TestDcwNaN(t *testing.T) {
	if dcwMaxKB(2) == 0 {
		t.Skip("no wide direct-convolution kernels here (needs AVX2 or AVX-512, not purego)")
	}
	x := []float32{1, float32(math.NaN()), -1, 2}
	w := []float32{1}
	y := make([]float32, 4)
	dcwRun(2, 1, 4, x, []int{0}, w, 1, []float32{0}, y, 4, true, false, 0, float32(math.Inf(1)), 1, 0, 0)
	if y[0] != 1 || !math.IsNaN(float64(y[1])) || y[2] != 0 || y[3] != 2 {
		t.Fatalf("relu of [1 NaN -1 2] = %v", y)
	}
}

// TestConvWide runs convolutions with many channels per group (the wide
// direct kernels; 1×1 ones read the input in place) against a float64
// reference, with each block width forced, taps in small chunks and in
// none, and with the kernels off (im2col + GEMM) for comparison.
func TestConvWide(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(63, 64))
	relu := rt.Activation{Fn: rt.Relu}
	relu6 := rt.Activation{Fn: rt.Clip, Alpha: 0, Beta: 6}
	cases := []convCase{
		{n: 1, c: 40, h: 7, w: 7, k: 70, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 33, h: 14, w: 13, k: 27, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1},
		{n: 2, c: 20, h: 29, w: 31, k: 13, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu6},
		{n: 1, c: 24, h: 57, w: 45, k: 25, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 48, h: 9, w: 11, k: 36, kh: 3, kw: 3, sh: 1, sw: 1, pt: 0, pl: 0, pb: 0, pr: 0, dh: 1, dw: 1, g: 2, bias: true}, // in place, grouped
		{n: 1, c: 37, h: 11, w: 19, k: 29, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu6},                // 1×1 in place
		{n: 3, c: 64, h: 5, w: 6, k: 100, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, act: rt.Activation{Fn: rt.Sigmoid}},
		{n: 1, c: 16, h: 13, w: 13, k: 17, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, g: 1, bias: true},                            // 1×1 stride 2
		{n: 2, c: 24, h: 28, w: 30, k: 20, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, g: 1, act: relu},                             // a ResNet downsample's: rows of whole vectors
		{n: 1, c: 12, h: 20, w: 17, k: 24, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 2, dw: 2, g: 1, act: relu}, // dilated
	}
	save, saveU, saveTC := convCases, dcwU, dcwTapChunk
	defer func() { convCases, dcwU, dcwOn, dcwTapChunk = save, saveU, true, saveTC }()
	convCases = cases
	for _, mode := range []struct {
		name   string
		u      int
		on     bool
		chunks int
	}{{"auto", 0, true, saveTC}, {"u2", 2, true, saveTC}, {"u4", 4, true, saveTC}, {"chunks", 0, true, 10}, {"nochunks", 0, true, 0}, {"gemm", 0, false, saveTC}} {
		t.Run(mode.name, func(t *testing.T) {
			dcwU, dcwOn, dcwTapChunk = mode.u, mode.on, mode.chunks
			runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
		})
	}
}

// TestDw3 runs depthwise 3×3 convolutions of the row kernels (dw3Conv)
// against a float64 reference: widths around the vector and the
// stride-2 double-vector sizes, strides 1 and 2, bottom and right
// padding 0-2, with and without bias, with a fused clamp and with other
// activations; at every kernel level (the AVX-512 and AVX2 kernels, and
// the Go loops of convT at levelGo).
func TestDw3(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(65, 66))
	acts := []rt.Activation{{}, {Fn: rt.Relu}, {Fn: rt.Clip, Alpha: 0, Beta: 0.75}, {Fn: rt.Sigmoid}}
	var cases []convCase
	for i, w := range []int{1, 2, 3, 15, 16, 17, 18, 31, 32, 33, 34, 47, 50, 64, 65, 113} {
		for s := 1; s <= 2; s++ {
			h := 1 + (w*7+s)%9
			c := convCase{n: 1 + i%2, c: 3 + i%3, h: h, w: w, kh: 3, kw: 3, sh: s, sw: s, pt: 1, pl: 1,
				pb: (i + s) % 3, pr: (i + 2*s) % 3, dh: 1, dw: 1, bias: i%3 != 0, act: acts[(i+s)%len(acts)]}
			c.k, c.g = c.c, c.c
			if oh, ow := c.out(); oh < 1 || ow < 1 {
				continue
			}
			cases = append(cases, c)
		}
	}
	// Padding 1 all round, stride 1, narrow planes: the flat kernel
	// (dw3Flat) at levelAVX2.
	for i, w := range []int{1, 2, 3, 7, 8, 9, 14, 15, 16, 17, 28, 31, 32, 33} {
		h := []int{1, 2, 3, 7, 9, 14}[i%6]
		c := convCase{n: 1 + i%2, c: 2 + i%3, h: h, w: w, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1,
			dh: 1, dw: 1, bias: i%2 == 0, act: acts[i%len(acts)]}
		c.k, c.g = c.c, c.c
		cases = append(cases, c)
	}
	save := convCases
	defer func() { convCases = save }()
	convCases = cases
	for _, lv := range ewLevels() {
		withLevel(lv, func() { checkDw3(t, e, rng, cases, lv) })
	}
}

// checkDw3 runs the TestDw3 cases at kernel level lv.
func checkDw3(t *testing.T, e *env, rng *rand.Rand, cases []convCase, lv int) {
	t.Helper()
	if lv > levelGo {
		for _, c := range cases {
			oh, ow := c.out()
			o := &rt.Conv{X: rt.Ref{DType: rt.F32}, N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: 3, KW: 3,
				StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, DilH: 1, DilW: 1, Groups: c.g}
			if !dw3Applies(o) {
				t.Fatalf("%+v: not a dw3Conv case", c)
			}
		}
	}
	runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
}

// TestConvSharedPad runs stride-1 convolutions of narrow planes, whose
// phase rows share their padding columns with the next row's on the wide
// kernels with AVX2 (dcwSharedPadWq), against a float64 reference at every
// kernel level, with the sharing on and off: symmetric and uneven
// padding (phase width down to the output width, where the flat range is
// written straight into y), dilation, row strides, depthwise 5×5 (the
// wide kernels by dcwAll), Winograd and the channels-in-lanes kernels
// off so that the direct path runs.
func TestConvSharedPad(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(91, 92))
	relu := rt.Activation{Fn: rt.Relu}
	cases := []convCase{
		{n: 1, c: 37, h: 7, w: 7, k: 29, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 2, c: 9, h: 6, w: 5, k: 13, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 11, h: 5, w: 6, k: 7, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 2, pb: 0, pr: 0, dh: 1, dw: 1, g: 1},
		{n: 1, c: 10, h: 6, w: 5, k: 11, kh: 3, kw: 3, sh: 1, sw: 1, pt: 0, pl: 1, pb: 1, pr: 3, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 6, h: 7, w: 4, k: 10, kh: 5, kw: 5, sh: 1, sw: 1, pt: 2, pl: 3, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, act: relu},
		{n: 1, c: 5, h: 9, w: 6, k: 8, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 2, dw: 2, g: 1, bias: true},
		{n: 1, c: 12, h: 11, w: 7, k: 9, kh: 3, kw: 3, sh: 2, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
		{n: 2, c: 6, h: 6, w: 6, k: 6, kh: 5, kw: 5, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 1, dw: 1, g: 6, bias: true},    // depthwise
		{n: 1, c: 130, h: 7, w: 7, k: 70, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true}, // tap chunks
		{n: 1, c: 9, h: 13, w: 13, k: 20, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, act: relu},  // AVX-512 width 14
	}
	if dcwMaxKB(2) > 0 {
		// With AVX2 the 7×7 plane takes the shared width (8, not 9),
		// with AVX-512 the 13×13 one (14, not 15).
		hw, want := 7, 8
		if dcwLanes() >= 16 {
			hw, want = 13, 14
		}
		o := &rt.Conv{N: 1, C: 37, H: hw, Width: hw, K: 29, OH: hw, OW: hw, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: 1}
		p := newDconvPlan(o, make([]float32, 29*37*9), nil)
		if p.wq != want {
			t.Fatalf("%d×%d 3×3 plan: phase width %d, want %d", hw, hw, p.wq, want)
		}
	}
	save, saveW, saveO, saveS := convCases, winoMode, ocwMode, dcwSharedPad
	defer func() { convCases, winoMode, ocwMode, dcwSharedPad = save, saveW, saveO, saveS }()
	convCases, winoMode, ocwMode = cases, -1, -1
	for _, lv := range ewLevels() {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/shared=%v", levelNames[lv], on), func(t *testing.T) {
				dcwSharedPad = on
				withLevel(lv, func() { runConvCases(t, e, rng, []rt.DType{rt.F32}, false) })
			})
		}
	}
}

// TestConvBands checks directConv's bands of output rows (bandConv)
// against a float64 reference, with and without a residual, at every
// kernel level: with bands forced off, on at one and three a worker, and
// chosen, with the workers' home ranges (runHomes) and without, on three
// workers (GOMAXPROCS) so that one image takes the split path, and 1×1
// convolutions read in place its row chunks. The cases cover strides 1 and 2, dilation, uneven padding,
// 1×1 stride 2, bands of uneven rows, more bands than rows, and (AVX2)
// a 7×7 plane with shared padding columns, whose last row reads past the
// band's rows.
func TestConvBands(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(105, 106))
	relu := rt.Activation{Fn: rt.Relu}
	cases := []convCase{
		{n: 1, c: 5, h: 23, w: 21, k: 24, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 3, h: 40, w: 37, k: 40, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 37, h: 7, w: 7, k: 29, kh: 3, kw: 3, sh: 1, sw: 1, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 6, h: 19, w: 17, k: 30, kh: 3, kw: 3, sh: 1, sw: 1, pt: 2, pl: 2, pb: 2, pr: 2, dh: 2, dw: 2, g: 1, act: relu},
		{n: 1, c: 4, h: 25, w: 22, k: 32, kh: 5, kw: 5, sh: 1, sw: 1, pt: 2, pl: 1, pb: 0, pr: 3, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 20, h: 30, w: 29, k: 96, kh: 1, kw: 1, sh: 2, sw: 2, dh: 1, dw: 1, g: 1, bias: true},
		{n: 1, c: 8, h: 16, w: 15, k: 40, kh: 3, kw: 3, sh: 2, sw: 1, pt: 0, pl: 1, pb: 2, pr: 0, dh: 1, dw: 1, g: 2},
		// 1×1 stride 1, read in place: row chunks from each worker's home
		{n: 1, c: 20, h: 30, w: 29, k: 40, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1, bias: true, act: relu},
		{n: 1, c: 13, h: 47, w: 25, k: 9, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, g: 1},
	}
	save, saveW, saveO, saveB, saveH := convCases, winoMode, ocwMode, dcwBands, homesMode
	defer func() { convCases, winoMode, ocwMode, dcwBands, homesMode = save, saveW, saveO, saveB, saveH }()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	convCases, winoMode, ocwMode = cases, -1, -1
	for _, lv := range ewLevels() {
		for _, v := range []struct{ nb, homes int }{{-1, 0}, {1, 0}, {3, 0}, {0, 0}, {0, -1}} {
			nb := v.nb
			t.Run(fmt.Sprintf("%s/bands=%d/homes=%d", levelNames[lv], nb, v.homes), func(t *testing.T) {
				dcwBands, homesMode = nb, v.homes
				withLevel(lv, func() {
					runConvCases(t, e, rng, []rt.DType{rt.F32}, false)
					testConvRes(t, []rt.DType{rt.F32}, cases)
				})
			})
		}
	}
}

// TestTapChunkFor checks the tap-chunk default by L2 size and the parse
// of sysfs cache sizes it is read with.
func TestTapChunkFor(t *testing.T) {
	for _, c := range []struct {
		size  string
		bytes int
		chunk int
	}{
		{"2048K", 2 << 20, 0},
		{"1024K", 1 << 20, 72},
		{"2M", 2 << 20, 0},
		{"512K\n", 512 << 10, 72},
		{"", 0, 72},
		{"lots", 0, 72},
		{"-4K", 0, 72},
	} {
		b := parseCacheSize(c.size)
		if b != c.bytes {
			t.Errorf("parseCacheSize(%q) = %d, want %d", c.size, b, c.bytes)
		}
		if got := tapChunkFor(b); got != c.chunk {
			t.Errorf("tapChunkFor(%d) = %d, want %d", b, got, c.chunk)
		}
	}
	t.Logf("this machine: L2 %d bytes, tap chunk %d", l2Bytes(), tapChunkFor(l2Bytes()))
}
