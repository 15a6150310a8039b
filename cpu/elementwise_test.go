package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// layout is one way of storing a view of a logical shape.
type layout struct {
	name    string
	storage int
	off     int
	strides []int
}

func layouts(shape []int) []layout {
	n := int(rt.NumElements(shape))
	cs := rt.ContiguousStrides(shape)
	out := []layout{{"contig", n, 0, nil}}
	if n == 0 {
		return out
	}
	// reversed in every dim
	neg := make([]int, len(shape))
	off := 0
	for d := range shape {
		neg[d] = -cs[d]
		off += (shape[d] - 1) * cs[d]
	}
	out = append(out, layout{"reversed", n, off, neg})
	// transposed storage: dims stored in reverse order
	rs := make([]int, len(shape))
	s := 1
	for d := range shape {
		rs[d] = s
		s *= shape[d]
	}
	out = append(out, layout{"transposed", n, 0, rs})
	// padded rows: last dim padded by 3 elements
	if len(shape) >= 2 {
		ps := make([]int, len(shape))
		s = 1
		for d := len(shape) - 1; d >= 0; d-- {
			ps[d] = s
			if d == len(shape)-1 {
				s *= shape[d] + 3
			} else {
				s *= shape[d]
			}
		}
		out = append(out, layout{"padded", s, 0, ps})
	}
	return out
}

func (l layout) stridesFor(shape []int) []int {
	if l.strides == nil {
		return rt.ContiguousStrides(shape)
	}
	return l.strides
}

var testShapes = [][]int{{7, 13}, {1}, {3, 5, 17}, {}, {2, 1, 3, 1, 2, 2, 1, 3}, {300, 257}}

func unaryRange(fn rt.UnaryFn) (float64, float64) {
	switch fn {
	case rt.Log, rt.Sqrt, rt.Rsqrt:
		return 0.1, 3
	}
	return -3, 3
}

// TestUnaryFloat runs every unary function on every float dtype, shape
// and layout against NumPy (testdata/elementwise): each input element is
// one of NumPy's 256 inputs for the function, picked at random, and the
// expected output is NumPy's output for that input.
func TestUnaryFloat(t *testing.T) {
	e := newEnv(t)
	ref := ewRefs(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for fn := rt.UnaryFn(0); int(fn) < rt.NumUnaryFns; fn++ {
			x, y := ref.get(t, dt, fn.String()+".x"), ref.get(t, dt, fn.String()+".y")
			for si, shape := range testShapes {
				if si == 5 && fn > rt.Relu && dt != rt.F32 {
					continue // the big shape only for a few fns
				}
				for _, l := range layouts(shape) {
					pick := picks(rng, l.storage, len(x), 0, len(x))
					in := make([]float64, l.storage)
					for i, k := range pick {
						in[i] = x[k]
					}
					xr := e.region(dt, l.storage, in)
					n := int(rt.NumElements(shape))
					yr := e.region(dt, n, nil)
					st := l.stridesFor(shape)
					op := &rt.Unary{Fn: fn, Alpha: ewAlpha, Beta: ewBeta, X: xr.view(l.off, shape, l.strides), Y: yr.ref(shape...)}
					e.run(op)
					want := make([]float64, 0, n)
					backendtest.ForEach(shape, func(idx []int) {
						want = append(want, y[pick[l.off+backendtest.Offset(idx, st)]])
					})
					tol := tolFor(dt)
					checkVals(t, fmt.Sprintf("%s %s %v %s", dt, fn, shape, l.name), e.values(yr), want, tol, func(int) float64 {
						if dt == rt.F16 {
							return 1e-2
						}
						return 1e-30
					})
				}
			}
		}
	}
}

