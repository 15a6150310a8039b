package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

type mmCase struct {
	batch, m, n, k int
	ta, tb         bool
	bcastA, bcastB bool
	alpha, beta    float64
	bias           string // "", "row" ([0,1]), "col" ([1,0]), "full"
	act            rt.Activation
	padY           int // extra elements between Y batches
}

func runMatMul(t *testing.T, e *env, dt rt.DType, c mmCase, rng *rand.Rand) {
	M, N, K := c.m, c.n, c.k
	sa, sb, sy := M*K, K*N, M*N+c.padY
	if c.bcastA {
		sa = 0
	}
	if c.bcastB {
		sb = 0
	}
	na, nb, ny := (c.batch-1)*sa+M*K, (c.batch-1)*sb+K*N, (c.batch-1)*sy+M*N
	av := stored(dt, randVals(rng, na, -1, 1))
	bv := stored(dt, randVals(rng, nb, -1, 1))
	ar, br := e.region(dt, na, av), e.region(dt, nb, bv)
	yr := e.region(dt, ny, make([]float64, ny))
	op := &rt.MatMul{A: ar.ref(na), B: br.ref(nb), Y: yr.ref(ny), Batch: c.batch, M: M, N: N, K: K,
		TransA: c.ta, TransB: c.tb, StrideA: sa, StrideB: sb, StrideY: sy, Alpha: c.alpha, Beta: c.beta, Act: c.act}
	var biasv []float64
	var bst []int
	if c.bias != "" {
		bn := map[string]int{"row": N, "col": M, "full": M * N}[c.bias]
		bst = map[string][]int{"row": {0, 1}, "col": {1, 0}, "full": {N, 1}}[c.bias]
		biasv = stored(dt, randVals(rng, bn, -1, 1))
		op.Bias = e.region(dt, bn, biasv).view(0, []int{M, N}, bst)
	}
	e.run(op)
	got := e.values(yr)
	want := make([]float64, ny)
	scale := make([]float64, ny)
	for b := 0; b < c.batch; b++ {
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				s, sc := 0.0, 0.0
				for p := 0; p < K; p++ {
					var x, y float64
					if c.ta {
						x = av[b*sa+p*M+i]
					} else {
						x = av[b*sa+i*K+p]
					}
					if c.tb {
						y = bv[b*sb+j*K+p]
					} else {
						y = bv[b*sb+p*N+j]
					}
					s += x * y
					sc += math.Abs(x * y)
				}
				v := c.alpha * s
				sc *= math.Abs(c.alpha)
				if biasv != nil {
					bb := c.beta * biasv[i*bst[0]+j*bst[1]]
					v += bb
					sc += math.Abs(bb)
				}
				want[b*sy+i*N+j] = c.act.Fn.Apply(v, c.act.Alpha, c.act.Beta)
				scale[b*sy+i*N+j] = math.Max(sc, 1e-3)
			}
		}
	}
	tol := map[rt.DType]float64{rt.F32: 1e-4, rt.F64: 1e-12, rt.F16: 2e-3}[dt]
	checkVals(t, fmt.Sprintf("%s %+v", dt, c), got, stored(dt, want), tol, func(i int) float64 { return scale[i] })
}

func TestMatMul(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(21, 22))
	sizes := [][3]int{{1, 1, 1}, {3, 17, 5}, {17, 3, 63}, {63, 65, 129}, {65, 63, 17}, {129, 257, 65},
		{1, 257, 65}, {257, 1, 63}, {7, 13, 0}, {97, 129, 300}, {5, 3100, 20}, {257, 257, 257}}
	acts := []rt.Activation{{}, {Fn: rt.Relu}, {Fn: rt.Sigmoid}, {Fn: rt.Tanh}, {Fn: rt.Gelu}, {Fn: rt.LeakyRelu, Alpha: 0.1}}
	biases := []string{"", "row", "col", "full"}
	k := 0
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for si, s := range sizes {
			if dt == rt.F16 && si%2 == 1 {
				continue
			}
			for tr := 0; tr < 4; tr++ {
				k++
				c := mmCase{batch: 1, m: s[0], n: s[1], k: s[2], ta: tr&1 != 0, tb: tr&2 != 0, alpha: 1}
				if k%3 == 0 {
					c.alpha, c.beta = 1.5, 0.5
				}
				c.bias = biases[k%4]
				if c.bias != "" && c.beta == 0 {
					c.beta = 1
				}
				c.act = acts[k%len(acts)]
				if s[0]*s[1]*s[2] < 300000 && k%2 == 0 {
					c.batch = 3
					c.bcastA = k%4 == 0
					c.bcastB = k%4 == 2
					c.padY = 5
				}
				runMatMul(t, e, dt, c, rng)
			}
		}
	}
}

