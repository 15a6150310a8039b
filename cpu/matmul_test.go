package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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

// TestMatMulSmall covers the no-pack kernels of every row count (1 to 12
// on AVX-512, 1 to 6 on AVX2) with full and edge column panels, K across
// a block boundary, B transposed or not, bias per column, the GEMV and
// dot-product shapes (M or N of 1), f32 and f64, and the batched shapes
// that fold into one GEMM, at each kernel level.
func TestMatMulSmall(t *testing.T) {
	defer func(l int) { maxKernelLevel = l }(maxKernelLevel)
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(35, 36))
	for lv := hwKernelLevel(); lv >= levelGo; lv-- {
		maxKernelLevel = lv
		t.Run(fmt.Sprintf("level%d", lv), func(t *testing.T) {
			for _, dt := range []rt.DType{rt.F32, rt.F64} {
				for m := 1; m <= 13; m++ {
					for _, n := range []int{1, 2, 8, 16, 17, 31, 32, 33, 64} {
						for _, k := range []int{1, 5, 390} {
							c := mmCase{batch: 1, m: m, n: n, k: k, tb: (m+n)%2 == 1, alpha: 1}
							if m%3 == 0 {
								c.bias, c.beta = "row", 1
								c.act = rt.Activation{Fn: rt.Sigmoid}
							}
							runMatMul(t, e, dt, c, rng)
						}
					}
				}
			}
			// x·B with B not transposed, large enough to split between
			// the workers (the row-streaming GEMV kernels): odd widths,
			// K not a multiple of their eight rows, alpha, a bias.
			for _, dt := range []rt.DType{rt.F32, rt.F64} {
				for _, c := range []mmCase{
					{batch: 1, m: 1, n: 1001, k: 700, alpha: 0.5},
					{batch: 1, m: 1, n: 4099, k: 301, alpha: 1, bias: "row", beta: 1},
					{batch: 1, m: 1, n: 130, k: 9, alpha: 1},
				} {
					runMatMul(t, e, dt, c, rng)
				}
			}
			// Batches sharing B (one folded GEMM), with and without a
			// per-column bias.
			for _, c := range []mmCase{
				{batch: 16, m: 2, n: 192, k: 64, alpha: 1, bcastB: true},
				{batch: 3, m: 5, n: 40, k: 7, tb: true, alpha: 1, bcastB: true, bias: "row", beta: 1},
			} {
				runMatMul(t, e, rt.F32, c, rng)
			}
		})
	}
}

// TestGEMVKernels checks the matrix-vector kernels directly at each
// kernel level: the row-streaming x·A kernels (gemvAxpy, eight rows a
// pass, then one) and the dot-product A·x kernels (gemvDot, four rows a
// pass), over widths that leave every tail (vector steps, single vectors,
// single elements), K not a multiple of eight, a leading dimension wider
// than the row and a column range that starts inside the row, in f32 and
// f64 against float64 references.
func TestGEMVKernels(t *testing.T) {
	defer func(l int) { maxKernelLevel = l }(maxKernelLevel)
	for lv := hwKernelLevel(); lv >= levelGo; lv-- {
		maxKernelLevel = lv
		t.Run(fmt.Sprintf("level%d", lv), func(t *testing.T) {
			testGEMVKernels[float32](t, 1e-5)
			testGEMVKernels[float64](t, 1e-13)
		})
	}
}

