//go:build cgo

package clshim

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// The differential tests run ops the conformance table does not reach
// (integer dtypes, casts, every unary/binary/reduce function, pooling
// variants, ConvTranspose, Gather edge cases, strided views) on the
// OpenCL device and on the CPU backend, whose semantics are the
// reference, with identical inputs.

// env allocates the operands of one op on one device.
type env struct {
	t    *testing.T
	dev  rt.Device
	rng  *rand.Rand
	outs []guarded
	odt  []rt.DType
}

// in makes a contiguous input of n elements from the seeded generator.
func (e *env) in(dt rt.DType, n int, lo, hi float64) rt.Buffer {
	tt, _ := rt.NewTensor(dt, n)
	for i := 0; i < n; i++ {
		v := lo + e.rng.Float64()*(hi-lo)
		if !dt.IsFloat() {
			v = math.Floor(v)
		}
		tt.SetFloat64(i, v)
	}
	return backendtest.Upload(e.t, e.dev, tt.Data)
}

// out makes a guarded output of n elements.
func (e *env) out(dt rt.DType, n int) guarded {
	g := newGuarded(e.t, e.dev, dt, n)
	e.outs = append(e.outs, g)
	e.odt = append(e.odt, dt)
	return g
}

type diffCase struct {
	name string
	tol  float64 // relative tolerance for floats; 0 means exact
	// build creates the op; inputs come from e.in, outputs from e.out.
	build func(e *env) rt.Op
}

func ref(b rt.Buffer, dt rt.DType, shape []int, strides ...int) rt.Ref {
	r := rt.Ref{Buf: b, DType: dt, Shape: shape}
	if len(strides) > 0 {
		r.Strides = strides
	}
	return r
}

func runDiff(t *testing.T, dev rt.Device, cases []diffCase) {
	ref := cpu.NewDevice()
	defer ref.Close()
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var results [2][][]byte
			var dts []rt.DType
			for k, d := range []rt.Device{ref, dev} {
				e := &env{t: t, dev: d, rng: rand.New(rand.NewSource(int64(ci)))}
				op := c.build(e)
				if err := d.Supports(op); err != nil {
					if k == 1 && d.Info().FP64 == false {
						t.Skip(err)
					}
					t.Fatalf("%s: %v", d.Info().Backend, err)
				}
				backendtest.Run(t, d, op)
				for _, g := range e.outs {
					results[k] = append(results[k], g.read(t, d))
				}
				dts = e.odt
			}
			for i, dt := range dts {
				n := len(results[0][i]) / dt.Size()
				a := &rt.Tensor{DType: dt, Shape: []int{n}, Data: results[0][i]}
				b := &rt.Tensor{DType: dt, Shape: []int{n}, Data: results[1][i]}
				for j := 0; j < n; j++ {
					w, g := a.Float64(j), b.Float64(j)
					if math.IsNaN(w) && math.IsNaN(g) || w == g {
						continue
					}
					tol := c.tol
					if dt == rt.F16 {
						tol = max(tol, 2e-3)
					}
					if tol == 0 || !(math.Abs(g-w) <= tol*(math.Abs(w)+1)) {
						t.Fatalf("output %d element %d: opencl %v, cpu %v", i, j, g, w)
					}
				}
			}
		})
	}
}