func TestMatMulManyBatches(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(23, 24))
	runMatMul(t, e, rt.F32, mmCase{batch: 12, m: 9, n: 33, k: 17, tb: true, alpha: 0.5, bias: "row", beta: 2}, rng)
	runMatMul(t, e, rt.F64, mmCase{batch: 8, m: 31, n: 7, k: 40, ta: true, alpha: 1, bcastB: true}, rng)
}

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
}

func TestConv(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(25, 26))
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for ci, c := range convCases {
			oh, ow := c.out()
			cg, kg := c.c/c.g, c.k/c.g
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
			want, scale := make([]float64, ny), make([]float64, ny)
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
							want[q] = c.act.Fn.Apply(s, c.act.Alpha, c.act.Beta)
							scale[q] = math.Max(sc, 1e-3)
						}
					}
				}
			}
			tol := map[rt.DType]float64{rt.F32: 1e-4, rt.F64: 1e-12, rt.F16: 2e-3}[dt]
			checkVals(t, fmt.Sprintf("conv %s #%d", dt, ci), e.values(yr), stored(dt, want), tol, func(i int) float64 { return scale[i] })
			if dt == rt.F32 && ci < 4 {
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

func TestPool(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(27, 28))
	type pc struct {
		h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw int
		ceil                                         bool
	}
	cases := []pc{
		{h: 7, w: 9, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1},
		{h: 8, w: 8, kh: 3, kw: 3, sh: 2, sw: 2, pt: 0, pl: 0, pb: 0, pr: 0, dh: 1, dw: 1, ceil: true},
		{h: 6, w: 7, kh: 2, kw: 3, sh: 2, sw: 2, pt: 1, pl: 0, pb: 0, pr: 1, dh: 1, dw: 1, ceil: true},
		{h: 9, w: 9, kh: 2, kw: 2, sh: 1, sw: 3, pt: 0, pl: 2, pb: 1, pr: 2, dh: 2, dw: 2},
		{h: 1, w: 1, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1},
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for ci, c := range cases {
			NC := 3
			div := func(n, p0, p1, k, s, d int) int {
				num := n + p0 + p1 - d*(k-1) - 1
				if c.ceil {
					return (num+s-1)/s + 1
				}
				return num/s + 1
			}
			OH, OW := div(c.h, c.pt, c.pb, c.kh, c.sh, c.dh), div(c.w, c.pl, c.pr, c.kw, c.sw, c.dw)
			xv := stored(dt, randVals(rng, NC*c.h*c.w, -3, 3))
			for _, fn := range []rt.PoolFn{rt.MaxPool, rt.AvgPool, rt.LpPool} {
				for _, cip := range []bool{false, true} {
					for _, P := range []int{1, 2, 3} {
						if (fn != rt.LpPool && P > 1) || (fn != rt.AvgPool && cip) {
							continue
						}
						xr, yr := e.region(dt, NC*c.h*c.w, xv), e.region(dt, NC*OH*OW, nil)
						e.run(&rt.Pool{Fn: fn, X: xr.ref(NC * c.h * c.w), Y: yr.ref(NC * OH * OW), NC: NC, H: c.h, W: c.w, OH: OH, OW: OW,
							KH: c.kh, KW: c.kw, StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, PadB: c.pb, PadR: c.pr,
							DilH: c.dh, DilW: c.dw, CountIncludePad: cip, P: P})
						want := make([]float64, NC*OH*OW)
						for ch := 0; ch < NC; ch++ {
							for oh := 0; oh < OH; oh++ {
								for ow := 0; ow < OW; ow++ {
									m, s, cnt, padcnt := math.Inf(-1), 0.0, 0, 0
									for i := 0; i < c.kh; i++ {
										for j := 0; j < c.kw; j++ {
											ih, iw := oh*c.sh-c.pt+i*c.dh, ow*c.sw-c.pl+j*c.dw
											if ih >= -c.pt && ih < c.h+c.pb && iw >= -c.pl && iw < c.w+c.pr {
												padcnt++
											}
											if ih < 0 || ih >= c.h || iw < 0 || iw >= c.w {
												continue
											}
											v := xv[(ch*c.h+ih)*c.w+iw]
											m = math.Max(m, v)
											cnt++
											if fn == rt.LpPool {
												s += math.Pow(math.Abs(v), float64(P))
											} else {
												s += v
											}
										}
									}
									var r float64
									switch fn {
									case rt.MaxPool:
										r = m
									case rt.AvgPool:
										if cip {
											cnt = padcnt
										}
										r = s / float64(cnt)
									case rt.LpPool:
										r = math.Pow(s, 1/float64(P))
									}
									want[(ch*OH+oh)*OW+ow] = r
								}
							}
						}
						checkVals(t, fmt.Sprintf("pool %s #%d %s cip=%v P=%d", dt, ci, fn, cip, P), e.values(yr), stored(dt, want), tolFor(dt), func(int) float64 { return 1e-2 })
					}
				}
			}
		}
	}
}