func TestUnaryStridedOutput(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(3, 4))
	shape := []int{5, 9, 4}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.I32} {
		for _, l := range layouts(shape) {
			in := stored(dt, randVals(rng, 180, -50, 50))
			xr := e.region(dt, 180, in)
			yr := e.region(dt, l.storage, make([]float64, l.storage))
			e.run(&rt.Unary{Fn: rt.Neg, X: xr.ref(shape...), Y: yr.view(l.off, shape, l.strides)})
			got := e.values(yr)
			st := l.stridesFor(shape)
			k := 0
			backendtest.ForEach(shape, func(idx []int) {
				if g := at(got, l.off, st, idx); g != -in[k] {
					t.Fatalf("%s %s: [%v] = %v, want %v", dt, l.name, idx, g, -in[k])
				}
				k++
			})
		}
	}
}

func binaryRange(fn rt.BinaryFn) (float64, float64, float64, float64) {
	switch fn {
	case rt.Pow:
		return 0.1, 3, -2, 2
	case rt.And, rt.Or, rt.Xor:
		return 0, 1.99, 0, 1.99
	}
	return -5, 5, -5, 5
}

func TestBinaryFloat(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(5, 6))
	type bcase struct {
		name           string
		shape          []int
		as, bs         []int // strides (nil contiguous over shape)
		an, bn         int   // storage sizes
		aoff, boff     int
		inplace, bigOK bool
	}
	cases := []bcase{
		{name: "contig", shape: []int{7, 13}, an: 91, bn: 91},
		{name: "bcast", shape: []int{3, 4, 5}, as: []int{5, 0, 1}, an: 15, bs: []int{0, 1, 0}, bn: 4},
		{name: "scalarA", shape: []int{3, 17}, as: []int{0, 0}, an: 1, bn: 51},
		{name: "scalarB", shape: []int{3, 17}, bs: []int{0, 0}, bn: 1, an: 51},
		{name: "rowbcast", shape: []int{6, 33}, bs: []int{0, 1}, bn: 33, an: 198},
		{name: "negT", shape: []int{4, 6}, as: []int{-6, 1}, aoff: 18, an: 24, bs: []int{1, 4}, bn: 24},
		{name: "inplace", shape: []int{5, 7}, an: 35, bn: 35, inplace: true},
		{name: "big", shape: []int{3, 40000}, an: 120000, bs: []int{0, 1}, bn: 40000, bigOK: true},
	}
	ref := ewRefs(t)
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for fn := rt.BinaryFn(0); int(fn) < rt.NumBinaryFns; fn++ {
			a, b := ref.get(t, dt, fn.String()+".a"), ref.get(t, dt, fn.String()+".b")
			table := ref.get(t, dt, fn.String()+".y") // table[i*len(b)+j] = fn(a[i], b[j])
			for _, c := range cases {
				if c.bigOK && dt == rt.F16 {
					continue
				}
				// Comparisons pick from the values that a and b share
				// (a[8:24] == b[8:24]) half of the time, so that equal
				// pairs occur.
				lo, hi := 0, 0
				if fn.IsCompare() {
					lo, hi = 8, 12
				}
				pa, pb := picks(rng, c.an, len(a), lo, hi), picks(rng, c.bn, len(b), lo, hi)
				av, bv := make([]float64, c.an), make([]float64, c.bn)
				for i, k := range pa {
					av[i] = a[k]
				}
				for i, k := range pb {
					bv[i] = b[k]
				}
				ar, br := e.region(dt, c.an, av), e.region(dt, c.bn, bv)
				n := int(rt.NumElements(c.shape))
				ydt := dt
				if fn.IsCompare() {
					ydt = rt.Bool
				}
				A, B := ar.view(c.aoff, c.shape, c.as), br.view(c.boff, c.shape, c.bs)
				yr := e.region(ydt, n, nil)
				Y := yr.ref(c.shape...)
				if c.inplace && !fn.IsCompare() {
					yr = ar
					Y = A
				}
				e.run(&rt.Binary{Fn: fn, A: A, B: B, Y: Y})
				ast, bst := A.StridesOrContiguous(), B.StridesOrContiguous()
				var want []float64
				backendtest.ForEach(c.shape, func(idx []int) {
					i, j := pa[c.aoff+backendtest.Offset(idx, ast)], pb[c.boff+backendtest.Offset(idx, bst)]
					want = append(want, table[i*len(b)+j])
				})
				checkVals(t, fmt.Sprintf("%s %s %s", dt, fn, c.name), e.values(yr), want, tolFor(dt), func(int) float64 {
					if dt == rt.F16 {
						return 1e-2
					}
					return 1e-30
				})
			}
		}
	}
}

