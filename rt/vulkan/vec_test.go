//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// vecOperand is one operand of a vecCase: the view's element offset in its
// buffer, its strides (nil: contiguous) and the element count of its
// extent (the buffer holds off + n).
type vecOperand struct {
	off     int
	strides []int
	n       int
}

// vecCase is an elementwise layout for TestElementwiseVec: the shape, the
// inputs (one or two) and the output, and whether the 4-item vector
// variant (vec.glsl) should run it.
type vecCase struct {
	name  string
	shape []int
	in    []vecOperand
	out   vecOperand
	vec   bool
}

func (o vecOperand) st(shape []int) []int {
	if o.strides != nil {
		return o.strides
	}
	return rt.ContiguousStrides(shape)
}

// vecCases covers the vector path's conditions: odd lengths (scalar
// tails), offsets that are and are not multiples of 4, outer strides,
// and broadcasting along the inner dim (a bias row) and across it (a
// column or a scalar, read as one scalar per vector).
func vecCases(binary bool) []vecCase {
	flat := func(n, off int) vecOperand { return vecOperand{off: off, n: n} }
	var cs []vecCase
	for _, n := range []int{4, 5, 7, 1027, 4*256*4*3 + 2} {
		c := vecCase{name: fmt.Sprintf("flat%d", n), shape: []int{n}, in: []vecOperand{flat(n, 0)}, out: flat(n, 0), vec: n >= 4}
		if binary {
			c.in = append(c.in, flat(n, 0))
		}
		cs = append(cs, c)
	}
	for _, off := range [][2]int{{4, 8}, {1, 0}, {0, 3}, {2, 2}} {
		n := 1029
		c := vecCase{name: fmt.Sprintf("off%d-%d", off[0], off[1]), shape: []int{n}, in: []vecOperand{flat(n, off[0])}, out: flat(n, off[1]),
			vec: off[0]%4 == 0 && off[1]%4 == 0}
		if binary {
			c.in = append(c.in, flat(n, off[0]))
		}
		cs = append(cs, c)
	}
	// rows of a wider buffer: outer stride 16 keeps vectors aligned, 10 does not
	for _, ld := range []int{16, 10} {
		c := vecCase{name: fmt.Sprintf("rows-ld%d", ld), shape: []int{9, 8},
			in: []vecOperand{{strides: []int{ld, 1}, n: 9 * ld}}, out: vecOperand{n: 72}, vec: ld%4 == 0}
		if binary {
			c.in = append(c.in, vecOperand{strides: []int{ld, 1}, n: 9 * ld, off: 4})
		}
		cs = append(cs, c)
	}
	// a transposed input: scalar path
	c := vecCase{name: "transposed", shape: []int{12, 8}, in: []vecOperand{{strides: []int{1, 12}, n: 96}}, out: vecOperand{n: 96}}
	if binary {
		c.in = append(c.in, vecOperand{n: 96})
	}
	cs = append(cs, c)
	// broadcast along and across the inner dim
	splat := []vecCase{
		{name: "scalar", shape: []int{1027}, in: []vecOperand{{strides: []int{0}, n: 1, off: 1}}, out: vecOperand{n: 1027}, vec: true},
		{name: "column", shape: []int{7, 12}, in: []vecOperand{{strides: []int{1, 0}, n: 7, off: 3}}, out: vecOperand{n: 84}, vec: true},
		{name: "column-odd", shape: []int{7, 10}, in: []vecOperand{{strides: []int{1, 0}, n: 7}}, out: vecOperand{n: 70}},
	}
	if binary {
		for i := range splat {
			splat[i].in = append([]vecOperand{{n: splat[i].out.n}}, splat[i].in...)
		}
		splat = append(splat,
			vecCase{name: "bias", shape: []int{7, 12}, in: []vecOperand{{n: 84}, {strides: []int{0, 1}, n: 12}}, out: vecOperand{n: 84}, vec: true},
			vecCase{name: "bias-odd", shape: []int{7, 14}, in: []vecOperand{{strides: []int{0, 1}, n: 14}, {n: 98}}, out: vecOperand{n: 98}},
			vecCase{name: "bias-3d", shape: []int{3, 5, 16}, in: []vecOperand{{strides: []int{0, 16, 1}, n: 80}, {n: 240}}, out: vecOperand{n: 240}, vec: true},
		)
	}
	return append(cs, splat...)
}

// runVecCase runs op (built by mk from the views) for one vecCase with
// inputs from gen, checks that the vector variant ran exactly when the
// case says, and compares every output element against want (computed
// in float64 from the inputs' values at each index) and every element
// outside the output view against its initial value.
func runVecCase(t *testing.T, d rt.Device, what string, c vecCase, xdt, ydt rt.DType, gen func(n int) []float64,
	mk func(in []rt.Ref, y rt.Ref) rt.Op, want func(in []float64) float64, tol float64) {
	t.Helper()
	var refs []rt.Ref
	var vals [][]float64
	for _, o := range c.in {
		v := gen(o.off + o.n)
		b := newBuf(t, d, xdt, o.off+o.n, v)
		r := b.ref(c.shape, o.strides)
		r.Off += int64(o.off * xdt.Size())
		refs = append(refs, r)
		vals = append(vals, v)
	}
	init := make([]float64, c.out.off+c.out.n)
	for i := range init {
		init[i] = 3
	}
	yb := newBuf(t, d, ydt, len(init), init)
	yr := yb.ref(c.shape, c.out.strides)
	yr.Off += int64(c.out.off * ydt.Size())
	op := mk(refs, yr)
	if !supported(t, d, op) {
		return
	}
	ds, err := d.(*device).lower(op)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Contains(ds[0].shader, "v_"); got != c.vec {
		t.Errorf("%s %s: shader %s, want the vector variant %v", what, c.name, ds[0].shader, c.vec)
	}
	backendtest.Run(t, d, op)
	got := yb.read(t, d)
	exp := append([]float64{}, init...)
	ySt := c.out.st(c.shape)
	backendtest.ForEach(c.shape, func(idx []int) {
		args := make([]float64, len(c.in))
		for k, o := range c.in {
			args[k] = vals[k][o.off+backendtest.Offset(idx, o.st(c.shape))]
		}
		exp[c.out.off+backendtest.Offset(idx, ySt)] = representable(ydt, want(args))
	})
	compare(t, what+" "+c.name, got, exp, tol)
}