// TestMatMulPortable runs GEMM cases through the pure-Go micro-kernel.
func TestMatMulPortable(t *testing.T) {
	if !useAsm {
		t.Skip("already portable")
	}
	useAsm = false
	defer func() { useAsm = true }()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, s := range [][3]int{{3, 17, 5}, {63, 65, 129}, {97, 129, 300}} {
			runMatMul(t, e, dt, mmCase{batch: 2, m: s[0], n: s[1], k: s[2], ta: s[0] == 63, tb: s[1] == 17, alpha: 1.25, bias: "row", beta: 1, act: rt.Activation{Fn: rt.Relu}}, rng)
		}
	}
}

// TestMatMulKernels forces each micro-kernel level this CPU has (AVX-512,
// AVX2, pure Go) and checks odd shapes, transposes, K and M beyond one
// block, bias and activation against the float64 reference.
func TestMatMulKernels(t *testing.T) {
	defer func(l int) { maxKernelLevel = l }(maxKernelLevel)
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(33, 34))
	sizes := [][3]int{{1, 1, 1}, {2, 3, 1}, {12, 32, 4}, {13, 33, 7}, {11, 31, 5}, {24, 64, 257},
		{25, 17, 600}, {97, 129, 300}, {200, 70, 513}, {3, 100, 9}, {100, 3, 9}, {37, 3100, 11},
		{100, 700, 900}, {150, 300, 40}}
	for lv := hwKernelLevel(); lv >= levelGo; lv-- {
		maxKernelLevel = lv
		t.Run(fmt.Sprintf("level%d", lv), func(t *testing.T) {
			if kernelLevel() != lv {
				t.Fatalf("kernelLevel() = %d, want %d", kernelLevel(), lv)
			}
			for _, dt := range []rt.DType{rt.F32, rt.F64} {
				for si, s := range sizes {
					c := mmCase{batch: 1, m: s[0], n: s[1], k: s[2], ta: si%2 == 1, tb: si%3 == 1, alpha: 1}
					if si%4 == 2 {
						c.alpha, c.beta, c.bias = 0.75, 1.5, "full"
						c.act = rt.Activation{Fn: rt.Tanh}
					}
					if si%5 == 3 {
						c.batch, c.padY = 2, 3
					}
					runMatMul(t, e, dt, c, rng)
				}
			}
		})
	}
}
