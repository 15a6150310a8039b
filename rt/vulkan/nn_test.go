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
	shapes := [][3]int{{3, 65, 1}, {2, 7, 33}, {1, 1000, 1}, {5, 1, 7}, {1, 127, 1100}}
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

func TestSoftmax(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(6))
	for _, dt := range floatDTypes {
		for _, sh := range [][3]int{{3, 65, 1}, {2, 7, 33}, {1, 1000, 1}, {4, 33, 400}} {
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

func TestNormalize(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(7))
	for _, dt := range floatDTypes {
		for _, sh := range [][2]int{{3, 65}, {7, 1}, {1, 1000}, {33, 127}} {
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

func TestGather(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(8))
	for _, dt := range allDTypes {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			outer, axis, inner := 3, 7, 5
			xs := randVals(r, dt, outer*axis*inner, -9, 9)
			idx := []float64{0, 6, -1, 3, -7, 2, 7, -8, 1}
			xb := newBuf(t, d, dt, len(xs), xs)
			ib := newBuf(t, d, it, len(idx), idx)
			yb := newBuf(t, d, dt, outer*len(idx)*inner, nil)
			op := &rt.Gather{X: xb.ref([]int{len(xs)}, nil), Idx: ib.ref([]int{len(idx)}, nil), Y: yb.ref([]int{outer * len(idx) * inner}, nil), Outer: outer, Axis: axis, Inner: inner}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, len(got))
			for o := 0; o < outer; o++ {
				for j, k := range idx {
					kk := int(k)
					if kk < 0 {
						kk += axis
					}
					for i := 0; i < inner; i++ {
						if kk >= 0 && kk < axis {
							want[(o*len(idx)+j)*inner+i] = xs[(o*axis+kk)*inner+i]
						}
					}
				}
			}
			compare(t, "gather "+dt.String()+" idx "+it.String(), got, want, 0)
		}
	}
}

type mmCase struct {
	b, m, n, k     int
	ta, tb, bias   bool
	act            rt.UnaryFn
	strideA, bcast bool
}

func TestMatMul(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(9))
	cases := []mmCase{
		{1, 1, 1, 1, false, false, false, 0, false, false},
		{1, 7, 33, 65, false, false, true, rt.Relu, false, false},
		{2, 65, 127, 33, true, false, false, 0, false, false},
		{3, 33, 65, 7, false, true, true, rt.Gelu, false, true},
		{1, 130, 129, 70, true, true, true, rt.Tanh, false, false},
		{1, 1, 127, 300, false, false, false, 0, false, false}, // gemv M=1
		{2, 129, 1, 257, false, true, true, 0, false, false},   // gemv N=1
		{1, 200, 150, 1, false, false, false, 0, false, false},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			sa, sb, sy := c.m*c.k, c.k*c.n, c.m*c.n
			if c.bcast {
				sb = 0
			}
			na, nb, ny := (c.b-1)*sa+c.m*c.k, (c.b-1)*sb+c.k*c.n, (c.b-1)*sy+c.m*c.n
			a := randVals(r, dt, na, -1, 1)
			bv := randVals(r, dt, nb, -1, 1)
			bias := randVals(r, dt, c.n, -1, 1)
			ab, bb, yb := newBuf(t, d, dt, na, a), newBuf(t, d, dt, nb, bv), newBuf(t, d, dt, ny, nil)
			op := &rt.MatMul{A: ab.ref([]int{na}, nil), B: bb.ref([]int{nb}, nil), Y: yb.ref([]int{ny}, nil),
				Batch: c.b, M: c.m, N: c.n, K: c.k, TransA: c.ta, TransB: c.tb, StrideA: sa, StrideB: sb, StrideY: sy,
				Alpha: 0.75, Beta: 1.5, Act: rt.Activation{Fn: c.act}}
			if c.bias {
				op.Bias = newBuf(t, d, dt, c.n, bias).ref([]int{c.m, c.n}, []int{0, 1})
			}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want := make([]float64, ny)
			tols := make([]float64, ny)
			for b := 0; b < c.b; b++ {
				for i := 0; i < c.m; i++ {
					for j := 0; j < c.n; j++ {
						s, sabs := 0.0, 0.0
						for k := 0; k < c.k; k++ {
							var x, y float64
							if c.ta {
								x = a[b*sa+k*c.m+i]
							} else {
								x = a[b*sa+i*c.k+k]
							}
							if c.tb {
								y = bv[b*sb+j*c.k+k]
							} else {
								y = bv[b*sb+k*c.n+j]
							}
							s += x * y
							sabs += math.Abs(x * y)
						}
						v := 0.75 * s
						if c.bias {
							v += 1.5 * bias[j]
							sabs += 1.5 * math.Abs(bias[j])
						}
						v = c.act.Apply(v, 0, 0)
						want[b*sy+i*c.n+j] = v
						tols[b*sy+i*c.n+j] = sabs + 1
					}
				}
			}
			tol := 1e-4
			switch dt {
			case rt.F16:
				tol = 2e-3
			case rt.F64:
				tol = 1e-12
			}
			bad := 0
			for i := range want {
				if math.Abs(got[i]-want[i]) > tol*tols[i] {
					if bad < 3 {
						t.Errorf("matmul %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
					}
					bad++
				}
			}
		}
	}
}

