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
	args   []byte
	gemm   *gemmCall
	dnn    *dnnConv // cuDNN convolution (cudnn.go)
}

// Supports reports whether the device can run op with its dtypes.
func (d *Device) Supports(op rt.Op) error {
	if op == nil {
		return errors.New("cuda: nil op")
	}
	if err := supports(op); err != nil {
		return err
	}
	return d.indexedSupported(op)
}

func unsupported(op rt.Op, dt rt.DType, reason string) error {
	return &rt.UnsupportedError{Backend: BackendName, Op: op.OpName(), DType: dt, Reason: reason}
}

// supports applies the reference (CPU) dtype rules, which this backend
// implements in full.
func supports(op rt.Op) error { return rt.ReferenceSupport(BackendName, op) }

// field is one operand with the number of elements a kernel reads
// linearly from its offset (-1: a strided view checked by rt.CheckOp; 0
// for the strided Idx and Upd of the indexed ops, whose span rt.CheckOp
// bounds).
type field struct {
	name string
	ref  rt.Ref
	need int64
}

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

func batchNeed(batch, stride, m, n int) int64 {
	a, b := prod(batch-1, stride), prod(m, n)
	if a < 0 || b < 0 || a > math.MaxInt64/2 || b > math.MaxInt64/2 {
		return -1
	}
	return a + b
}

func fields(op rt.Op) []field {
	switch o := op.(type) {
	case *rt.Unary:
		return []field{{"X", o.X, -1}, {"Y", o.Y, -1}}
	case *rt.Binary:
		return []field{{"A", o.A, -1}, {"B", o.B, -1}, {"Y", o.Y, -1}}
	case *rt.Where:
		return []field{{"Cond", o.Cond, -1}, {"A", o.A, -1}, {"B", o.B, -1}, {"Y", o.Y, -1}}
	case *rt.Fill:
		return []field{{"Y", o.Y, -1}}
	case *rt.Reduce:
		return []field{{"X", o.X, prod(o.Outer, o.N, o.Inner)}, {"Y", o.Y, prod(o.Outer, o.Inner)}}
	case *rt.Softmax:
		n := prod(o.Outer, o.N, o.Inner)
		return []field{{"X", o.X, n}, {"Y", o.Y, n}}
	case *rt.MatMul:
		return []field{
			{"A", o.A, batchNeed(o.Batch, o.StrideA, o.M, o.K)},
			{"B", o.B, batchNeed(o.Batch, o.StrideB, o.K, o.N)},
			{"Bias", o.Bias, -1},
			{"Y", o.Y, batchNeed(o.Batch, o.StrideY, o.M, o.N)},
		}
	case *rt.Conv:
		cg := -1
		if o.Groups > 0 {
			cg = o.C / o.Groups
		}
		return []field{
			{"X", o.X, prod(o.N, o.C, o.H, o.W_)},
			{"W", o.W, prod(o.K, cg, o.KH, o.KW)},
			{"Bias", o.Bias, prod(o.K)},
			{"Y", o.Y, prod(o.N, o.K, o.OH, o.OW)},
		}
	case *rt.ConvTranspose:
		kg := -1
		if o.Groups > 0 {
			kg = o.K / o.Groups
		}
		return []field{
			{"X", o.X, prod(o.N, o.C, o.H, o.W_)},
			{"W", o.W, prod(o.C, kg, o.KH, o.KW)},
			{"Bias", o.Bias, prod(o.K)},
			{"Y", o.Y, prod(o.N, o.K, o.OH, o.OW)},
		}
	case *rt.Pool:
		return []field{{"X", o.X, prod(o.NC, o.H, o.W)}, {"Y", o.Y, prod(o.NC, o.OH, o.OW)}}
	case *rt.Normalize:
		n := prod(o.Outer, o.N)
		return []field{{"X", o.X, n}, {"Scale", o.Scale, prod(o.N)}, {"Bias", o.Bias, prod(o.N)}, {"Y", o.Y, n}}
	case *rt.Gather:
		ni := o.Idx.Len()
		ny := int64(-1)
		if ni >= 0 && ni <= math.MaxInt32 {
			ny = prod(o.Outer, int(ni), o.Inner)
		}
		return []field{{"X", o.X, prod(o.Outer, o.Axis, o.Inner)}, {"Idx", o.Idx, ni}, {"Y", o.Y, ny}}
	case *rt.GatherElements:
		return []field{{"X", o.X, prod(o.Outer, o.Axis, o.Inner)}, {"Idx", o.Idx, 0}, {"Y", o.Y, prod(o.Outer, o.N, o.Inner)}}
	case *rt.ScatterElements:
		return []field{{"Idx", o.Idx, 0}, {"Upd", o.Upd, 0}, {"Y", o.Y, prod(o.Outer, o.Axis, o.Inner)}}
	case *rt.TopK:
		n := prod(o.Outer, o.K, o.Inner)
		return []field{{"X", o.X, prod(o.Outer, o.N, o.Inner)}, {"Values", o.Values, n}, {"Indices", o.Indices, n}}
	}
	return nil
}

