package rt

import "fmt"

// ReferenceSupport applies the dtype rules of the reference (CPU)
// implementation to op and returns nil when they allow it, or an error
// naming the op for the given backend: an *UnsupportedError for a dtype or
// function the rules do not define, or a plain error for operands whose
// dtypes disagree (a comparison writing f32, a MatMul mixing f16 and f32).
//
// Backends that implement the whole reference set (cpu, cuda, opencl)
// call it from Supports after their own device checks (fp64, limits), so
// the rules live in one place. A narrower backend checks its own subset.
func ReferenceSupport(backend string, op Op) error {
	if op == nil {
		return fmt.Errorf("%s: nil op", backend)
	}
	c := supportCheck{backend: backend, op: op, dt: OpDType(op)}
	if !c.dt.Valid() {
		return c.unsupported(c.dt, "invalid dtype")
	}
	switch o := op.(type) {
	case *Unary:
		return c.unary(o)
	case *Binary:
		return c.binary(o)
	case *Where:
		if o.Cond.DType != Bool {
			return c.dtypeErr("Cond", o.Cond.DType, Bool)
		}
		return c.same([]string{"B", "Y"}, o.B, o.Y)
	case *Reduce:
		return c.reduce(o)
	case *Gather:
		return c.same([]string{"Y"}, o.Y)
	case *Fill:
		return nil
	case *GatherElements:
		return c.same([]string{"Y"}, o.Y)
	case *ScatterElements:
		if o.Fn > ScatterMin {
			return c.unsupported(c.dt, "unknown scatter function")
		}
		return c.same([]string{"Upd"}, o.Upd)
	case *TopK:
		if o.Indices.DType != I64 {
			return c.dtypeErr("Indices", o.Indices.DType, I64)
		}
		return c.same([]string{"Values"}, o.Values)
	case *Conv:
		if o.Res.Buf != nil {
			// Optional: a backend that adds the residual says so in its
			// own Supports.
			return c.unsupported(c.dt, "Conv with a residual (Res)")
		}
		if HalfWeights(op) {
			return c.unsupported(F16, HalfWeightsUnsupported)
		}
		return c.floatOp()
	case *MatMul:
		if o.Res.Buf != nil {
			// Optional, as Conv's.
			return c.unsupported(c.dt, "MatMul with a residual (Res)")
		}
		if HalfWeights(op) {
			return c.unsupported(F16, HalfWeightsUnsupported)
		}
		return c.floatOp()
	case *Softmax, *ConvTranspose, *Pool, *Normalize:
		if HalfWeights(op) {
			return c.unsupported(F16, HalfWeightsUnsupported)
		}
		return c.floatOp()
	case *OptimStep:
		return c.optim(o)
	case *Fused, *Attention, *SepConv:
		// Optional: a backend that runs it says so in its own Supports.
		return c.unsupported(c.dt, "optional op")
	}
	return c.unsupported(c.dt, fmt.Sprintf("unknown op type %T", op))
}

// HalfWeightsUnsupported is the Reason of the *UnsupportedError that
// ReferenceSupport returns for a [HalfWeights] op.
const HalfWeightsUnsupported = "f16 weights with f32 activations (precision f16) are not implemented by this backend"

// supportCheck is one ReferenceSupport call: the backend named in errors,
// the op and the dtype that selects its kernel.
type supportCheck struct {
	backend string
	op      Op
	dt      DType
}

func (c supportCheck) unsupported(dt DType, reason string) error {
	return &UnsupportedError{Backend: c.backend, Op: c.op.OpName(), DType: dt, Reason: reason}
}

func (c supportCheck) dtypeErr(name string, got, want DType) error {
	return fmt.Errorf("%s: %s: %s dtype %s, want %s", c.backend, c.op.OpName(), name, got, want)
}

// same checks that every present ref has the op's dtype.
func (c supportCheck) same(names []string, refs ...Ref) error {
	for i, r := range refs {
		if r.Buf != nil && r.DType != c.dt {
			return c.dtypeErr(names[i], r.DType, c.dt)
		}
	}
	return nil
}

