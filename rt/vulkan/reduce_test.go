//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

func reduceRef(f rt.ReduceFn, xs []float64, selectLast bool) float64 {
	switch f {
	case rt.Sum, rt.Mean:
		s := 0.0
		for _, x := range xs {
			s += x
		}
		if f == rt.Mean {
			s /= float64(len(xs))
		}
		return s
	case rt.RMax, rt.RMin:
		m := xs[0]
		for _, x := range xs {
			if (f == rt.RMax && x > m) || (f == rt.RMin && x < m) {
				m = x
			}
		}
		return m
	case rt.Prod:
		p := 1.0
		for _, x := range xs {
			p *= x
		}
		return p
	case rt.SumSquare, rt.L2:
		s := 0.0
		for _, x := range xs {
			s += x * x
		}
		if f == rt.L2 {
			s = math.Sqrt(s)
		}
		return s
	case rt.L1:
		s := 0.0
		for _, x := range xs {
			s += math.Abs(x)
		}
		return s
	case rt.LogSumExp:
		m := math.Inf(-1)
		for _, x := range xs {
			m = math.Max(m, x)
		}
		s := 0.0
		for _, x := range xs {
			s += math.Exp(x - m)
		}
		return m + math.Log(s)
	case rt.ArgMax, rt.ArgMin:
		bi := 0
		for i, x := range xs {
			b := xs[bi]
			if (f == rt.ArgMax && x > b) || (f == rt.ArgMin && x < b) || (selectLast && x == b) {
				bi = i
			}
		}
		return float64(bi)
	}
	return math.NaN()
}

func TestReduce(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(5))
	shapes := [][3]int{{3, 65, 1}, {2, 7, 33}, {1, 1000, 1}, {2, 4999, 1}, {1, 2100, 3}, {5, 1, 7}, {1, 127, 1100}}
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64} {
		for f := rt.ReduceFn(0); int(f) < rt.NumReduceFns; f++ {
			for _, sh := range shapes {
				for _, last := range []bool{false, true} {
					if last && f != rt.ArgMax && f != rt.ArgMin {
						continue
					}
					outer, n, inner := sh[0], sh[1], sh[2]
					lo, hi := -2.0, 2.0
					if f == rt.Prod {
						lo, hi = 0.9, 1.1
						if dt.IsInt() {
							lo, hi = 1, 1
						}
					}
					xs := randVals(r, dt, outer*n*inner, lo, hi)
					if last { // plant ties
						for i := range xs {
							xs[i] = math.Round(xs[i])
						}
					}
					yd := dt
					if f == rt.ArgMax || f == rt.ArgMin {
						yd = rt.I64
					}
					xb := newBuf(t, d, dt, len(xs), xs)
					yb := newBuf(t, d, yd, outer*inner, nil)
					op := &rt.Reduce{Fn: f, X: xb.ref([]int{len(xs)}, nil), Y: yb.ref([]int{outer * inner}, nil), Outer: outer, N: n, Inner: inner, SelectLast: last}
					if err := d.Supports(op); err != nil {
						if isFloat(dt) {
							t.Errorf("%s %s: %v", dt, f, err)
						}
						continue
					}
					backendtest.Run(t, d, op)
					got := yb.read(t, d)
					want := make([]float64, outer*inner)
					col := make([]float64, n)
					for o := 0; o < outer; o++ {
						for i := 0; i < inner; i++ {
							for k := 0; k < n; k++ {
								col[k] = xs[(o*n+k)*inner+i]
							}
							want[o*inner+i] = representable(yd, reduceRef(f, col, last))
						}
					}
					tol := tolFor(dt)
					if dt == rt.F32 {
						tol = 2e-5
					}
					if dt == rt.F16 {
						tol = 4e-3
					}
					compare(t, fmt.Sprintf("%s %s %v last=%v", dt, f, sh, last), got, want, tol)
				}
			}
		}
	}
}

// TestSoftmax covers rows held in registers (inner 1, up to 8192
// elements: 65, 200, 1000, 8192; the short ones one per subgroup where
// the device has subgroup arithmetic) and the others (8193, strided rows), and the
// register-free path for all shapes (noRowCache), each with subgroup and
// shared-memory reductions (noSubgroupRows).
func TestSoftmax(t *testing.T) {
	defer func() { noRowCache, noSubgroupRows = false, false }()
	for _, mode := range rowModes {
		noRowCache, noSubgroupRows = mode[0], mode[1]
		testSoftmax(t)
	}
}