func TestDiffElementwise(t *testing.T) {
	var cases []diffCase
	// Every float unary function on a transposed f32 view, in place of
	// nothing: Y is contiguous.
	for f := 0; f < rt.NumUnaryFns; f++ {
		fn := rt.UnaryFn(f)
		cases = append(cases, diffCase{"unary_" + fn.String() + "_f32", 2e-6, func(e *env) rt.Op {
			x := e.in(rt.F32, 60, -4, 4)
			y := e.out(rt.F32, 60)
			return &rt.Unary{Fn: fn, Alpha: 0.7, Beta: 1.3, X: ref(x, rt.F32, []int{5, 4, 3}, 1, 5, 20), Y: y.ref(rt.F32, 5, 4, 3)}
		}})
	}
	for _, dt := range []rt.DType{rt.F16, rt.F64} {
		for _, fn := range []rt.UnaryFn{rt.Gelu, rt.Sigmoid, rt.Round} {
			cases = append(cases, diffCase{"unary_" + fn.String() + "_" + dt.String(), 1e-12, func(e *env) rt.Op {
				x := e.in(dt, 40, -4, 4)
				y := e.out(dt, 40)
				return &rt.Unary{Fn: fn, X: ref(x, dt, []int{40}), Y: y.ref(dt, 40)}
			}})
		}
	}
	for _, dt := range []rt.DType{rt.I32, rt.I64, rt.I8} {
		for _, fn := range []rt.UnaryFn{rt.Neg, rt.Abs, rt.Relu, rt.Sign, rt.Not, rt.Square} {
			cases = append(cases, diffCase{"unary_" + fn.String() + "_" + dt.String(), 0, func(e *env) rt.Op {
				x := e.in(dt, 30, -100, 100)
				y := e.out(dt, 30)
				return &rt.Unary{Fn: fn, X: ref(x, dt, []int{30}), Y: y.ref(dt, 30)}
			}})
		}
	}
	cases = append(cases, diffCase{"unary_Not_bool", 0, func(e *env) rt.Op {
		x := e.in(rt.Bool, 30, 0, 2)
		y := e.out(rt.Bool, 30)
		return &rt.Unary{Fn: rt.Not, X: ref(x, rt.Bool, []int{30}), Y: y.ref(rt.Bool, 30)}
	}})
	// Casts.
	type pair struct{ x, y rt.DType }
	var pairs []pair
	for _, d := range []rt.DType{rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool} {
		pairs = append(pairs, pair{rt.F32, d}, pair{d, rt.F32})
	}
	pairs = append(pairs, pair{rt.I64, rt.I32}, pair{rt.I32, rt.I64}, pair{rt.Bool, rt.I64}, pair{rt.F64, rt.I64}, pair{rt.I64, rt.U8}, pair{rt.I32, rt.I8})
	for _, p := range pairs {
		cases = append(cases, diffCase{"cast_" + p.x.String() + "_" + p.y.String(), 0, func(e *env) rt.Op {
			lo, hi := -300.0, 300.0
			if p.x == rt.U8 || p.x == rt.Bool {
				lo = 0
			}
			if p.x == rt.Bool {
				hi = 2
			}
			x := e.in(p.x, 48, lo, hi)
			y := e.out(p.y, 48)
			return &rt.Unary{Fn: rt.Copy, X: ref(x, p.x, []int{6, 8}, 1, 6), Y: y.ref(p.y, 6, 8)}
		}})
	}
	// Binary: every function on f32 with broadcasting, integers, bools.
	for f := 0; f < rt.NumBinaryFns; f++ {
		fn := rt.BinaryFn(f)
		yd := rt.F32
		if fn.IsCompare() {
			yd = rt.Bool
		}
		cases = append(cases, diffCase{"binary_" + fn.String() + "_f32", 2e-6, func(e *env) rt.Op {
			a := e.in(rt.F32, 12, -3, 3)
			b := e.in(rt.F32, 5, -3, 3)
			y := e.out(yd, 60)
			return &rt.Binary{Fn: fn, A: ref(a, rt.F32, []int{3, 4, 5}, 0, 3, 0), B: ref(b, rt.F32, []int{3, 4, 5}, 0, 0, 1), Y: y.ref(yd, 3, 4, 5)}
		}})
	}
	for _, dt := range []rt.DType{rt.I32, rt.I64, rt.U8} {
		for _, fn := range []rt.BinaryFn{rt.Add, rt.Sub, rt.Mul, rt.Div, rt.Max, rt.Min, rt.Mod, rt.Fmod, rt.Less, rt.Equal, rt.And} {
			yd := dt
			if fn.IsCompare() {
				yd = rt.Bool
			}
			cases = append(cases, diffCase{"binary_" + fn.String() + "_" + dt.String(), 0, func(e *env) rt.Op {
				lo := -50.0
				if dt == rt.U8 {
					lo = 0
				}
				a := e.in(dt, 40, lo, 200)
				b := e.in(dt, 40, lo, 20)
				y := e.out(yd, 40)
				return &rt.Binary{Fn: fn, A: ref(a, dt, []int{40}), B: ref(b, dt, []int{40}), Y: y.ref(yd, 40)}
			}})
		}
	}
	for _, fn := range []rt.BinaryFn{rt.And, rt.Or, rt.Xor, rt.Max, rt.Equal} {
		yd := rt.Bool
		cases = append(cases, diffCase{"binary_" + fn.String() + "_bool", 0, func(e *env) rt.Op {
			a := e.in(rt.Bool, 20, 0, 2)
			b := e.in(rt.Bool, 20, 0, 2)
			y := e.out(yd, 20)
			return &rt.Binary{Fn: fn, A: ref(a, rt.Bool, []int{20}), B: ref(b, rt.Bool, []int{20}), Y: y.ref(yd, 20)}
		}})
	}
	cases = append(cases, diffCase{"binary_Pow_f16_inplace", 2e-3, func(e *env) rt.Op {
		a := e.in(rt.F16, 20, 0.1, 3)
		b := e.in(rt.F16, 20, -2, 2)
		return &rt.Binary{Fn: rt.Pow, A: ref(a, rt.F16, []int{20}), B: ref(b, rt.F16, []int{20}), Y: ref(b, rt.F16, []int{20})}
	}})
	for _, dt := range []rt.DType{rt.F32, rt.I64, rt.F16} {
		cases = append(cases, diffCase{"where_" + dt.String(), 0, func(e *env) rt.Op {
			c := e.in(rt.Bool, 6, 0, 2)
			a := e.in(dt, 24, -9, 9)
			b := e.in(dt, 4, -9, 9)
			y := e.out(dt, 24)
			return &rt.Where{Cond: ref(c, rt.Bool, []int{6, 4}, 1, 0), A: ref(a, dt, []int{6, 4}), B: ref(b, dt, []int{6, 4}, 0, 1), Y: y.ref(dt, 6, 4)}
		}})
	}
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool} {
		cases = append(cases, diffCase{"fill_" + dt.String(), 0, func(e *env) rt.Op {
			y := e.out(dt, 30)
			// every other element of a [5, 6] view
			return &rt.Fill{Y: rt.Ref{Buf: y.buf, Off: y.pad, DType: dt, Shape: []int{5, 3}, Strides: []int{6, 2}}, Value: -7.6}
		}})
	}
	forEachDevice(t, func(t *testing.T, dev *device) { runDiff(t, dev, cases) })
}

