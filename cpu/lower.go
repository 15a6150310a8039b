package cpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// Supports reports whether the device can run op with its dtypes: nil, an
// *rt.UnsupportedError, or an invalid-argument error naming the op.
func (d *Device) Supports(op rt.Op) error {
	if op == nil {
		return errors.New("cpu: nil op")
	}
	return supports(op)
}

func unsupported(op rt.Op, dt rt.DType, reason string) error {
	return &rt.UnsupportedError{Backend: BackendName, Op: op.OpName(), DType: dt, Reason: reason}
}

func supports(op rt.Op) error { return rt.ReferenceSupport(BackendName, op) }

// field is one operand of an op as the kernels use it.
type field struct {
	name string
	ref  *rt.Ref
	need int64 // elements read linearly from Off; -1 for a strided view
	out  bool
}

// prod multiplies non-negative ints, reporting overflow or a negative
// factor as -1.
func prod(v ...int) int64 {
	p := int64(1)
	for _, x := range v {
		if x < 0 {
			return -1
		}
		if x != 0 && p > math.MaxInt32*int64(math.MaxInt32)/int64(x) {
			return -1
		}
		p *= int64(x)
	}
	return p
}

// batchNeed is (batch-1)*stride + m*n, or -1 on overflow or bad input.
func batchNeed(batch, stride, m, n int) int64 {
	a, b := prod(batch-1, stride), prod(m, n)
	if a < 0 || b < 0 || a > math.MaxInt64/2 || b > math.MaxInt64/2 {
		return -1
	}
	return a + b
}

// fields lists the operands of op with their linear extents. Elementwise
// ops have only strided views.
func fields(op rt.Op) []field {
	switch o := op.(type) {
	case *rt.Unary:
		return []field{{"X", &o.X, -1, false}, {"Y", &o.Y, -1, true}}
	case *rt.Binary:
		return []field{{"A", &o.A, -1, false}, {"B", &o.B, -1, false}, {"Y", &o.Y, -1, true}}
	case *rt.Where:
		return []field{{"Cond", &o.Cond, -1, false}, {"A", &o.A, -1, false}, {"B", &o.B, -1, false}, {"Y", &o.Y, -1, true}}
	case *rt.Fill:
		return []field{{"Y", &o.Y, -1, true}}
	case *rt.Reduce:
		return []field{{"X", &o.X, prod(o.Outer, o.N, o.Inner), false}, {"Y", &o.Y, prod(o.Outer, o.Inner), true}}
	case *rt.Softmax:
		n := prod(o.Outer, o.N, o.Inner)
		return []field{{"X", &o.X, n, false}, {"Y", &o.Y, n, true}}
	case *rt.MatMul:
		return []field{
			{"A", &o.A, batchNeed(o.Batch, o.StrideA, o.M, o.K), false},
			{"B", &o.B, batchNeed(o.Batch, o.StrideB, o.K, o.N), false},
			{"Bias", &o.Bias, -1, false},
			{"Y", &o.Y, batchNeed(o.Batch, o.StrideY, o.M, o.N), true},
		}
	case *rt.Conv:
		cg := -1
		if o.Groups > 0 {
			cg = o.C / o.Groups
		}
		return []field{
			{"X", &o.X, prod(o.N, o.C, o.H, o.W_), false},
			{"W", &o.W, prod(o.K, cg, o.KH, o.KW), false},
			{"Bias", &o.Bias, prod(o.K), false},
			{"Y", &o.Y, prod(o.N, o.K, o.OH, o.OW), true},
		}
	case *rt.ConvTranspose:
		kg := -1
		if o.Groups > 0 {
			kg = o.K / o.Groups
		}
		return []field{
			{"X", &o.X, prod(o.N, o.C, o.H, o.W_), false},
			{"W", &o.W, prod(o.C, kg, o.KH, o.KW), false},
			{"Bias", &o.Bias, prod(o.K), false},
			{"Y", &o.Y, prod(o.N, o.K, o.OH, o.OW), true},
		}
	case *rt.Pool:
		return []field{{"X", &o.X, prod(o.NC, o.H, o.W), false}, {"Y", &o.Y, prod(o.NC, o.OH, o.OW), true}}
	case *rt.Normalize:
		n := prod(o.Outer, o.N)
		return []field{{"X", &o.X, n, false}, {"Scale", &o.Scale, prod(o.N), false}, {"Bias", &o.Bias, prod(o.N), false}, {"Y", &o.Y, n, true}}
	case *rt.Gather:
		ni := o.Idx.Len()
		ny := int64(-1)
		if ni >= 0 && ni <= math.MaxInt32 {
			ny = prod(o.Outer, int(ni), o.Inner)
		}
		return []field{{"X", &o.X, prod(o.Outer, o.Axis, o.Inner), false}, {"Idx", &o.Idx, ni, false}, {"Y", &o.Y, ny, true}}
	}
	return fieldsIndexed(op)
}