// wrap converts an int64 result to the range of an integer dtype.
func wrap(dt rt.DType, v int64) int64 {
	switch dt {
	case rt.I32:
		return int64(int32(v))
	case rt.U8, rt.Bool:
		return int64(uint8(v))
	case rt.I8:
		return int64(int8(v))
	}
	return v
}

func intRef(fn rt.BinaryFn, a, b int64) int64 {
	bo := func(c bool) int64 {
		if c {
			return 1
		}
		return 0
	}
	switch fn {
	case rt.Add:
		return a + b
	case rt.Sub:
		return a - b
	case rt.Mul:
		return a * b
	case rt.Div:
		return a / b
	case rt.Max:
		return max(a, b)
	case rt.Min:
		return min(a, b)
	case rt.Mod:
		m := a % b
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	case rt.Fmod:
		return a % b
	case rt.Equal:
		return bo(a == b)
	case rt.Less:
		return bo(a < b)
	case rt.LessEq:
		return bo(a <= b)
	case rt.Greater:
		return bo(a > b)
	case rt.GreaterEq:
		return bo(a >= b)
	case rt.And:
		return bo(a != 0 && b != 0)
	case rt.Or:
		return bo(a != 0 || b != 0)
	case rt.Xor:
		return bo((a != 0) != (b != 0))
	}
	panic("unreachable")
}

func TestBinaryInt(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(7, 8))
	shape := []int{3, 4, 5}
	as, bs := []int{5, 0, 1}, []int{0, 1, 0}
	for _, dt := range []rt.DType{rt.I32, rt.I64, rt.U8, rt.I8, rt.Bool} {
		for fn := rt.BinaryFn(0); int(fn) < rt.NumBinaryFns; fn++ {
			op := &rt.Binary{Fn: fn}
			ydt := dt
			if fn.IsCompare() {
				ydt = rt.Bool
			}
			gen := func(n int) []float64 {
				v := make([]float64, n)
				for i := range v {
					switch dt {
					case rt.Bool:
						v[i] = float64(rng.IntN(2))
					case rt.U8:
						v[i] = float64(1 + rng.IntN(200))
					default:
						v[i] = float64(rng.IntN(200) - 100)
						if v[i] == 0 {
							v[i] = 7
						}
					}
				}
				return v
			}
			av, bv := gen(15), gen(4)
			ar, br := e.region(dt, 15, av), e.region(dt, 4, bv)
			yr := e.region(ydt, 60, nil)
			op.A, op.B, op.Y = ar.view(0, shape, as), br.view(0, shape, bs), yr.ref(shape...)
			if err := e.dev.Supports(op); err != nil {
				if !isErr(err, rt.ErrUnsupported) {
					t.Fatalf("%s %s: %v", dt, fn, err)
				}
				if e.launchErr(op) == nil {
					t.Fatalf("%s %s: Launch accepted an unsupported op", dt, fn)
				}
				continue
			}
			e.run(op)
			got := e.values(yr)
			k := 0
			backendtest.ForEach(shape, func(idx []int) {
				a, b := int64(at(av, 0, as, idx)), int64(at(bv, 0, bs, idx))
				w := wrap(ydt, intRef(fn, a, b))
				if int64(got[k]) != w {
					t.Fatalf("%s %s(%d,%d) = %v, want %d", dt, fn, a, b, got[k], w)
				}
				k++
			})
		}
	}
}