func TestDiffReduce(t *testing.T) {
	var cases []diffCase
	shapes := [][3]int{{3, 7, 5}, {2, 1000, 3}, {1, 5000, 1}, {4, 0, 2}}
	for f := 0; f < rt.NumReduceFns; f++ {
		fn := rt.ReduceFn(f)
		for _, s := range shapes {
			for _, last := range []bool{false, true} {
				if last && fn != rt.ArgMax && fn != rt.ArgMin {
					continue
				}
				yd := rt.F32
				if fn == rt.ArgMax || fn == rt.ArgMin {
					yd = rt.I64
				}
				cases = append(cases, diffCase{fmt.Sprintf("reduce_%s_f32_%v_last%v", fn, s, last), 2e-5, func(e *env) rt.Op {
					n := s[0] * s[1] * s[2]
					x := e.in(rt.F32, n, -2, 2)
					if fn == rt.ArgMax || fn == rt.ArgMin {
						x = e.in(rt.F32, n, -3, 3) // ties: floor below
						tt := make([]byte, 4*n)
						e.dev.Read(tt, x, 0)
						v := bytesF32(tt)
						for i := range v {
							v[i] = float32(math.Floor(float64(v[i])))
						}
						e.dev.Write(x, 0, f32bytes(v))
					}
					y := e.out(yd, max(1, s[0]*s[2]))
					return &rt.Reduce{Fn: fn, X: ref(x, rt.F32, []int{n}), Y: y.ref(yd, s[0]*s[2]), Outer: s[0], N: s[1], Inner: s[2], SelectLast: last}
				}})
			}
		}
	}
	for _, dt := range []rt.DType{rt.I32, rt.I64, rt.U8} {
		for _, fn := range []rt.ReduceFn{rt.Sum, rt.Prod, rt.RMax, rt.RMin, rt.ArgMax, rt.ArgMin} {
			if dt == rt.U8 && (fn == rt.Sum || fn == rt.Prod) {
				continue
			}
			for _, s := range shapes[:3] {
				yd := dt
				if fn == rt.ArgMax || fn == rt.ArgMin {
					yd = rt.I64
				}
				cases = append(cases, diffCase{fmt.Sprintf("reduce_%s_%s_%v", fn, dt, s), 0, func(e *env) rt.Op {
					n := s[0] * s[1] * s[2]
					lo, hi := -5.0, 5.0
					if dt == rt.U8 {
						lo, hi = 0, 255
					}
					x := e.in(dt, n, lo, hi)
					y := e.out(yd, s[0]*s[2])
					return &rt.Reduce{Fn: fn, X: ref(x, dt, []int{n}), Y: y.ref(yd, s[0]*s[2]), Outer: s[0], N: s[1], Inner: s[2]}
				}})
			}
		}
	}
	for _, dt := range []rt.DType{rt.F16, rt.F64} {
		cases = append(cases, diffCase{"reduce_Sum_" + dt.String(), 1e-9, func(e *env) rt.Op {
			x := e.in(dt, 3000, -2, 2)
			y := e.out(dt, 3)
			return &rt.Reduce{Fn: rt.Sum, X: ref(x, dt, []int{3000}), Y: y.ref(dt, 3), Outer: 3, N: 1000, Inner: 1}
		}})
		for _, lg := range []bool{false, true} {
			cases = append(cases, diffCase{fmt.Sprintf("softmax_%s_log%v", dt, lg), 1e-9, func(e *env) rt.Op {
				x := e.in(dt, 2*300*3, -5, 5)
				y := e.out(dt, 2*300*3)
				return &rt.Softmax{X: ref(x, dt, []int{1800}), Y: y.ref(dt, 1800), Outer: 2, N: 300, Inner: 3, Log: lg}
			}})
		}
		cases = append(cases, diffCase{"normalize_" + dt.String(), 1e-9, func(e *env) rt.Op {
			x := e.in(dt, 4*77, -5, 5)
			s := e.in(dt, 77, -2, 2)
			y := e.out(dt, 4*77)
			return &rt.Normalize{X: ref(x, dt, []int{308}), Scale: ref(s, dt, []int{77}), Y: y.ref(dt, 308), Outer: 4, N: 77, Eps: 1e-5}
		}})
	}
	forEachDevice(t, func(t *testing.T, dev *device) {
		runDiff(t, dev, cases)
	})
}

