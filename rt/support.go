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
	unsupported := func(op Op, dt DType, reason string) error {
		return &UnsupportedError{Backend: backend, Op: op.OpName(), DType: dt, Reason: reason}
	}
	dtypeErr := func(op Op, name string, got, want DType) error {
		return fmt.Errorf("%s: %s: %s dtype %s, want %s", backend, op.OpName(), name, got, want)
	}
	// sameDT checks that every present ref has dtype dt.
	sameDT := func(op Op, dt DType, names []string, refs ...Ref) error {
		for i, r := range refs {
			if r.Buf != nil && r.DType != dt {
				return dtypeErr(op, names[i], r.DType, dt)
			}
		}
		return nil
	}
	if op == nil {
		return fmt.Errorf("%s: nil op", backend)
	}
	dt := OpDType(op)
	if !dt.Valid() {
		return unsupported(op, dt, "invalid dtype")
	}
	isInt := dt.IsInt()
	isBool := dt == Bool
	floatOnly := func() error {
		if !dt.IsFloat() {
			return unsupported(op, dt, "floating-point dtypes only")
		}
		return nil
	}
	switch o := op.(type) {
	case *Unary:
		if int(o.Fn) >= NumUnaryFns {
			return unsupported(op, dt, "unknown unary function")
		}
		if !o.Y.DType.Valid() {
			return unsupported(op, o.Y.DType, "invalid output dtype")
		}
		if o.Fn == Copy {
			return nil
		}
		if o.Y.DType != dt {
			return dtypeErr(op, "Y", o.Y.DType, dt)
		}
		if dt.IsFloat() {
			return nil
		}
		switch o.Fn {
		case Not:
			return nil
		case Neg, Abs, Sign, Relu, Square:
			if isInt {
				return nil
			}
		}
		return unsupported(op, dt, "")
	case *Binary:
		if int(o.Fn) >= NumBinaryFns {
			return unsupported(op, dt, "unknown binary function")
		}
		if o.B.DType != dt {
			return dtypeErr(op, "B", o.B.DType, dt)
		}
		want := dt
		if o.Fn.IsCompare() {
			want = Bool
		}
		if o.Y.DType != want {
			return dtypeErr(op, "Y", o.Y.DType, want)
		}
		if dt.IsFloat() || o.Fn.IsCompare() || o.Fn.IsLogical() {
			return nil
		}
		switch o.Fn {
		case Max, Min:
			if isInt || isBool {
				return nil
			}
		case Add, Sub, Mul, Div, Mod, Fmod:
			if isInt {
				return nil
			}
		}
		return unsupported(op, dt, "")
	case *Where:
		if o.Cond.DType != Bool {
			return dtypeErr(op, "Cond", o.Cond.DType, Bool)
		}
		return sameDT(op, dt, []string{"B", "Y"}, o.B, o.Y)
	case *Reduce:
		if int(o.Fn) >= NumReduceFns {
			return unsupported(op, dt, "unknown reduce function")
		}
		want := dt
		if o.Fn == ArgMax || o.Fn == ArgMin {
			want = I64
		}
		if o.Y.DType != want {
			return dtypeErr(op, "Y", o.Y.DType, want)
		}
		if dt.IsFloat() {
			return nil
		}
		switch o.Fn {
		case RMax, RMin, ArgMax, ArgMin:
			return nil
		case Sum, Prod:
			if isInt {
				return nil
			}
		}
		return unsupported(op, dt, "")
	case *Softmax:
		if err := floatOnly(); err != nil {
			return err
		}
		return sameDT(op, dt, []string{"Y"}, o.Y)
	case *MatMul:
		if err := floatOnly(); err != nil {
			return err
		}
		if int(o.Act.Fn) >= NumUnaryFns {
			return unsupported(op, dt, "unknown activation")
		}
		return sameDT(op, dt, []string{"B", "Bias", "Y"}, o.B, o.Bias, o.Y)
	case *Conv:
		if err := floatOnly(); err != nil {
			return err
		}
		if int(o.Act.Fn) >= NumUnaryFns {
			return unsupported(op, dt, "unknown activation")
		}
		return sameDT(op, dt, []string{"W", "Bias", "Y"}, o.W, o.Bias, o.Y)
	case *ConvTranspose:
		if err := floatOnly(); err != nil {
			return err
		}
		return sameDT(op, dt, []string{"W", "Bias", "Y"}, o.W, o.Bias, o.Y)
	case *Pool:
		if err := floatOnly(); err != nil {
			return err
		}
		if o.Fn > LpPool {
			return unsupported(op, dt, "unknown pool function")
		}
		return sameDT(op, dt, []string{"Y"}, o.Y)
	case *Normalize:
		if err := floatOnly(); err != nil {
			return err
		}
		return sameDT(op, dt, []string{"Scale", "Bias", "Y"}, o.Scale, o.Bias, o.Y)
	case *Gather:
		return sameDT(op, dt, []string{"Y"}, o.Y)
	case *Fill:
		return nil
	case *GatherElements:
		return sameDT(op, dt, []string{"Y"}, o.Y)
	case *ScatterElements:
		if o.Fn > ScatterMin {
			return unsupported(op, dt, "unknown scatter function")
		}
		return sameDT(op, dt, []string{"Upd"}, o.Upd)
	case *TopK:
		if o.Indices.DType != I64 {
			return dtypeErr(op, "Indices", o.Indices.DType, I64)
		}
		return sameDT(op, dt, []string{"Values"}, o.Values)
	}
	return unsupported(op, dt, fmt.Sprintf("unknown op type %T", op))
}