func convRef(x, w, bias []float64, N, C, H, W, K, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, G int) ([]float64, []float64) {
	y := make([]float64, N*K*OH*OW)
	ab := make([]float64, len(y))
	cg, kg := C/G, K/G
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			g := k / kg
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					s, sa := 0.0, 0.0
					if bias != nil {
						s, sa = bias[k], math.Abs(bias[k])
					}
					for c := 0; c < cg; c++ {
						for kh := 0; kh < KH; kh++ {
							ih := oh*sh - pt + kh*dh
							if ih < 0 || ih >= H {
								continue
							}
							for kw := 0; kw < KW; kw++ {
								iw := ow*sw - pl + kw*dw
								if iw < 0 || iw >= W {
									continue
								}
								p := x[((n*C+g*cg+c)*H+ih)*W+iw] * w[((k*cg+c)*KH+kh)*KW+kw]
								s += p
								sa += math.Abs(p)
							}
						}
					}
					i := ((n*K+k)*OH+oh)*OW + ow
					y[i], ab[i] = s, sa
				}
			}
		}
	}
	return y, ab
}

func convTol(dt rt.DType) float64 {
	switch dt {
	case rt.F16:
		return 2e-3
	case rt.F64:
		return 1e-12
	}
	return 1e-4
}

func TestConv(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(10))
	type cc struct{ N, C, H, W, K, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, G int }
	cases := []cc{
		{1, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		{2, 4, 13, 11, 6, 3, 2, 2, 1, 0, 1, 2, 0, 2, 1, 2},
		{1, 6, 9, 9, 6, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 6},  // depthwise
		{1, 5, 1, 33, 7, 1, 5, 1, 3, 0, 2, 0, 2, 1, 1, 1}, // 1-D
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			OH := (c.H+c.pt+c.pb-c.dh*(c.KH-1)-1)/c.sh + 1
			OW := (c.W+c.pl+c.pr-c.dw*(c.KW-1)-1)/c.sw + 1
			x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
			w := randVals(r, dt, c.K*(c.C/c.G)*c.KH*c.KW, -1, 1)
			bias := randVals(r, dt, c.K, -1, 1)
			yb := newBuf(t, d, dt, c.N*c.K*OH*OW, nil)
			op := &rt.Conv{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
				Bias: newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil), Y: yb.ref([]int{c.N * c.K * OH * OW}, nil),
				N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
				PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G, Act: rt.Activation{Fn: rt.LeakyRelu, Alpha: 0.1}}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			want, ab := convRef(x, w, bias, c.N, c.C, c.H, c.W, c.K, OH, OW, c.KH, c.KW, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw, c.G)
			for i := range want {
				want[i] = rt.LeakyRelu.Apply(want[i], 0.1, 0)
				if math.Abs(got[i]-want[i]) > convTol(dt)*(ab[i]+1) {
					t.Fatalf("conv %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
				}
			}
		}
	}
}

func TestConvTranspose(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(11))
	type cc struct{ N, C, H, W, K, KH, KW, sh, sw, pt, pl, dh, dw, G, oph, opw int }
	cases := []cc{
		{1, 3, 5, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{2, 4, 3, 3, 6, 2, 3, 1, 2, 0, 1, 2, 1, 2, 0, 1},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			OH := (c.H-1)*c.sh - 2*c.pt + c.dh*(c.KH-1) + c.oph + 1
			OW := (c.W-1)*c.sw - 2*c.pl + c.dw*(c.KW-1) + c.opw + 1
			x := randVals(r, dt, c.N*c.C*c.H*c.W, -1, 1)
			w := randVals(r, dt, c.C*(c.K/c.G)*c.KH*c.KW, -1, 1)
			bias := randVals(r, dt, c.K, -1, 1)
			yb := newBuf(t, d, dt, c.N*c.K*OH*OW, nil)
			op := &rt.ConvTranspose{X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), W: newBuf(t, d, dt, len(w), w).ref([]int{len(w)}, nil),
				Bias: newBuf(t, d, dt, c.K, bias).ref([]int{c.K}, nil), Y: yb.ref([]int{c.N * c.K * OH * OW}, nil),
				N: c.N, C: c.C, H: c.H, Width: c.W, K: c.K, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
				PadT: c.pt, PadL: c.pl, DilH: c.dh, DilW: c.dw, Groups: c.G}
			if !supported(t, d, op) {
				continue
			}
			backendtest.Run(t, d, op)
			got := yb.read(t, d)
			// scatter reference
			want := make([]float64, len(got))
			ab := make([]float64, len(got))
			cg, kg := c.C/c.G, c.K/c.G
			for n := 0; n < c.N; n++ {
				for k := 0; k < c.K; k++ {
					for i := 0; i < OH*OW; i++ {
						want[(n*c.K+k)*OH*OW+i] = bias[k]
						ab[(n*c.K+k)*OH*OW+i] = math.Abs(bias[k])
					}
				}
				for ci := 0; ci < c.C; ci++ {
					g := ci / cg
					for kk := 0; kk < kg; kk++ {
						k := g*kg + kk
						for ih := 0; ih < c.H; ih++ {
							for iw := 0; iw < c.W; iw++ {
								for kh := 0; kh < c.KH; kh++ {
									oh := ih*c.sh - c.pt + kh*c.dh
									if oh < 0 || oh >= OH {
										continue
									}
									for kw := 0; kw < c.KW; kw++ {
										ow := iw*c.sw - c.pl + kw*c.dw
										if ow < 0 || ow >= OW {
											continue
										}
										p := x[((n*c.C+ci)*c.H+ih)*c.W+iw] * w[((ci*kg+kk)*c.KH+kh)*c.KW+kw]
										want[((n*c.K+k)*OH+oh)*OW+ow] += p
										ab[((n*c.K+k)*OH+oh)*OW+ow] += math.Abs(p)
									}
								}
							}
						}
					}
				}
			}
			for i := range want {
				if math.Abs(got[i]-want[i]) > convTol(dt)*(ab[i]+1) {
					t.Fatalf("convT %s %+v: [%d] = %v, want %v", dt, c, i, got[i], want[i])
				}
			}
		}
	}
}