func TestDiffNN(t *testing.T) {
	var cases []diffCase
	type pc struct {
		fn                     rt.PoolFn
		k, s, d                int
		pt, pl, pb, pr, oh, ow int
		incl                   bool
		p                      int
	}
	H, W := 7, 8
	for i, c := range []pc{
		{rt.MaxPool, 3, 2, 1, 1, 1, 1, 1, 4, 4, false, 0},
		{rt.MaxPool, 2, 1, 2, 0, 0, 0, 0, 5, 6, false, 0},
		{rt.AvgPool, 3, 2, 1, 1, 1, 1, 1, 4, 4, false, 0},
		{rt.AvgPool, 3, 2, 1, 1, 1, 1, 1, 4, 4, true, 0},
		{rt.AvgPool, 3, 2, 1, 0, 1, 1, 0, 4, 4, true, 0}, // ceil mode, asymmetric pads
		{rt.AvgPool, 2, 2, 1, 0, 0, 0, 0, 4, 4, true, 0},
		{rt.LpPool, 3, 1, 1, 1, 1, 1, 1, 7, 8, false, 1},
		{rt.LpPool, 3, 1, 1, 1, 1, 1, 1, 7, 8, false, 2},
		{rt.LpPool, 2, 2, 1, 0, 0, 0, 0, 3, 4, false, 3},
	} {
		for _, dt := range []rt.DType{rt.F32, rt.F16} {
			cases = append(cases, diffCase{fmt.Sprintf("pool%d_%s_%s", i, c.fn, dt), 2e-6, func(e *env) rt.Op {
				x := e.in(dt, 3*H*W, -3, 3)
				y := e.out(dt, 3*c.oh*c.ow)
				return &rt.Pool{Fn: c.fn, X: ref(x, dt, []int{3 * H * W}), Y: y.ref(dt, 3*c.oh*c.ow), NC: 3, H: H, W: W, OH: c.oh, OW: c.ow,
					KH: c.k, KW: c.k, StrideH: c.s, StrideW: c.s, PadT: c.pt, PadL: c.pl, PadB: c.pb, PadR: c.pr, DilH: c.d, DilW: c.d, CountIncludePad: c.incl, P: c.p}
			}})
		}
	}
	type cc struct {
		n, c, h, w, k, kh, kw, s, p, d, g int
		bias                              bool
		act                               rt.UnaryFn
	}
	for i, c := range []cc{
		{2, 3, 9, 8, 16, 3, 3, 1, 1, 1, 1, true, rt.Relu},
		{1, 4, 9, 9, 16, 3, 3, 2, 1, 2, 2, false, rt.Copy},
		{1, 6, 6, 7, 6, 3, 3, 1, 1, 1, 6, true, rt.Silu},    // depthwise
		{2, 4, 5, 5, 8, 1, 1, 1, 0, 1, 1, true, rt.Sigmoid}, // pointwise
		{1, 8, 10, 10, 12, 3, 2, 2, 1, 1, 4, true, rt.HardSwish},
	} {
		oh := (c.h+2*c.p-c.d*(c.kh-1)-1)/c.s + 1
		ow := (c.w+2*c.p-c.d*(c.kw-1)-1)/c.s + 1
		for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
			if dt != rt.F32 && i > 1 {
				continue
			}
			cases = append(cases, diffCase{fmt.Sprintf("conv%d_%s", i, dt), 1e-5, func(e *env) rt.Op {
				x := e.in(dt, c.n*c.c*c.h*c.w, -1, 1)
				w := e.in(dt, c.k*c.c/c.g*c.kh*c.kw, -1, 1)
				var b rt.Ref
				if c.bias {
					b = ref(e.in(dt, c.k, -1, 1), dt, []int{c.k})
				}
				y := e.out(dt, c.n*c.k*oh*ow)
				return &rt.Conv{X: ref(x, dt, []int{c.n, c.c, c.h, c.w}), W: ref(w, dt, []int{c.k, c.c / c.g, c.kh, c.kw}), Bias: b,
					Y: y.ref(dt, c.n, c.k, oh, ow), N: c.n, C: c.c, H: c.h, Width: c.w, K: c.k, OH: oh, OW: ow, KH: c.kh, KW: c.kw,
					StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, DilH: c.d, DilW: c.d, Groups: c.g, Act: rt.Activation{Fn: c.act}}
			}})
		}
		// ConvTranspose of the same geometry (X has K channels).
		cases = append(cases, diffCase{fmt.Sprintf("convt%d_f32", i), 1e-5, func(e *env) rt.Op {
			oph := c.h
			x := e.in(rt.F32, c.n*c.k*oh*ow, -1, 1)
			w := e.in(rt.F32, c.k*c.c/c.g*c.kh*c.kw, -1, 1)
			var b rt.Ref
			if c.bias {
				b = ref(e.in(rt.F32, c.c, -1, 1), rt.F32, []int{c.c})
			}
			y := e.out(rt.F32, c.n*c.c*oph*c.w)
			return &rt.ConvTranspose{X: ref(x, rt.F32, []int{c.n, c.k, oh, ow}), W: ref(w, rt.F32, []int{c.k, c.c / c.g, c.kh, c.kw}), Bias: b,
				Y: y.ref(rt.F32, c.n, c.c, oph, c.w), N: c.n, C: c.k, H: oh, Width: ow, K: c.c, OH: oph, OW: c.w, KH: c.kh, KW: c.kw,
				StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, DilH: c.d, DilW: c.d, Groups: c.g}
		}})
	}
	for _, dt := range []rt.DType{rt.F32, rt.U8, rt.F64, rt.I64} {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			cases = append(cases, diffCase{"gather_" + dt.String() + "_" + it.String(), 0, func(e *env) rt.Op {
				x := e.in(dt, 3*5*4, 0, 100)
				idx := e.in(it, 6, -7, 7) // negative and out of range
				y := e.out(dt, 3*6*4)
				return &rt.Gather{X: ref(x, dt, []int{60}), Idx: ref(idx, it, []int{6}), Y: y.ref(dt, 72), Outer: 3, Axis: 5, Inner: 4,
					AllowOutOfRange: true} // zeros; TestIndexOutOfRange checks the error
			}})
		}
	}
	cases = append(cases, diffCase{"matmul_f16_bias_act", 2e-3, func(e *env) rt.Op {
		a := e.in(rt.F16, 2*9*13, -1, 1)
		b := e.in(rt.F16, 2*13*11, -1, 1)
		c := e.in(rt.F16, 9, -1, 1)
		y := e.out(rt.F16, 2*9*11)
		return &rt.MatMul{A: ref(a, rt.F16, []int{234}), B: ref(b, rt.F16, []int{286}), Bias: ref(c, rt.F16, []int{9, 11}, 1, 0), Y: y.ref(rt.F16, 198),
			Batch: 2, M: 9, N: 11, K: 13, TransA: true, StrideA: 117, StrideB: 143, StrideY: 99, Alpha: 1, Beta: 1, Act: rt.Activation{Fn: rt.Gelu}}
	}}, diffCase{"matmul_f64_transb", 1e-12, func(e *env) rt.Op {
		a := e.in(rt.F64, 17*70, -1, 1)
		b := e.in(rt.F64, 70*19, -1, 1)
		y := e.out(rt.F64, 17*19)
		return &rt.MatMul{A: ref(a, rt.F64, []int{17 * 70}), B: ref(b, rt.F64, []int{70 * 19}), Y: y.ref(rt.F64, 17*19),
			Batch: 1, M: 17, N: 19, K: 70, TransB: true, Alpha: 1.5}
	}})
	forEachDevice(t, func(t *testing.T, dev *device) { runDiff(t, dev, cases) })
}