// TestElementwiseVec checks the 4-item vector variants of unary, binary,
// cast and copy (and that the scalar kernels still take the layouts the
// vector ones cannot) against float64 references, over vecCases.
func TestElementwiseVec(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(15))
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.I32} {
		gen := func(n int) []float64 { return randVals(r, dt, n, -3, 3) }
		unary := []rt.UnaryFn{rt.Relu, rt.Neg, rt.Abs}
		if isFloat(dt) {
			unary = append(unary, rt.Exp, rt.Sigmoid)
		}
		for _, f := range unary {
			for _, c := range vecCases(false) {
				runVecCase(t, d, dt.String()+" "+f.String(), c, dt, dt, gen,
					func(in []rt.Ref, y rt.Ref) rt.Op { return &rt.Unary{Fn: f, X: in[0], Y: y} },
					func(a []float64) float64 { return f.Apply(a[0], 0, 0) }, tolFor(dt))
			}
		}
		binary := []rt.BinaryFn{rt.Add, rt.Sub, rt.Mul, rt.Max}
		if isFloat(dt) {
			binary = append(binary, rt.Div)
		}
		for _, f := range binary {
			for _, c := range vecCases(true) {
				runVecCase(t, d, dt.String()+" "+f.String(), c, dt, dt, gen,
					func(in []rt.Ref, y rt.Ref) rt.Op { return &rt.Binary{Fn: f, A: in[0], B: in[1], Y: y} },
					func(a []float64) float64 { return f.Apply(a[0], a[1]) }, tolFor(dt))
			}
		}
		for _, ydt := range []rt.DType{rt.F32, rt.F16, rt.I32} {
			if ydt == dt {
				continue
			}
			for _, c := range vecCases(false) {
				runVecCase(t, d, "cast "+dt.String()+"->"+ydt.String(), c, dt, ydt, func(n int) []float64 { return randVals(r, dt, n, -100, 100) },
					func(in []rt.Ref, y rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Copy, X: in[0], Y: y} },
					func(a []float64) float64 {
						if ydt.IsInt() {
							return math.Trunc(a[0])
						}
						return a[0]
					}, tolFor(ydt))
			}
		}
	}
	// copy by element size: 1, 2 and 4 bytes have vector variants (a
	// broadcast input goes to the scalar kernel), 8 does not
	for _, dt := range []rt.DType{rt.U8, rt.F16, rt.I32, rt.I64} {
		for _, c := range vecCases(false) {
			if !vecCopy(dt.Size()) || strings.HasPrefix(c.name, "scalar") || strings.HasPrefix(c.name, "column") {
				c.vec = false
			}
			runVecCase(t, d, "copy "+dt.String(), c, dt, dt, func(n int) []float64 { return randVals(r, dt, n, -100, 100) },
				func(in []rt.Ref, y rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Copy, X: in[0], Y: y} },
				func(a []float64) float64 { return a[0] }, 0)
		}
	}
}

// TestFillVec checks Fill's 4-item vector variants (fillv_: 1-, 2- and
// 4-byte elements, four to a 32-bit word, two or four words) and the
// scalar kernel on the layouts the vectors cannot take, over the output
// views of vecCases: every element of the view holds the value, every
// other element its initial one.
func TestFillVec(t *testing.T) {
	d := testDevice(t)
	for _, dt := range []rt.DType{rt.U8, rt.F16, rt.F32, rt.I64} {
		for _, c := range vecCases(false) {
			if strings.HasPrefix(c.name, "scalar") || strings.HasPrefix(c.name, "column") {
				continue // input layouts
			}
			// the output alone decides: every vecCases output is contiguous
			c.vec = vecCopy(dt.Size()) && c.out.off%4 == 0
			init := make([]float64, c.out.off+c.out.n)
			for i := range init {
				init[i] = 3
			}
			yb := newBuf(t, d, dt, len(init), init)
			yr := yb.ref(c.shape, c.out.strides)
			yr.Off += int64(c.out.off * dt.Size())
			op := &rt.Fill{Y: yr, Value: -5.5}
			if dt.IsInt() {
				op.Value = 7
			}
			if dt == rt.U8 {
				op.Value = 200
			}
			if !supported(t, d, op) {
				continue
			}
			ds, err := d.(*device).lower(op)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(ds[0].shader, "fillv_"); got != c.vec {
				t.Errorf("fill %s %s: shader %s, want the vector variant %v", dt, c.name, ds[0].shader, c.vec)
			}
			backendtest.Run(t, d, op)
			want := append([]float64{}, init...)
			st := c.out.st(c.shape)
			backendtest.ForEach(c.shape, func(idx []int) { want[c.out.off+backendtest.Offset(idx, st)] = op.Value })
			compare(t, "fill "+dt.String()+" "+c.name, yb.read(t, d), want, 0)
		}
	}
}