func TestPool(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(12))
	type pc struct{ NC, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, extra int }
	cases := []pc{
		{3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{2, 13, 11, 2, 3, 2, 3, 0, 1, 1, 1, 2, 1, 1}, // ceil-mode extra row/col
		{5, 1, 33, 1, 4, 1, 2, 0, 2, 0, 1, 1, 1, 0},
	}
	for _, dt := range floatDTypes {
		for _, c := range cases {
			OH := (c.H+c.pt+c.pb-c.dh*(c.KH-1)-1)/c.sh + 1 + c.extra
			OW := (c.W+c.pl+c.pr-c.dw*(c.KW-1)-1)/c.sw + 1 + c.extra
			x := randVals(r, dt, c.NC*c.H*c.W, -2, 2)
			for _, fn := range []rt.PoolFn{rt.MaxPool, rt.AvgPool, rt.LpPool} {
				for _, cip := range []bool{false, true} {
					for _, p := range []int{1, 2, 3} {
						if (fn != rt.LpPool && p != 2) || (fn != rt.AvgPool && cip) {
							continue
						}
						yb := newBuf(t, d, dt, c.NC*OH*OW, nil)
						op := &rt.Pool{Fn: fn, X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), Y: yb.ref([]int{c.NC * OH * OW}, nil),
							NC: c.NC, H: c.H, W: c.W, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
							PadT: c.pt, PadL: c.pl, PadB: c.pb, PadR: c.pr, DilH: c.dh, DilW: c.dw, CountIncludePad: cip, P: p}
						if !supported(t, d, op) {
							continue
						}
						backendtest.Run(t, d, op)
						got := yb.read(t, d)
						want := make([]float64, len(got))
						for nc := 0; nc < c.NC; nc++ {
							for oh := 0; oh < OH; oh++ {
								for ow := 0; ow < OW; ow++ {
									acc, cnt, pad := 0.0, 0, 0
									if fn == rt.MaxPool {
										acc = math.Inf(-1)
									}
									for kh := 0; kh < c.KH; kh++ {
										for kw := 0; kw < c.KW; kw++ {
											ih, iw := oh*c.sh-c.pt+kh*c.dh, ow*c.sw-c.pl+kw*c.dw
											if ih >= -c.pt && ih < c.H+c.pb && iw >= -c.pl && iw < c.W+c.pr {
												pad++
											}
											if ih < 0 || ih >= c.H || iw < 0 || iw >= c.W {
												continue
											}
											v := x[(nc*c.H+ih)*c.W+iw]
											cnt++
											switch fn {
											case rt.MaxPool:
												acc = math.Max(acc, v)
											case rt.AvgPool:
												acc += v
											default:
												acc += math.Pow(math.Abs(v), float64(p))
											}
										}
									}
									switch fn {
									case rt.AvgPool:
										if cip {
											acc /= float64(pad)
										} else {
											acc /= float64(cnt)
										}
									case rt.LpPool:
										acc = math.Pow(acc, 1/float64(p))
									}
									want[(nc*OH+oh)*OW+ow] = acc
								}
							}
						}
						tol := tolFor(dt)
						if dt == rt.F32 && fn == rt.LpPool {
							tol = 2e-5
						}
						compare(t, fmt.Sprintf("pool %s %s %+v cip=%v p=%d", dt, fn, c, cip, p), got, want, tol)
					}
				}
			}
		}
	}
}