// validate is what Launch checks: rt.CheckOp and dtype support.
func validate(op rt.Op) error {
	// rt.CheckOp checks required operands, bounds, contiguity of linearly
	// read operands and sizes.
	if err := rt.CheckOp(op); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if err := supports(op); err != nil {
		return err
	}
	var err error
	rt.MapRefs(op, func(name string, r *rt.Ref) {
		if _, e := bytesOf(r.Buf); e != nil && err == nil {
			err = fmt.Errorf("cpu: %s: operand %s: %w", op.OpName(), name, e)
		}
	})
	return err
}

func isElementwise(op rt.Op) bool {
	switch op.(type) {
	case *rt.Unary, *rt.Binary, *rt.Where, *rt.Fill:
		return true
	}
	return false
}

// data returns the memory of a ref's buffer, checked by execute.
func data(r rt.Ref) []byte {
	if r.Buf == nil {
		return nil
	}
	b, _ := bytesOf(r.Buf)
	return b
}

// execute runs one validated op.
func execute(op rt.Op) (err error) {
	fs := fields(op)
	for _, f := range fs {
		if f.ref.Buf == nil {
			continue
		}
		if _, err := bytesOf(f.ref.Buf); err != nil {
			return fmt.Errorf("%s: operand %s: %w", op.OpName(), f.name, err)
		}
	}
	defer func() {
		// Defence in depth only: inputs are validated at Launch, so this
		// fires only if a buffer is freed while a kernel runs.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: kernel fault: %v", op.OpName(), r)
		}
	}()
	if rt.OpDType(op) == rt.F16 && !isElementwise(op) && !isIndexed(op) {
		return runF16(op, fs)
	}
	return lower(op)
}

// lower turns one validated op into its device work: on the host that is
// running its kernel.
func lower(op rt.Op) error {
	switch o := op.(type) {
	case *rt.Unary:
		unaryOp(o, data(o.X), data(o.Y))
	case *rt.Binary:
		binaryOp(o, data(o.A), data(o.B), data(o.Y))
	case *rt.Where:
		whereOp(o, data(o.Cond), data(o.A), data(o.B), data(o.Y))
	case *rt.Fill:
		fillOp(o, data(o.Y))
	case *rt.Reduce:
		reduceOp(o)
	case *rt.Softmax:
		softmaxOp(o)
	case *rt.Normalize:
		normalizeOp(o)
	case *rt.MatMul:
		matmulOp(o)
	case *rt.Conv:
		convOp(o)
	case *rt.ConvTranspose:
		convTransposeOp(o)
	case *rt.Pool:
		poolOp(o)
	case *rt.Gather:
		gatherOp(o)
	case *rt.GatherElements:
		gatherElementsOp(o)
	case *rt.ScatterElements:
		scatterElementsOp(o)
	case *rt.TopK:
		topKOp(o)
	default:
		return unsupported(op, rt.OpDType(op), "unknown op")
	}
	return nil
}

// hostBuffer wraps scratch memory as an rt.Buffer for the f16 path.
func hostBuffer(b []byte) *Buffer { return &Buffer{size: int64(len(b)), data: b} }

// runF16 runs an f16 op by converting its f16 operands to f32 scratch,
// running the f32 kernel and converting the outputs back.
func runF16(op rt.Op, _ []field) error {
	c := rt.CloneOp(op)
	fs := fields(c)
	type back struct {
		dst []uint16
		src []float32
	}
	var outs []back
	for _, f := range fs {
		r := f.ref
		if r.Buf == nil || r.DType != rt.F16 {
			continue
		}
		src := data(*r)
		h := elems[uint16](src)
		if f.need < 0 { // strided view: convert its whole span
			lo, hi := r.Span()
			lo -= lo % 2
			n := int((hi - lo) / 2)
			t := make([]float32, n)
			for i, v := range h[lo/2 : lo/2+int64(n)] {
				t[i] = rt.F16Float(v)
			}
			r.Buf = hostBuffer(asBytes(t))
			r.Off = (r.Off - lo) * 2
			r.DType = rt.F32
			continue
		}
		off := int(r.Off / 2)
		n := int(f.need)
		t := make([]float32, n)
		hv := h[off : off+n]
		for i, v := range hv {
			t[i] = rt.F16Float(v)
		}
		r.Buf = hostBuffer(asBytes(t))
		r.Off = 0
		r.DType = rt.F32
		r.Shape = []int{n}
		r.Strides = nil
		if f.out {
			outs = append(outs, back{hv, t})
		}
	}
	if err := lower(c); err != nil {
		return err
	}
	for _, o := range outs {
		for i, v := range o.src {
			o.dst[i] = rt.F16Bits(v)
		}
	}
	return nil
}

// lin returns the n elements of r's buffer that start at r.Off.
func lin[T any](r rt.Ref, n int) []T {
	if n <= 0 || r.Buf == nil {
		return nil
	}
	off := int(r.Off) / r.DType.Size()
	return elems[T](data(r))[off : off+n]
}

type floatT interface{ ~float32 | ~float64 }
