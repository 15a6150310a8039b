package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func reduceRef(fn rt.ReduceFn, x []float64, last bool) float64 {
	n := len(x)
	switch fn {
	case rt.Sum, rt.Mean:
		s := 0.0
		for _, v := range x {
			s += v
		}
		if fn == rt.Mean {
			s /= float64(n)
		}
		return s
	case rt.RMax:
		m := math.Inf(-1)
		for _, v := range x {
			m = math.Max(m, v)
		}
		return m
	case rt.RMin:
		m := math.Inf(1)
		for _, v := range x {
			m = math.Min(m, v)
		}
		return m
	case rt.Prod:
		p := 1.0
		for _, v := range x {
			p *= v
		}
		return p
	case rt.SumSquare, rt.L2:
		s := 0.0
		for _, v := range x {
			s += v * v
		}
		if fn == rt.L2 {
			return math.Sqrt(s)
		}
		return s
	case rt.L1:
		s := 0.0
		for _, v := range x {
			s += math.Abs(v)
		}
		return s
	case rt.LogSumExp:
		s := 0.0
		for _, v := range x {
			s += math.Exp(v)
		}
		return math.Log(s)
	case rt.ArgMax, rt.ArgMin:
		bi := 0
		for j, v := range x {
			if (fn == rt.ArgMax && (v > x[bi] || last && v == x[bi])) || (fn == rt.ArgMin && (v < x[bi] || last && v == x[bi])) {
				bi = j
			}
		}
		return float64(bi)
	}
	panic("unknown")
}

func TestReduce(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(11, 12))
	dims := [][3]int{{3, 17, 5}, {1, 1, 1}, {7, 13, 1}, {1, 50000, 1}, {2, 3, 4000}, {4, 0, 3}}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16, rt.I32, rt.I64, rt.U8, rt.I8} {
		for fn := rt.ReduceFn(0); int(fn) < rt.NumReduceFns; fn++ {
			for _, d := range dims {
				for _, last := range []bool{false, true} {
					O, N, I := d[0], d[1], d[2]
					if last && fn != rt.ArgMax && fn != rt.ArgMin {
						continue
					}
					if (fn == rt.ArgMax || fn == rt.ArgMin || fn == rt.RMax || fn == rt.RMin) && N == 0 {
						continue
					}
					lo, hi := -2.0, 2.0
					if fn == rt.Prod {
						lo, hi = 0.9, 1.1
					}
					var xv []float64
					if dt.IsFloat() {
						xv = stored(dt, randVals(rng, O*N*I, lo, hi))
						if fn == rt.ArgMax || fn == rt.ArgMin {
							for i := range xv { // ties
								xv[i] = math.Round(xv[i] * 2)
							}
						}
					} else {
						xv = make([]float64, O*N*I)
						for i := range xv {
							xv[i] = float64(rng.IntN(5))
							if dt != rt.U8 {
								xv[i] -= 2
							}
						}
					}
					ydt := dt
					if fn == rt.ArgMax || fn == rt.ArgMin {
						ydt = rt.I64
					}
					xr, yr := e.region(dt, O*N*I, xv), e.region(ydt, O*I, nil)
					op := &rt.Reduce{Fn: fn, X: xr.ref(O, N, I), Y: yr.ref(O, I), Outer: O, N: N, Inner: I, SelectLast: last}
					name := fmt.Sprintf("%s %s %v last=%v", dt, fn, d, last)
					if err := e.dev.Supports(op); err != nil {
						if dt.IsFloat() || !isErr(err, rt.ErrUnsupported) {
							t.Fatalf("%s: %v", name, err)
						}
						continue
					}
					if !dt.IsFloat() && fn == rt.Prod && N > 20 {
						continue
					}
					e.run(op)
					want := make([]float64, O*I)
					row := make([]float64, N)
					for o := 0; o < O; o++ {
						for i := 0; i < I; i++ {
							for j := 0; j < N; j++ {
								row[j] = xv[(o*N+j)*I+i]
							}
							want[o*I+i] = reduceRef(fn, row, last)
						}
					}
					tol := tolFor(dt)
					if !dt.IsFloat() {
						for i, v := range want {
							want[i] = float64(wrap(ydt, int64(v)))
						}
						tol = 0
					}
					checkVals(t, name, e.values(yr), stored(ydt, want), tol, func(int) float64 { return 1e-3 })
				}
			}
		}
	}
}

