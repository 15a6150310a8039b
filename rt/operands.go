package rt

import (
	"math"
	"reflect"
)

// Operand is one operand of a primitive op as the kernels address it: the
// one table of names, extents and roles that CheckOp and the backends
// share.
type Operand struct {
	// Name is the op struct's field name ("X", "Bias", "Idx").
	Name string
	// Ref points into the op, so that a caller can rebind the buffer and
	// offset (of a CloneOp copy).
	Ref *Ref
	// Need is the number of elements the kernels address linearly from
	// Ref.Off, for an operand that is not Strided; -1 when the op's sizes
	// are negative or their product overflows. It is 0 for a Strided
	// operand, which its strides address and whose span Ref.Check bounds.
	Need int64
	// Output reports whether the op writes the operand.
	Output bool
	// Optional reports whether the operand may be left without a buffer.
	Optional bool
	// Strided reports whether the operand may be a strided view; the
	// others must be contiguous.
	Strided bool
	// Shape, when not nil, is the shape the ref must have: the output's
	// shape for the inputs of elementwise ops, [M, N] for MatMul's Bias,
	// [Outer, N, Inner] for the index and update views of the indexed ops.
	Shape []int
}

// Operands returns every operand of op, present or not, in the order of
// the op struct's fields; nil for a nil or unknown op.
func Operands(op Op) []Operand {
	if op == nil || reflect.ValueOf(op).IsNil() {
		return nil
	}
	in := func(name string, r *Ref, need int64) Operand { return Operand{Name: name, Ref: r, Need: need} }
	out := func(name string, r *Ref, need int64) Operand {
		return Operand{Name: name, Ref: r, Need: need, Output: true}
	}
	optional := func(o Operand) Operand { o.Optional = true; return o }
	// strided marks an operand addressed through its strides, of the given
	// shape (nil: any).
	strided := func(o Operand, shape []int) Operand {
		o.Strided, o.Need, o.Shape = true, 0, shape
		return o
	}
	switch o := op.(type) {
	case *Unary:
		return []Operand{strided(in("X", &o.X, 0), o.Y.Shape), strided(out("Y", &o.Y, 0), nil)}
	case *Binary:
		return []Operand{strided(in("A", &o.A, 0), o.Y.Shape), strided(in("B", &o.B, 0), o.Y.Shape), strided(out("Y", &o.Y, 0), nil)}
	case *Where:
		return []Operand{strided(in("Cond", &o.Cond, 0), o.Y.Shape), strided(in("A", &o.A, 0), o.Y.Shape),
			strided(in("B", &o.B, 0), o.Y.Shape), strided(out("Y", &o.Y, 0), nil)}
	case *Fill:
		return []Operand{strided(out("Y", &o.Y, 0), nil)}
	case *Reduce:
		return []Operand{in("X", &o.X, Extent(o.Outer, o.N, o.Inner)), out("Y", &o.Y, Extent(o.Outer, o.Inner))}
	case *Softmax:
		n := Extent(o.Outer, o.N, o.Inner)
		return []Operand{in("X", &o.X, n), out("Y", &o.Y, n)}
	case *MatMul:
		return []Operand{
			in("A", &o.A, BatchExtent(o.Batch, o.StrideA, o.M, o.K)),
			in("B", &o.B, BatchExtent(o.Batch, o.StrideB, o.K, o.N)),
			strided(optional(in("Bias", &o.Bias, 0)), []int{o.M, o.N}),
			out("Y", &o.Y, BatchExtent(o.Batch, o.StrideY, o.M, o.N)),
			optional(in("Res", &o.Res, BatchExtent(o.Batch, o.StrideY, o.M, o.N))),
		}
	case *Conv:
		return []Operand{
			in("X", &o.X, Extent(o.N, o.C, o.H, o.Width)),
			in("W", &o.W, Extent(o.K, perGroup(o.C, o.Groups), o.KH, o.KW)),
			optional(in("Bias", &o.Bias, Extent(o.K))),
			out("Y", &o.Y, convYExtent(o)),
			optional(in("Res", &o.Res, convYExtent(o))),
		}
	case *ConvTranspose:
		return []Operand{
			in("X", &o.X, Extent(o.N, o.C, o.H, o.Width)),
			in("W", &o.W, Extent(o.C, perGroup(o.K, o.Groups), o.KH, o.KW)),
			optional(in("Bias", &o.Bias, Extent(o.K))),
			out("Y", &o.Y, Extent(o.N, o.K, o.OH, o.OW)),
		}
	case *Pool:
		return []Operand{in("X", &o.X, Extent(o.NC, o.H, o.W)), out("Y", &o.Y, Extent(o.NC, o.OH, o.OW))}
	case *Normalize:
		n := Extent(o.Outer, o.N)
		return []Operand{in("X", &o.X, n), out("Y", &o.Y, n), optional(in("Scale", &o.Scale, Extent(o.N))), optional(in("Bias", &o.Bias, Extent(o.N)))}
	case *Gather:
		ni := o.Idx.Len()
		ny := int64(-1)
		if ni >= 0 && ni <= math.MaxInt32 {
			ny = Extent(o.Outer, int(ni), o.Inner)
		}
		return []Operand{in("X", &o.X, Extent(o.Outer, o.Axis, o.Inner)), in("Idx", &o.Idx, ni), out("Y", &o.Y, ny)}
	case *GatherElements:
		shape := []int{o.Outer, o.N, o.Inner}
		return []Operand{in("X", &o.X, Extent(o.Outer, o.Axis, o.Inner)), strided(in("Idx", &o.Idx, 0), shape), out("Y", &o.Y, Extent(o.Outer, o.N, o.Inner))}
	case *ScatterElements:
		shape := []int{o.Outer, o.N, o.Inner}
		return []Operand{out("Y", &o.Y, Extent(o.Outer, o.Axis, o.Inner)), strided(in("Idx", &o.Idx, 0), shape), strided(in("Upd", &o.Upd, 0), shape)}
	case *TopK:
		n := Extent(o.Outer, o.K, o.Inner)
		return []Operand{in("X", &o.X, Extent(o.Outer, o.N, o.Inner)), out("Values", &o.Values, n), out("Indices", &o.Indices, n)}
	case *Fused:
		return fusedOperands(o)
	case *Attention:
		return attentionOperands(o)
	case *SepConv:
		return sepConvOperands(o)
	case *OptimStep:
		// G is written back when Scale is present; a state operand is
		// present exactly when the rule uses it (checkOptim).
		n := Extent(o.N)
		return []Operand{out("P", &o.P, n), out("G", &o.G, n),
			optional(out("S1", &o.S1, n)), optional(out("S2", &o.S2, n)), optional(out("S3", &o.S3, n)),
			in("H", &o.H, OptimHyperLen), optional(in("Scale", &o.Scale, 1))}
	}
	return nil
}

// perGroup is c/groups, or -1 (which makes an extent -1) when groups < 1.
func perGroup(c, groups int) int {
	if groups < 1 {
		return -1
	}
	return c / groups
}

// Extent is the product of sizes, or -1 when one is negative or the
// product overflows int64: NumElements of the sizes as a shape.
func Extent(sizes ...int) int64 { return NumElements(sizes) }

// convYExtent is the extent of a Conv's Y and Res: N images StrideY
// apart (Conv.ImageStrideY).
func convYExtent(o *Conv) int64 {
	if o.DenseY() {
		return Extent(o.N, o.K, o.OH, o.OW)
	}
	return BatchExtent(o.N, o.StrideY, o.K, o.OH*o.OW)
}

// BatchExtent is the extent of a batch of m×n matrices placed stride
// elements apart: (batch-1)*stride + m*n, or -1 when batch < 1, a size
// is negative or the sum overflows.
func BatchExtent(batch, stride, m, n int) int64 {
	a, b := Extent(batch-1, stride), Extent(m, n)
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return -1
	}
	return a + b
}