func testGEMVKernels[T floatT](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, k := range []int{1, 3, 8, 9, 17, 64, 131} {
		for _, n := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 257} {
			j0 := n % 5
			ld := j0 + n + 3
			x := make([]T, k)
			mat := make([]T, k*ld)
			for i := range x {
				x[i] = T(rng.Float64()*2 - 1)
			}
			for i := range mat {
				mat[i] = T(rng.Float64()*2 - 1)
			}
			const alpha = 0.75
			acc := make([]T, j0+n+2)
			for i := range acc {
				acc[i] = 99
			}
			gemvAxpy(x, mat, ld, acc, T(alpha), j0, j0+n)
			for j := range acc {
				if j < j0 || j >= j0+n {
					if acc[j] != 99 {
						t.Fatalf("%T k=%d n=%d: gemvAxpy wrote acc[%d] outside [%d, %d)", acc[0], k, n, j, j0, j0+n)
					}
					continue
				}
				s, sc := 0.0, 0.0
				for p := 0; p < k; p++ {
					v := float64(x[p]) * float64(mat[p*ld+j])
					s += v
					sc += math.Abs(v)
				}
				if d := math.Abs(float64(acc[j]) - alpha*s); d > tol*math.Max(sc, 1) {
					t.Fatalf("%T k=%d n=%d: gemvAxpy acc[%d] = %v, want %v", acc[0], k, n, j, acc[j], alpha*s)
				}
			}
			// A·x: n rows of k values at stride ldr, outputs at stride 2.
			ldr := k + n%3
			a := make([]T, n*ldr)
			for i := range a {
				a[i] = T(rng.Float64()*2 - 1)
			}
			c := make([]T, 2*n+1)
			gemvDot(x, a, ldr, c, 2, T(alpha), 0, n)
			for r := 0; r < n; r++ {
				s, sc := 0.0, 0.0
				for p := 0; p < k; p++ {
					v := float64(x[p]) * float64(a[r*ldr+p])
					s += v
					sc += math.Abs(v)
				}
				if d := math.Abs(float64(c[2*r]) - alpha*s); d > tol*math.Max(sc, 1) {
					t.Fatalf("%T k=%d n=%d: gemvDot c[%d] = %v, want %v", c[0], k, n, 2*r, c[2*r], alpha*s)
				}
			}
		}
	}
}

// TestGEMMDrivers runs each GEMM driver directly (the packed serial and
// parallel ones, the small-M one and the no-pack ones, serial and
// parallel) at each kernel level, on shapes with edge tiles in M and N,
// several K blocks of uneven sizes, A and B transposed or not, alpha, a
// bias and an activation, with 1 to 3 workers, in f32 and f64 against a
// float64 reference.
func TestGEMMDrivers(t *testing.T) {
	defer func(l int) { maxKernelLevel = l }(maxKernelLevel)
	for lv := hwKernelLevel(); lv >= levelGo; lv-- {
		maxKernelLevel = lv
		t.Run(fmt.Sprintf("level%d", lv), func(t *testing.T) {
			testGEMMDrivers[float32](t, 2e-5)
			testGEMMDrivers[float64](t, 1e-12)
		})
	}
}

func testGEMMDrivers[T floatT](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(43, 44))
	shapes := [][3]int{{1, 5, 3}, {7, 33, 9}, {13, 70, 600}, {61, 47, 300}, {100, 130, 777}, {203, 97, 513}, {150, 800, 65}}
	drivers := []string{"serial", "packed", "smallM", "np", "npParallel"}
	for si, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		ta, tb := si%2 == 1, si%3 != 0
		lda, ldb := k, n
		if ta {
			lda = m
		}
		if tb {
			ldb = k
		}
		a := make([]T, m*k)
		b := make([]T, k*n)
		bias := make([]T, n)
		for i := range a {
			a[i] = T(rng.Float64()*2 - 1)
		}
		for i := range b {
			b[i] = T(rng.Float64()*2 - 1)
		}
		for i := range bias {
			bias[i] = T(rng.Float64()*2 - 1)
		}
		alpha, beta := 1.0, 0.5
		if si%2 == 0 {
			alpha = 0.75
		}
		act := rt.Activation{Fn: rt.Relu}
		want := make([]float64, m*n)
		scale := make([]float64, m*n)
		for i := range m {
			for j := range n {
				sum, sc := 0.0, 0.0
				for p := range k {
					x, y := float64(a[i*lda+p]), 0.0
					if ta {
						x = float64(a[p*lda+i])
					}
					if tb {
						y = float64(b[j*ldb+p])
					} else {
						y = float64(b[p*ldb+j])
					}
					sum += x * y
					sc += math.Abs(x * y)
				}
				v := alpha*sum + beta*float64(bias[j])
				want[i*n+j] = max(v, 0)
				scale[i*n+j] = math.Max(math.Abs(alpha)*sc+math.Abs(beta*float64(bias[j])), 1)
			}
		}
		for _, drv := range drivers {
			for threads := 1; threads <= 3; threads++ {
				if (drv == "serial" || drv == "np") && threads > 1 {
					continue
				}
				c := make([]T, m*n)
				for i := range c {
					c[i] = T(math.NaN())
				}
				g := &gemm[T]{m: m, n: n, k: k, a: a, lda: lda, ta: ta, b: b, ldb: ldb, tb: tb, c: c, ldc: n,
					alpha: T(alpha), bias: bias, bcs: 1, beta: T(beta), act: act, threads: threads}
				ki := kernelFor[T]()
				switch drv {
				case "serial":
					g.runSerial(ki)
				case "packed":
					g.runPacked(ki)
				case "smallM":
					g.runSmallM(ki)
				case "np":
					if !npGEMM(g) {
						continue
					}
				case "npParallel":
					if !npParallel(g) {
						continue
					}
				}
				for i, v := range c {
					if d := math.Abs(float64(v) - want[i]); !(d <= tol*scale[i]) {
						t.Fatalf("%T %v ta=%v tb=%v %s threads=%d: C[%d,%d] = %v, want %v", v, s, ta, tb, drv, threads, i/n, i%n, v, want[i])
					}
				}
			}
		}
	}
}