// TestUnaryInt runs the unary functions that integers support against
// NumPy (testdata/elementwise), which wraps as the integer dtypes do.
func TestUnaryInt(t *testing.T) {
	e := newEnv(t)
	ref := ewRefs(t)
	for _, dt := range []rt.DType{rt.I32, rt.I64, rt.I8, rt.U8, rt.Bool} {
		for _, fn := range []rt.UnaryFn{rt.Copy, rt.Neg, rt.Abs, rt.Sign, rt.Not, rt.Relu} {
			op := &rt.Unary{Fn: fn}
			x, y, ok := ref.lookup(dt, fn.String()+".x"), ref.lookup(dt, fn.String()+".y"), true
			if x == nil || y == nil {
				ok = false
				x = []float64{0}
			}
			xr, yr := e.region(dt, len(x), x), e.region(dt, len(x), nil)
			op.X, op.Y = xr.ref(len(x)), yr.ref(len(x))
			if err := e.dev.Supports(op); err != nil {
				if dt == rt.Bool && fn != rt.Not {
					continue
				}
				t.Fatalf("%s %s: %v", dt, fn, err)
			}
			if !ok {
				t.Errorf("%s %s is supported but testdata/elementwise has no NumPy reference for it (add it to gen.py)", dt, fn)
				continue
			}
			e.run(op)
			got := e.values(yr)
			for i := range x {
				if got[i] != y[i] {
					t.Errorf("%s %s(%v) = %v, want %v", dt, fn, x[i], got[i], y[i])
				}
			}
		}
	}
}

var allDTypes = []rt.DType{rt.F32, rt.F16, rt.F64, rt.I32, rt.I64, rt.U8, rt.Bool, rt.I8}

func castRef(x float64, to rt.DType) float64 {
	switch to {
	case rt.Bool:
		if x != 0 {
			return 1
		}
		return 0
	case rt.F32, rt.F64, rt.F16:
		return stored(to, []float64{x})[0]
	}
	return float64(wrap(to, int64(math.Trunc(x))))
}

func TestCast(t *testing.T) {
	e := newEnv(t)
	src := []float64{0, 1, 2.75, -3.5, 100, 127, -128, 0.25, 7, 1e3}
	shape := []int{2, 5}
	for _, from := range allDTypes {
		in := make([]float64, len(src))
		for i, v := range src {
			switch from {
			case rt.U8:
				v = math.Abs(v)
				if v > 255 {
					v = 250
				}
			case rt.I8:
				if v > 127 || v < -128 {
					v = 99
				}
			}
			in[i] = castRef(v, from)
		}
		xr := e.region(from, len(in), in)
		for _, to := range allDTypes {
			yr := e.region(to, len(in), nil)
			// transposed read to exercise the strided path
			e.run(&rt.Unary{Fn: rt.Copy, X: xr.view(0, shape, []int{1, 2}), Y: yr.ref(shape...)})
			got := e.values(yr)
			k := 0
			backendtest.ForEach(shape, func(idx []int) {
				x := at(in, 0, []int{1, 2}, idx)
				w := castRef(x, to)
				if got[k] != w && !(to == rt.U8 && x < 0) {
					t.Errorf("cast %s->%s of %v = %v, want %v", from, to, x, got[k], w)
				}
				k++
			})
		}
	}
}