func isElementwise(op rt.Op) bool {
	switch op.(type) {
	case *rt.Unary, *rt.Binary, *rt.Where, *rt.Fill:
		return true
	}
	return false
}

// validate is what Launch checks before lowering: dtype support,
// rt.CheckOp, buffer ownership and every linear extent.
func (d *Device) validate(op rt.Op) error {
	for _, f := range fields(op) {
		if f.ref.Buf == nil && f.name != "Bias" && f.name != "Scale" {
			return fmt.Errorf("cuda: %s: operand %s has no buffer", op.OpName(), f.name)
		}
	}
	if err := supports(op); err != nil {
		return err
	}
	if err := d.indexedSupported(op); err != nil {
		return err
	}
	if err := rt.CheckOp(op); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	ew := isElementwise(op)
	for _, f := range fields(op) {
		r := f.ref
		if r.Buf == nil {
			continue
		}
		if _, err := d.bufferOf(r.Buf); err != nil {
			return fmt.Errorf("cuda: %s: operand %s: %w", op.OpName(), f.name, err)
		}
		if ew || (f.need == -1 && f.name == "Bias") {
			continue
		}
		if f.need < 0 {
			return fmt.Errorf("cuda: %s: bad sizes for operand %s (negative or overflowing)", op.OpName(), f.name)
		}
		sz := int64(r.DType.Size())
		if r.Off < 0 || f.need > (r.Buf.Size()-r.Off)/sz {
			return fmt.Errorf("cuda: %s: operand %s: %d elements from byte %d exceed buffer of %d bytes", op.OpName(), f.name, f.need, r.Off, r.Buf.Size())
		}
	}
	switch o := op.(type) {
	case *rt.MatMul:
		if o.StrideA < 0 || o.StrideB < 0 || o.StrideY < 0 {
			return fmt.Errorf("cuda: MatMul: negative batch stride")
		}
	case *rt.Conv:
		if o.N < 0 || o.C < 0 || o.H < 0 || o.W_ < 0 || o.K < 0 || o.OH < 0 || o.OW < 0 || o.KH < 0 || o.KW < 0 {
			return fmt.Errorf("cuda: Conv: negative size")
		}
		if prod(o.N, o.C, o.H, o.W_) > math.MaxInt32 || prod(o.N, o.K, o.OH, o.OW) > math.MaxInt32 ||
			prod(o.K, o.C/o.Groups, o.KH, o.KW) > math.MaxInt32 {
			return unsupported(op, o.X.DType, "tensors of 2^31 or more elements")
		}
	case *rt.ConvTranspose:
		if o.N < 0 || o.C < 0 || o.H < 0 || o.W_ < 0 || o.K < 0 || o.OH < 0 || o.OW < 0 || o.KH < 0 || o.KW < 0 {
			return fmt.Errorf("cuda: ConvTranspose: negative size")
		}
	case *rt.Pool:
		if o.NC < 0 || o.H < 0 || o.W < 0 || o.OH < 0 || o.OW < 0 {
			return fmt.Errorf("cuda: %s: negative size", op.OpName())
		}
		if o.Fn == rt.LpPool && o.P < 1 {
			return fmt.Errorf("cuda: Pool.Lp: P = %d, want >= 1", o.P)
		}
	case *rt.Gather:
		if o.Outer < 0 || o.Axis < 0 || o.Inner < 0 {
			return fmt.Errorf("cuda: Gather: negative size")
		}
	case *rt.Reduce:
		if o.Outer < 0 || o.N < 0 || o.Inner < 0 {
			return fmt.Errorf("cuda: %s: negative size", op.OpName())
		}
	case *rt.Softmax:
		if o.Outer < 0 || o.N < 0 || o.Inner < 0 {
			return fmt.Errorf("cuda: Softmax: negative size")
		}
	case *rt.Normalize:
		if o.Outer < 0 || o.N < 0 {
			return fmt.Errorf("cuda: Normalize: negative size")
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
// indexed.go).
func (d *Device) lower(op rt.Op) ([]launch, []*Buffer, error) {
	l := &lowering{d: d}
	switch o := op.(type) {
	case *rt.Unary:
		l.unary(o)
	case *rt.Binary:
		l.binary(o)
	case *rt.Where:
		l.where(o)
	case *rt.Fill:
		l.fill(o)
	case *rt.Reduce:
		l.reduce(o)
	case *rt.Softmax:
		l.softmax(o)
	case *rt.Normalize:
		l.normalize(o)
	case *rt.MatMul:
		l.matmul(o)
	case *rt.Conv:
		l.conv(o)
	case *rt.ConvTranspose:
		l.convT(o)
	case *rt.Pool:
		l.pool(o)
	case *rt.Gather:
		l.gather(o)
	case *rt.GatherElements:
		l.gatherElements(o)
	case *rt.ScatterElements:
		l.scatterElements(o)
	case *rt.TopK:
		l.topK(o)
	default:
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