// TestGEMVDotSplit checks a long dot product (M = N = 1), which the
// parallel GEMV path splits over K in fixed chunks: against a float64
// reference at each kernel level, in f32 and f64, for K that ends inside
// a chunk and K of whole chunks, and with the same bits for 2 and 3
// workers.
func TestGEMVDotSplit(t *testing.T) {
	defer func(l int) { maxKernelLevel = l }(maxKernelLevel)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for lv := hwKernelLevel(); lv >= levelGo; lv-- {
		maxKernelLevel = lv
		t.Run(fmt.Sprintf("level%d", lv), func(t *testing.T) {
			testGEMVDotSplit[float32](t, 1e-6)
			testGEMVDotSplit[float64](t, 1e-14)
		})
	}
}

func testGEMVDotSplit[T floatT](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, k := range []int{4*longRowChunk + 17, 5 * longRowChunk} {
		for _, ta := range []bool{false, true} { // x·A (A k×1) or A·x (A 1×k)
			a := make([]T, k)
			b := make([]T, k)
			sum, sc := 0.0, 0.0
			for i := range k {
				a[i] = T(rng.Float64()*2 - 1)
				b[i] = T(rng.Float64()*2 - 1)
				sum += float64(a[i]) * float64(b[i])
				sc += math.Abs(float64(a[i]) * float64(b[i]))
			}
			const alpha = 0.75
			var first T
			for threads := 1; threads <= 3; threads++ {
				runtime.GOMAXPROCS(threads)
				if !(&gemm[T]{m: 1, n: 1, k: k, threads: threads}).gemvSerial() != (threads > 1) {
					t.Fatalf("%T k=%d threads=%d: the GEMV path's split does not follow the thread count", a[0], k, threads)
				}
				c := []T{T(math.NaN())}
				g := &gemm[T]{m: 1, n: 1, k: k, a: a, lda: k, b: b, ldb: 1, tb: ta, c: c, ldc: 1, alpha: alpha, threads: threads}
				if ta {
					g.lda, g.ldb = 1, 1
				}
				g.run()
				if d := math.Abs(float64(c[0]) - alpha*sum); !(d <= tol*sc) {
					t.Fatalf("%T k=%d ta=%v threads=%d: %v, want %v", a[0], k, ta, threads, c[0], alpha*sum)
				}
				switch threads {
				case 2:
					first = c[0]
				case 3:
					if c[0] != first {
						t.Fatalf("%T k=%d ta=%v: %v with 3 workers, %v with 2", a[0], k, ta, c[0], first)
					}
				}
			}
		}
	}
}
