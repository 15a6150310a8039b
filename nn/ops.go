package nn

import (
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Functional building blocks: one ONNX node each (NumPy broadcasting for
// the binary ones). Their gradients, like every op's, come from the
// engine's differentiation of the lowered program.

func maxRank(a, b Value) int {
	if a.Rank() < 0 || b.Rank() < 0 {
		return -1
	}
	return max(a.Rank(), b.Rank())
}

// Add returns a + b.
func (g *Graph) Add(a, b Value) Value { return g.op("Add", []Value{a, b}, nil, maxRank(a, b)) }

// Sub returns a - b.
func (g *Graph) Sub(a, b Value) Value { return g.op("Sub", []Value{a, b}, nil, maxRank(a, b)) }

// Mul returns a * b.
func (g *Graph) Mul(a, b Value) Value { return g.op("Mul", []Value{a, b}, nil, maxRank(a, b)) }

// Div returns a / b.
func (g *Graph) Div(a, b Value) Value { return g.op("Div", []Value{a, b}, nil, maxRank(a, b)) }

// Max returns the elementwise maximum.
func (g *Graph) Max(a, b Value) Value { return g.op("Max", []Value{a, b}, nil, maxRank(a, b)) }

// Min returns the elementwise minimum.
func (g *Graph) Min(a, b Value) Value { return g.op("Min", []Value{a, b}, nil, maxRank(a, b)) }

// Scale returns x * c.
func (g *Graph) Scale(x Value, c float64) Value { return g.Mul(x, g.scalarOf(x, c)) }

// AddScalar returns x + c.
func (g *Graph) AddScalar(x Value, c float64) Value { return g.Add(x, g.scalarOf(x, c)) }

// scalarOf returns a scalar constant of x's dtype.
func (g *Graph) scalarOf(x Value, c float64) Value {
	if x.dtype == g.dtype || x.name == "" {
		return g.scalar(c)
	}
	v := g.scalar(c)
	return g.Cast(v, x.dtype)
}

// unary adds a one-input elementwise node.
func (g *Graph) unary(op string, x Value, attrs model.Attrs) Value {
	return g.op(op, []Value{x}, attrs, x.Rank())
}

// Neg returns -x.
func (g *Graph) Neg(x Value) Value { return g.unary("Neg", x, nil) }

// Abs returns |x|.
func (g *Graph) Abs(x Value) Value { return g.unary("Abs", x, nil) }

// Exp returns e^x.
func (g *Graph) Exp(x Value) Value { return g.unary("Exp", x, nil) }

// Log returns ln x.
func (g *Graph) Log(x Value) Value { return g.unary("Log", x, nil) }

// Sqrt returns √x.
func (g *Graph) Sqrt(x Value) Value { return g.unary("Sqrt", x, nil) }

// Square returns x².
func (g *Graph) Square(x Value) Value { return g.Mul(x, x) }

// Cast converts x to dtype dt.
func (g *Graph) Cast(x Value, dt rt.DType) Value {
	code, ok := onnxType[dt]
	if !ok {
		return g.errorf("Cast to %s: unsupported dtype", dt)
	}
	return withDType(g.unary("Cast", x, model.Attrs{"to": code}), dt)
}

// onnxType maps dtypes onto ONNX TensorProto element types.
var onnxType = map[rt.DType]int{rt.F32: 1, rt.I8: 3, rt.I32: 6, rt.I64: 7, rt.Bool: 9, rt.F16: 10, rt.F64: 11}

// Where returns a where cond is true, else b.
func (g *Graph) Where(cond, a, b Value) Value {
	r := maxRank(cond, maxOf(a, b))
	return withDType(g.op("Where", []Value{cond, a, b}, nil, r), a.dtype)
}

func maxOf(a, b Value) Value {
	if a.Rank() >= b.Rank() {
		return a
	}
	return b
}

// compare adds a comparison node (a Bool output).
func (g *Graph) compare(op string, a, b Value) Value {
	return withDType(g.op(op, []Value{a, b}, nil, maxRank(a, b)), rt.Bool)
}

// Equal returns a == b (Bool).
func (g *Graph) Equal(a, b Value) Value { return g.compare("Equal", a, b) }

// Less returns a < b (Bool).
func (g *Graph) Less(a, b Value) Value { return g.compare("Less", a, b) }

// Greater returns a > b (Bool).
func (g *Graph) Greater(a, b Value) Value { return g.compare("Greater", a, b) }

// Not returns the logical negation of a Bool value.
func (g *Graph) Not(x Value) Value { return withDType(g.unary("Not", x, nil), rt.Bool) }

// MatMul returns the NumPy matrix product of a and b.
func (g *Graph) MatMul(a, b Value) Value { return g.op("MatMul", []Value{a, b}, nil, maxRank(a, b)) }

// Reshape returns x with a new shape; as in ONNX, 0 copies the input dim
// and one -1 is inferred.
func (g *Graph) Reshape(x Value, shape ...int) Value {
	s := make([]int64, len(shape))
	for i, d := range shape {
		s[i] = int64(d)
	}
	return g.op("Reshape", []Value{x, g.ints(s...)}, nil, len(shape))
}

// Transpose permutes the dims of x.
func (g *Graph) Transpose(x Value, perm ...int) Value {
	return g.op("Transpose", []Value{x}, model.Attrs{"perm": perm}, len(perm))
}

// Concat joins values along axis.
func (g *Graph) Concat(axis int, xs ...Value) Value {
	r := -1
	if len(xs) > 0 {
		r = xs[0].Rank()
	}
	return g.op("Concat", xs, model.Attrs{"axis": axis}, r)
}

// Split splits x along axis into pieces of the given sizes.
func (g *Graph) Split(x Value, axis int, sizes ...int) []Value {
	s := make([]int64, len(sizes))
	ranks := make([]int, len(sizes))
	for i, d := range sizes {
		s[i] = int64(d)
		ranks[i] = x.Rank()
	}
	return g.opN("Split", []Value{x, g.ints(s...)}, model.Attrs{"axis": axis}, len(sizes), ranks)
}

// Slice takes x[start:end] along axis (negative values count from the
// end, as in ONNX).
func (g *Graph) Slice(x Value, axis, start, end int) Value {
	return g.op("Slice", []Value{x, g.ints(int64(start)), g.ints(int64(end)), g.ints(int64(axis))}, nil, x.Rank())
}

// Unsqueeze inserts dims of size 1 at axes.
func (g *Graph) Unsqueeze(x Value, axes ...int) Value {
	s := make([]int64, len(axes))
	for i, d := range axes {
		s[i] = int64(d)
	}
	r := -1
	if x.Rank() >= 0 {
		r = x.Rank() + len(axes)
	}
	return g.op("Unsqueeze", []Value{x, g.ints(s...)}, nil, r)
}

// Gather takes the entries of x at the int64 indices idx along axis.
func (g *Graph) Gather(x, idx Value, axis int) Value {
	r := -1
	if x.Rank() >= 0 && idx.Rank() >= 0 {
		r = x.Rank() - 1 + idx.Rank()
	}
	return g.op("Gather", []Value{x, idx}, model.Attrs{"axis": axis}, r)
}

// reduce adds a Reduce* node over axes (all axes when none are given).
func (g *Graph) reduce(op string, x Value, keep bool, axes []int) Value {
	ins := []Value{x}
	r := 0
	if len(axes) > 0 {
		s := make([]int64, len(axes))
		for i, a := range axes {
			s[i] = int64(a)
		}
		ins = append(ins, g.ints(s...))
		r = -1
		if x.Rank() >= 0 {
			r = x.Rank() - len(axes)
		}
	}
	if keep {
		r = x.Rank()
	}
	k := 0
	if keep {
		k = 1
	}
	return g.op(op, ins, model.Attrs{"keepdims": k}, r)
}

// Sum sums x over axes (every axis when none are given); keep keeps the
// reduced dims with size 1.
func (g *Graph) Sum(x Value, keep bool, axes ...int) Value {
	return g.reduce("ReduceSum", x, keep, axes)
}

// Mean averages x over axes (every axis when none are given).
func (g *Graph) Mean(x Value, keep bool, axes ...int) Value {
	return g.reduce("ReduceMean", x, keep, axes)
}

// Identity returns a node output equal to x (inside NoGrad: x with its
// gradient stopped).
func (g *Graph) Identity(x Value) Value { return g.unary("Identity", x, nil) }