// rowModes are the softmax.comp and normalize.comp paths TestSoftmax and
// TestNormalize run: {noRowCache, noSubgroupRows}.
var rowModes = [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}}

func testSoftmax(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(6))
	for _, dt := range floatDTypes {
		for _, sh := range [][3]int{{3, 65, 1}, {37, 200, 1}, {2, 7, 33}, {1, 1000, 1}, {4, 33, 400}, {2, 8192, 1}, {2, 8193, 1}} {
			for _, lg := range []bool{false, true} {
				outer, n, inner := sh[0], sh[1], sh[2]
				xs := randVals(r, dt, outer*n*inner, -4, 4)
				xb := newBuf(t, d, dt, len(xs), xs)
				yb := newBuf(t, d, dt, len(xs), nil)
				op := &rt.Softmax{X: xb.ref([]int{len(xs)}, nil), Y: yb.ref([]int{len(xs)}, nil), Outer: outer, N: n, Inner: inner, Log: lg}
				if !supported(t, d, op) {
					continue
				}
				backendtest.Run(t, d, op)
				got := yb.read(t, d)
				want := make([]float64, len(xs))
				for o := 0; o < outer; o++ {
					for i := 0; i < inner; i++ {
						m := math.Inf(-1)
						for k := 0; k < n; k++ {
							m = math.Max(m, xs[(o*n+k)*inner+i])
						}
						s := 0.0
						for k := 0; k < n; k++ {
							s += math.Exp(xs[(o*n+k)*inner+i] - m)
						}
						for k := 0; k < n; k++ {
							x := xs[(o*n+k)*inner+i]
							if lg {
								want[(o*n+k)*inner+i] = x - m - math.Log(s)
							} else {
								want[(o*n+k)*inner+i] = math.Exp(x-m) / s
							}
						}
					}
				}
				compare(t, fmt.Sprintf("softmax %s %v log=%v", dt, sh, lg), got, want, tolFor(dt))
			}
		}
	}
}

// TestNormalize covers rows held in registers (up to 8192 elements; up
// to 2048, and rowCache subgroup widths, one per subgroup) and
// longer ones (8193), and the register-free path for all (noRowCache),
// each with subgroup and shared-memory reductions (noSubgroupRows).
func TestNormalize(t *testing.T) {
	defer func() { noRowCache, noSubgroupRows = false, false }()
	for _, mode := range rowModes {
		noRowCache, noSubgroupRows = mode[0], mode[1]
		testNormalize(t)
	}
}

func testNormalize(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(7))
	for _, dt := range floatDTypes {
		for _, sh := range [][2]int{{3, 65}, {7, 1}, {37, 200}, {1, 1000}, {33, 127}, {2, 8192}, {2, 8193}} {
			for _, affine := range []bool{false, true} {
				outer, n := sh[0], sh[1]
				xs := randVals(r, dt, outer*n, -3, 3)
				sc := randVals(r, dt, n, 0.5, 2)
				bi := randVals(r, dt, n, -1, 1)
				xb := newBuf(t, d, dt, len(xs), xs)
				yb := newBuf(t, d, dt, len(xs), nil)
				op := &rt.Normalize{X: xb.ref([]int{len(xs)}, nil), Y: yb.ref([]int{len(xs)}, nil), Outer: outer, N: n, Eps: 1e-5}
				if affine {
					op.Scale = newBuf(t, d, dt, n, sc).ref([]int{n}, nil)
					op.Bias = newBuf(t, d, dt, n, bi).ref([]int{n}, nil)
				}
				if !supported(t, d, op) {
					continue
				}
				backendtest.Run(t, d, op)
				got := yb.read(t, d)
				want := make([]float64, len(xs))
				for o := 0; o < outer; o++ {
					row := xs[o*n : (o+1)*n]
					mean, v := 0.0, 0.0
					for _, x := range row {
						mean += x
					}
					mean /= float64(n)
					for _, x := range row {
						v += (x - mean) * (x - mean)
					}
					v /= float64(n)
					for k, x := range row {
						y := (x - mean) / math.Sqrt(v+1e-5)
						if affine {
							y = y*sc[k] + bi[k]
						}
						want[o*n+k] = y
					}
				}
				tol := tolFor(dt)
				if dt == rt.F32 {
					tol = 2e-5
				}
				compare(t, fmt.Sprintf("normalize %s %v affine=%v", dt, sh, affine), got, want, tol)
			}
		}
	}
}
