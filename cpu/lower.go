package cpu

import (
	"errors"
	"fmt"

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

func supports(op rt.Op) error {
	if o, ok := op.(*rt.Fused); ok {
		// The optional fused elementwise op: f32 and f64.
		if dt := rt.OpDType(o); dt != rt.F32 && dt != rt.F64 {
			return unsupported(op, dt, "")
		}
		return nil
	}
	if o, ok := op.(*rt.Attention); ok {
		// The optional fused attention: f32 and f64.
		if dt := rt.OpDType(o); dt != rt.F32 && dt != rt.F64 {
			return unsupported(op, dt, "")
		}
		return nil
	}
	if o, ok := op.(*rt.Conv); ok && !o.DenseY() {
		// Image by image, the convolutions cost more than the engine's
		// copy into a Concat's output (a fire module at batch 8: 12.6-13.7
		// against 10.4-11.9 ms).
		return unsupported(op, o.X.DType, "Conv with its images StrideY apart (the engine then keeps the Concat's copy)")
	}
	if o, ok := op.(*rt.Conv); ok && o.Res.Buf != nil {
		// The residual (same dtype as Y; one overlapping Y is copied
		// first, see convOpRes).
		if o.Res.DType != o.Y.DType {
			return unsupported(op, o.Res.DType, "Res dtype differs from Y's")
		}
		c := *o
		c.Res = rt.Ref{}
		return rt.ReferenceSupport(BackendName, &c)
	}
	return rt.ReferenceSupport(BackendName, op)
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

// execute runs one validated op whose buffers Submit has checked.
func execute(op rt.Op) error {
	if rt.OpDType(op) == rt.F16 && !isElementwise(op) && !isIndexed(op) {
		return runF16(op)
	}
	return lower(op)
}

// kernel is an op made ready to run when it is recorded: its buffers
// resolved and, for elementwise ops, its loop nest planned, so that
// running it again allocates nothing.
type kernel interface{ run() error }

// opKernel runs an op through execute each time.
type opKernel struct{ op rt.Op }

func (k opKernel) run() error { return execute(k.op) }

// elementwisePlan plans an elementwise op (Unary, Binary, Where, Fill).
func elementwisePlan(op rt.Op) *ewPlan {
	switch o := op.(type) {
	case *rt.Unary:
		return unaryPlan(o, data(o.X), data(o.Y))
	case *rt.Binary:
		return binaryPlan(o, data(o.A), data(o.B), data(o.Y))
	case *rt.Where:
		return wherePlan(o, data(o.Cond), data(o.A), data(o.B), data(o.Y))
	case *rt.Fill:
		return fillPlan(o, data(o.Y))
	}
	return nil
}

// prepare returns the kernel of a validated op.
func prepare(op rt.Op) kernel {
	if isElementwise(op) {
		return elementwisePlan(op)
	}
	if o, ok := op.(*rt.Fused); ok {
		return fusedKernel(o)
	}
	return opKernel{op}
}

// lower turns one validated op into its device work: on the host that is
// running its kernel.
func lower(op rt.Op) error {
	switch o := op.(type) {
	case *rt.Unary, *rt.Binary, *rt.Where, *rt.Fill:
		elementwisePlan(op).exec()
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
		return gatherOp(o)
	case *rt.GatherElements:
		return gatherElementsOp(o)
	case *rt.ScatterElements:
		return scatterElementsOp(o)
	case *rt.TopK:
		topKOp(o)
	case *rt.OptimStep:
		optimOp(o)
	case *rt.Fused:
		fusedOp(o)
	case *rt.Attention:
		attentionOp(o)
	default:
		return unsupported(op, rt.OpDType(op), "unknown op")
	}
	return nil
}

// hostBuffer wraps scratch memory as an rt.Buffer for the f16 path.
func hostBuffer(b []byte) *Buffer { return &Buffer{size: int64(len(b)), data: b} }

// runF16 runs an f16 op by converting its f16 operands to f32 scratch,
// running the f32 kernel and converting the outputs back.
func runF16(op rt.Op) error {
	c := rt.CloneOp(op)
	fs := rt.Operands(c)
	type back struct {
		dst []uint16
		src []float32
	}
	var outs []back
	for _, f := range fs {
		r := f.Ref
		if r.Buf == nil || r.DType != rt.F16 {
			continue
		}
		src := data(*r)
		h := elems[uint16](src)
		if f.Strided { // strided view: convert its whole span
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
		n := int(f.Need)
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
		if f.Output {
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
