//go:build cgo

package cudashim

import (
	"errors"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// launch is one recorded kernel launch or cuBLAS call of an op.
type launch struct {
	kernel int // index into Device.fns; -1 for gemm
	grid   [3]uint32
	block  uint32 // threads per block; 0 is nt
	args   []byte
	gemm   *gemmCall
	dnn    *dnnConv // cuDNN convolution (cudnn.go)
	// statusAt, when > 0, is the byte offset in args of the kernel's
	// index-status fields (u64 status, i64 tag), which Stream.Launch sets.
	statusAt int
	// scratchAt, when > 0, is the byte offset in args of the address of
	// the stream's scratch buffer (the split-K partial sums, convsk.go),
	// which Stream.prepare sets; scratch is the bytes the launch needs.
	scratchAt int
	scratch   int64
}

// Supports reports whether the device can run op with its dtypes.
func (d *Device) Supports(op rt.Op) error {
	if op == nil {
		return errors.New("cuda: nil op")
	}
	if err := supports(op); err != nil {
		return err
	}
	if o, ok := op.(*rt.MatMul); ok && o.Res.Buf != nil && !d.cublas {
		return unsupported(op, o.A.DType, "MatMul with a residual (Res) without cuBLAS")
	}
	if err := d.optimSupported(op); err != nil {
		return err
	}
	return d.indexedSupported(op)
}

func unsupported(op rt.Op, dt rt.DType, reason string) error {
	return &rt.UnsupportedError{Backend: BackendName, Op: op.OpName(), DType: dt, Reason: reason}
}

// supports applies the reference (CPU) dtype rules, which this backend
// implements in full.
func supports(op rt.Op) error {
	if o, ok := op.(*rt.Attention); ok {
		return attentionSupported(o)
	}
	// Images StrideY apart are refused: cuDNN takes a strided output
	// descriptor, but squeezenet1_1 ran 2.6-3.1x slower on an H100 with
	// its expand Convs so (cuDNN, 1.69 / 5.82 ms at batch 8 / 32) than on
	// the built-in kernels plus the Concat's copies (0.65 / 1.86 ms).
	if o, ok := op.(*rt.Conv); ok && !o.DenseY() {
		return unsupported(op, o.X.DType, "Conv with its images StrideY apart (the engine then keeps the Concat's copy)")
	}
	if o, ok := op.(*rt.Conv); ok && o.Res.Buf != nil {
		return convResSupported(o)
	}
	if o, ok := op.(*rt.MatMul); ok && o.Res.Buf != nil {
		return matMulResSupported(o)
	}
	return rt.ReferenceSupport(BackendName, op)
}

// validate is what Launch checks before lowering: dtype support,
// rt.CheckOp (which checks every operand against the table of
// rt.Operands: presence, bounds, contiguity and linear extents), buffer
// ownership and this backend's own size limits.
func (d *Device) validate(op rt.Op) error {
	ops := rt.Operands(op)
	for _, f := range ops {
		if f.Ref.Buf == nil && !f.Optional {
			return fmt.Errorf("cuda: %s: operand %s has no buffer", op.OpName(), f.Name)
		}
	}
	if err := supports(op); err != nil {
		return err
	}
	if err := d.indexedSupported(op); err != nil {
		return err
	}
	if err := d.optimSupported(op); err != nil {
		return err
	}
	if err := rt.CheckOp(op); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	for _, f := range ops {
		if f.Ref.Buf == nil {
			continue
		}
		if _, err := d.bufferOf(f.Ref.Buf); err != nil {
			return fmt.Errorf("cuda: %s: operand %s: %w", op.OpName(), f.Name, err)
		}
	}
	if o, ok := op.(*rt.Conv); ok {
		if rt.Extent(o.N, o.C, o.H, o.Width) > math.MaxInt32 || rt.Extent(o.N, o.K, o.OH, o.OW) > math.MaxInt32 ||
			rt.Extent(o.K, o.C/o.Groups, o.KH, o.KW) > math.MaxInt32 {
			return unsupported(op, o.X.DType, "tensors of 2^31 or more elements")
		}
	}
	return nil
}

// lowering collects an op's launches and the buffers they use.
type lowering struct {
	d    *Device
	out  []launch
	bufs []*Buffer
	err  error
}

// ptr returns the device address of r's element [0, ...] (0 for an
// absent optional ref).
func (l *lowering) ptr(r rt.Ref) uint64 {
	if r.Buf == nil {
		return 0
	}
	b, err := l.d.bufferOf(r.Buf)
	if err != nil {
		if l.err == nil {
			l.err = err
		}
		return 0
	}
	l.bufs = append(l.bufs, b)
	p, _ := b.devptr()
	return p + uint64(r.Off)
}

func (l *lowering) kernel(k int, grid [3]uint32, args []byte) {
	l.out = append(l.out, launch{kernel: k, grid: grid, args: args})
}

func byFloat(dt rt.DType, h, f, d int) int {
	switch dt {
	case rt.F16:
		return h
	case rt.F64:
		return d
	}
	return f
}

func gridRows(rows int) [3]uint32 {
	return [3]uint32{uint32(max(1, min(rows, 65535))), 1, 1}
}

// rowsMin is the row length from which one block per row pays off.
const rowsMin = 32

// lower turns a validated op into launches: it hands the op to its
// family's file (elementwise.go, reduce.go, matmul.go, conv.go, pool.go,
// indexed.go, optim.go).
func (d *Device) lower(op rt.Op) ([]launch, []*Buffer, error) {
	l := &lowering{d: d}
	if o, ok := op.(*rt.Attention); ok { // optional: not in rt.OpLowerer
		l.attention(o)
	} else if !rt.LowerOp(op, l) {
		return nil, nil, unsupported(op, rt.OpDType(op), "unknown op")
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	return l.out, l.bufs, nil
}

func fitsInt32(v ...int) bool {
	for _, x := range v {
		if x < 0 || x > math.MaxInt32 {
			return false
		}
	}
	return true
}

func tiles(n int, t int) uint32 { return uint32((int64(n) + int64(t) - 1) / int64(t)) }