func (c supportCheck) unary(o *Unary) error {
	if int(o.Fn) >= NumUnaryFns {
		return c.unsupported(c.dt, "unknown unary function")
	}
	if !o.Y.DType.Valid() {
		return c.unsupported(o.Y.DType, "invalid output dtype")
	}
	if o.Fn == Copy {
		return nil
	}
	if o.Y.DType != c.dt {
		return c.dtypeErr("Y", o.Y.DType, c.dt)
	}
	if c.dt.IsFloat() {
		return nil
	}
	switch o.Fn {
	case Not:
		return nil
	case Neg, Abs, Sign, Relu, Square:
		if c.dt.IsInt() {
			return nil
		}
	}
	return c.unsupported(c.dt, "")
}

func (c supportCheck) binary(o *Binary) error {
	if int(o.Fn) >= NumBinaryFns {
		return c.unsupported(c.dt, "unknown binary function")
	}
	if o.B.DType != c.dt {
		return c.dtypeErr("B", o.B.DType, c.dt)
	}
	want := c.dt
	if o.Fn.IsCompare() {
		want = Bool
	}
	if o.Y.DType != want {
		return c.dtypeErr("Y", o.Y.DType, want)
	}
	if c.dt.IsFloat() || o.Fn.IsCompare() || o.Fn.IsLogical() {
		return nil
	}
	switch o.Fn {
	case Max, Min:
		if c.dt.IsInt() || c.dt == Bool {
			return nil
		}
	case Add, Sub, Mul, Div, Mod, Fmod:
		if c.dt.IsInt() {
			return nil
		}
	}
	return c.unsupported(c.dt, "")
}

func (c supportCheck) reduce(o *Reduce) error {
	if int(o.Fn) >= NumReduceFns {
		return c.unsupported(c.dt, "unknown reduce function")
	}
	want := c.dt
	if o.Fn == ArgMax || o.Fn == ArgMin {
		want = I64
	}
	if o.Y.DType != want {
		return c.dtypeErr("Y", o.Y.DType, want)
	}
	if c.dt.IsFloat() {
		return nil
	}
	switch o.Fn {
	case RMax, RMin, ArgMax, ArgMin:
		return nil
	case Sum, Prod:
		if c.dt.IsInt() {
			return nil
		}
	}
	return c.unsupported(c.dt, "")
}

// floatOp checks the ops defined for floating-point dtypes only, whose
// operands all share the op's dtype.
func (c supportCheck) floatOp() error {
	if !c.dt.IsFloat() {
		return c.unsupported(c.dt, "floating-point dtypes only")
	}
	switch o := c.op.(type) {
	case *Softmax:
		return c.same([]string{"Y"}, o.Y)
	case *MatMul:
		if int(o.Act.Fn) >= NumUnaryFns {
			return c.unsupported(c.dt, "unknown activation")
		}
		return c.same([]string{"B", "Bias", "Y"}, o.B, o.Bias, o.Y)
	case *Conv:
		if int(o.Act.Fn) >= NumUnaryFns {
			return c.unsupported(c.dt, "unknown activation")
		}
		return c.same([]string{"W", "Bias", "Y"}, o.W, o.Bias, o.Y)
	case *ConvTranspose:
		return c.same([]string{"W", "Bias", "Y"}, o.W, o.Bias, o.Y)
	case *Pool:
		if o.Fn > LpPool {
			return c.unsupported(c.dt, "unknown pool function")
		}
		return c.same([]string{"Y"}, o.Y)
	case *Normalize:
		return c.same([]string{"Scale", "Bias", "Y"}, o.Scale, o.Bias, o.Y)
	}
	return nil
}

// optim checks an OptimStep: f32 or f64, every operand of P's dtype.
func (c supportCheck) optim(o *OptimStep) error {
	if int(o.Fn) >= NumOptimFns {
		return c.unsupported(c.dt, "unknown update rule")
	}
	if c.dt != F32 && c.dt != F64 {
		return c.unsupported(c.dt, "optimizer steps are implemented for f32 and f64")
	}
	return c.same([]string{"G", "S1", "S2", "S3", "H", "Scale"}, o.G, o.S1, o.S2, o.S3, o.H, o.Scale)
}