func TestSoftmaxNormalize(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(13, 14))
	dims := [][3]int{{3, 17, 5}, {1, 1, 1}, {7, 13, 1}, {2, 1000, 1}, {1, 4, 300}}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for _, d := range dims {
			O, N, I := d[0], d[1], d[2]
			n := O * N * I
			xv := stored(dt, randVals(rng, n, -30, 30))
			for _, lg := range []bool{false, true} {
				xr, yr := e.region(dt, n, xv), e.region(dt, n, nil)
				e.run(&rt.Softmax{X: xr.ref(n), Y: yr.ref(n), Outer: O, N: N, Inner: I, Log: lg})
				want := make([]float64, n)
				for o := 0; o < O; o++ {
					for i := 0; i < I; i++ {
						m := math.Inf(-1)
						for j := 0; j < N; j++ {
							m = math.Max(m, xv[(o*N+j)*I+i])
						}
						s := 0.0
						for j := 0; j < N; j++ {
							s += math.Exp(xv[(o*N+j)*I+i] - m)
						}
						for j := 0; j < N; j++ {
							p := (o*N+j)*I + i
							if lg {
								want[p] = xv[p] - m - math.Log(s)
							} else {
								want[p] = math.Exp(xv[p]-m) / s
							}
						}
					}
				}
				checkVals(t, fmt.Sprintf("softmax %s %v log=%v", dt, d, lg), e.values(yr), stored(dt, want), tolFor(dt), func(int) float64 { return 1e-6 })
			}
		}
		// Normalize
		for _, d := range [][2]int{{4, 37}, {1, 1}, {3, 1000}} {
			O, N := d[0], d[1]
			xv := stored(dt, randVals(rng, O*N, -3, 5))
			sv := stored(dt, randVals(rng, N, -2, 2))
			bv := stored(dt, randVals(rng, N, -2, 2))
			for _, affine := range []bool{false, true} {
				xr, yr := e.region(dt, O*N, xv), e.region(dt, O*N, nil)
				op := &rt.Normalize{X: xr.ref(O, N), Y: yr.ref(O, N), Outer: O, N: N, Eps: 1e-5}
				if affine {
					op.Scale, op.Bias = e.region(dt, N, sv).ref(N), e.region(dt, N, bv).ref(N)
				}
				e.run(op)
				want := make([]float64, O*N)
				for o := 0; o < O; o++ {
					r := xv[o*N : o*N+N]
					m, v := 0.0, 0.0
					for _, x := range r {
						m += x
					}
					m /= float64(N)
					for _, x := range r {
						v += (x - m) * (x - m)
					}
					v /= float64(N)
					for j, x := range r {
						z := (x - m) / math.Sqrt(v+1e-5)
						if affine {
							z = z*sv[j] + bv[j]
						}
						want[o*N+j] = z
					}
				}
				checkVals(t, fmt.Sprintf("normalize %s %v affine=%v", dt, d, affine), e.values(yr), stored(dt, want), tolFor(dt)*10, func(int) float64 { return 1e-3 })
			}
		}
	}
}

// TestReduceF32Rows checks the vectorised f32 row reductions (Sum, Mean,
// SumSquare, L2, Max over contiguous rows, chunked past reduceChunk; one
// long row in parallel chunks where there are two workers or more) at
// every kernel level against float64 sums.
func TestReduceF32Rows(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for _, n := range []int{0, 1, 17, 100, 5000, 9000, 4<<15 + 4095, 4<<15 + 1} {
				O := 3
				if n > 4<<15 {
					O = 1 // one long row: its chunks in parallel
				}
				xv := stored(rt.F32, randVals(rng, O*n, -2, 3))
				if n > 50 && O == 3 {
					xv[n+7] = math.NaN() // row 1
				}
				if n == 4<<15+1 {
					xv[rng.IntN(n)] = math.NaN()
				}
				for _, fn := range []rt.ReduceFn{rt.Sum, rt.Mean, rt.SumSquare, rt.L2, rt.RMax} {
					xr, yr := e.region(rt.F32, max(O*n, 1), xv), e.region(rt.F32, O, nil)
					e.run(&rt.Reduce{Fn: fn, X: xr.ref(O * n), Y: yr.ref(O), Outer: O, N: n, Inner: 1})
					got := e.values(yr)
					for r := 0; r < O; r++ {
						s, sq, m := 0.0, 0.0, math.Inf(-1)
						for _, v := range xv[r*n : (r+1)*n] {
							s += v
							sq += v * v
							if v > m || v != v {
								m = v
							}
						}
						want := map[rt.ReduceFn]float64{rt.Sum: s, rt.Mean: s / float64(n), rt.SumSquare: sq, rt.L2: math.Sqrt(sq), rt.RMax: m}[fn]
						if !closeTo(got[r], float64(float32(want)), 1e-5, 1e-3) {
							t.Errorf("%s n=%d %s row %d: %v, want %v", levelNames[lv], n, fn, r, got[r], want)
						}
					}
				}
			}
		})
	}
}

// TestReduceF64Rows checks the f64 contiguous row reductions (Sum, Mean,
// SumSquare, L2 in partial sums or the dot kernels; one long row in
// parallel chunks where there are two workers or more) at every kernel
// level against float64 sums in order, to a relative 1e-12, with NaN and
// Inf propagated.
func TestReduceF64Rows(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(43, 44))
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for _, n := range []int{1, 15, 16, 17, 31, 100, 1001, 50001, 4<<15 + 4095, 4<<15 + 1} {
				O := 3
				if n > 4<<15 {
					O = 1 // one long row: reduceLongRowF64's partial sums in parallel
				}
				xv := randVals(rng, O*n, -2, 3)
				if n > 50 && O == 3 {
					xv[n+7] = math.NaN()     // row 1
					xv[2*n+3] = math.Inf(-1) // row 2
				}
				if n == 4<<15+1 {
					xv[rng.IntN(n)] = math.NaN()
				}
				for _, fn := range []rt.ReduceFn{rt.Sum, rt.Mean, rt.SumSquare, rt.L2} {
					xr, yr := e.region(rt.F64, O*n, xv), e.region(rt.F64, O, nil)
					e.run(&rt.Reduce{Fn: fn, X: xr.ref(O * n), Y: yr.ref(O), Outer: O, N: n, Inner: 1})
					got := e.values(yr)
					for r := 0; r < O; r++ {
						want := reduceRef(fn, xv[r*n:(r+1)*n], false)
						if !(got[r] == want || math.IsNaN(got[r]) && math.IsNaN(want) || closeTo(got[r], want, 1e-12, 1e-12)) {
							t.Errorf("%s n=%d %s row %d: %v, want %v", levelNames[lv], n, fn, r, got[r], want)
						}
					}
				}
			}
		})
	}
}