func TestWhereFill(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(9, 10))
	shape := []int{4, 3, 5}
	for _, dt := range allDTypes {
		cv := make([]float64, 15)
		for i := range cv {
			cv[i] = float64(rng.IntN(2))
		}
		av := castVals(dt, randVals(rng, 60, -9, 9))
		bv := castVals(dt, randVals(rng, 5, -9, 9))
		cr, ar, br, yr := e.region(rt.Bool, 15, cv), e.region(dt, 60, av), e.region(dt, 5, bv), e.region(dt, 60, nil)
		cs, bs := []int{0, 5, 1}, []int{0, 0, 1}
		e.run(&rt.Where{Cond: cr.view(0, shape, cs), A: ar.ref(shape...), B: br.view(0, shape, bs), Y: yr.ref(shape...)})
		got := e.values(yr)
		k := 0
		backendtest.ForEach(shape, func(idx []int) {
			w := at(bv, 0, bs, idx)
			if at(cv, 0, cs, idx) != 0 {
				w = av[k]
			}
			if got[k] != w {
				t.Fatalf("%s Where[%v] = %v, want %v", dt, idx, got[k], w)
			}
			k++
		})
		// Fill every other element of a 6x7 view; the gaps must survive.
		fr := e.region(dt, 84, make([]float64, 84))
		e.run(&rt.Fill{Y: fr.view(0, []int{6, 7}, []int{14, 2}), Value: 3})
		for i, v := range e.values(fr) {
			w := 0.0
			if i%2 == 0 {
				w = 3
			}
			if dt == rt.Bool && w != 0 {
				w = 1
			}
			if v != w {
				t.Fatalf("%s Fill[%d] = %v, want %v", dt, i, v, w)
			}
		}
	}
}

func castVals(dt rt.DType, v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		if dt == rt.U8 {
			x = math.Abs(x)
		}
		out[i] = castRef(x, dt)
	}
	return out
}

// TestBinaryF64Kernels checks the float64 binary kernels (Add, Sub, Mul,
// Div in each form) and the Affine kernel at every kernel level against
// the Go loops, bit for bit (both are exact IEEE operations, the Affine
// product rounded before the sum), on random non-zero values with NaN,
// infinities and signed zeros, at every length up to 70 and 1001, from
// unaligned offsets.
func TestBinaryF64Kernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	vals := func(n int) []float64 {
		v := make([]float64, n+1)
		for i := range v {
			v[i] = (rng.Float64()*4 - 2) * math.Pow(2, float64(rng.IntN(20)-10))
			switch rng.IntN(40) {
			case 0:
				v[i] = math.NaN()
			case 1:
				v[i] = math.Inf(1 - 2*rng.IntN(2))
			case 2:
				v[i] = math.Copysign(0, float64(1-2*rng.IntN(2)))
			}
		}
		return v[1:] // unaligned
	}
	same := func(a, b float64) bool { return a == b && math.Signbit(a) == math.Signbit(b) || a != a && b != b }
	lens := []int{1001}
	for n := 0; n <= 70; n++ {
		lens = append(lens, n)
	}
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for _, n := range lens {
				a, b := vals(max(n, 1))[:n], vals(max(n, 1))
				for _, fn := range []rt.BinaryFn{rt.Add, rt.Sub, rt.Mul, rt.Div} {
					for form := formVV; form <= formSV; form++ {
						got, want := make([]float64, n), make([]float64, n)
						ok := false
						if form == formSV {
							ok = binaryVecF64(fn, form, got, b, a)
						} else {
							ok = binaryVecF64(fn, form, got, a, b)
						}
						switch form {
						case formVV:
							binVecVec(fn, a, b, want)
						case formVS:
							binVecScalar(fn, a, b[0], want)
						case formSV:
							binScalarVec(fn, b[0], a, want)
						}
						if !ok {
							if lv >= levelAVX2 && n > 0 {
								t.Fatalf("%s: no f64 kernel for %s form %d", levelNames[lv], fn, form)
							}
							continue
						}
						for i := range want {
							if !same(got[i], want[i]) {
								t.Fatalf("%s %s form %d n=%d [%d]: %v, want %v", levelNames[lv], fn, form, n, i, got[i], want[i])
							}
						}
					}
				}
				alpha, beta := 0.37, -1.25
				got, want := make([]float64, n), make([]float64, n)
				for i, v := range a {
					want[i] = alpha*v + beta
				}
				if !affineF64(got, a, alpha, beta) {
					if lv >= levelAVX2 {
						t.Fatalf("%s: no f64 affine kernel", levelNames[lv])
					}
					continue
				}
				{
					for i := range want {
						if !same(got[i], want[i]) {
							t.Fatalf("%s affine n=%d [%d]: %v, want %v", levelNames[lv], n, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}
