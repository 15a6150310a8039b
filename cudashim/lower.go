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

// gemmCall is a cuBLAS strided batched GEMM in cuBLAS's column-major
// terms: C[m×n] = alpha op(A)[m×k] op(B)[k×n] + beta C.
type gemmCall struct {
	dt          int // rt.DType: 1 f32, 2 f16, 3 f64
	ta, tb      bool
	m, n, k     int
	alpha, beta float64
	a, b, c     uint64
	lda, ldb    int
	ldc         int
	sa, sb, sc  int64
	batch       int
}

// Supports reports whether the device can run op with its dtypes.
func (d *Device) Supports(op rt.Op) error {
	if op == nil {
		return errors.New("cuda: nil op")
	}
	if err := supports(op); err != nil {
		return err
	}
	return d.extraSupported(op)
}

// isExtra reports whether op runs on a kernel of extra.ptx.
func isExtra(op rt.Op) bool {
	switch op.(type) {
	case *rt.GatherElements, *rt.ScatterElements, *rt.TopK:
		return true
	}
	return false
}

// extraSupported refuses the ops of extra.ptx while it is not loaded.
func (d *Device) extraSupported(op rt.Op) error {
	if d.noExtra != "" && isExtra(op) {
		return unsupported(op, rt.OpDType(op), d.noExtra)
	}
	return nil
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
	if err := d.extraSupported(op); err != nil {
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

// ew records an elementwise kernel over shape with the given operands.
func (l *lowering) ew(op rt.Op, k int, shape []int, refs []rt.Ref, fn int64, alpha, beta float64, bits uint64) {
	strides := make([][]int, len(refs))
	ptrs := make([]uint64, len(refs))
	dts := make([]int64, len(refs))
	for i, r := range refs {
		strides[i] = r.StridesOrContiguous()
		ptrs[i] = l.ptr(r)
		dts[i] = int64(r.DType)
	}
	sp, ok := coalesce(shape, strides...)
	if !ok {
		if l.err == nil {
			l.err = unsupported(op, rt.OpDType(op), fmt.Sprintf("strided view of rank > %d after merging contiguous dims", maxRank))
		}
		return
	}
	if sp.n == 0 {
		return
	}
	l.kernel(k, [3]uint32{grid1(sp.n), 1, 1}, ewArgs(sp, ptrs, dts, fn, alpha, beta, bits))
}

// unaryKernel picks the unary kernel for a same-dtype function of dt.
func unaryKernel(dt rt.DType) int {
	switch dt {
	case rt.F64:
		return kEwUnaryD
	case rt.F32, rt.F16:
		return kEwUnaryF
	}
	return kEwUnaryI
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

// lower turns a validated op into launches.
func (d *Device) lower(op rt.Op) ([]launch, []*Buffer, error) {
	l := &lowering{d: d}
	switch o := op.(type) {
	case *rt.Unary:
		refs := []rt.Ref{o.X, o.Y}
		switch {
		case o.Fn == rt.Copy && o.X.DType == o.Y.DType:
			l.ew(op, kEwCopy, o.Y.Shape, refs, 0, 0, 0, 0)
		case o.Fn == rt.Copy:
			l.ew(op, kEwCast, o.Y.Shape, refs, 0, 0, 0, 0)
		default:
			l.ew(op, unaryKernel(o.X.DType), o.Y.Shape, refs, int64(o.Fn), o.Alpha, o.Beta, 0)
		}
	case *rt.Binary:
		k := kEwBinaryI
		switch o.A.DType {
		case rt.F64:
			k = kEwBinaryD
		case rt.F32, rt.F16:
			k = kEwBinaryF
		}
		l.ew(op, k, o.Y.Shape, []rt.Ref{o.A, o.B, o.Y}, int64(o.Fn), 0, 0, 0)
	case *rt.Where:
		l.ew(op, kEwWhere, o.Y.Shape, []rt.Ref{o.Cond, o.A, o.B, o.Y}, 0, 0, 0, 0)
	case *rt.Fill:
		l.ew(op, kEwFill, o.Y.Shape, []rt.Ref{o.Y}, 0, 0, 0, fillBits(int64(o.Y.DType), o.Value))
	case *rt.Reduce:
		l.reduce(o)
	case *rt.Softmax:
		if o.Outer*o.Inner > 0 {
			args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).ints(o.Outer, o.N, o.Inner).i(b2i(o.Log)).b
			if o.Inner == 1 && o.N >= rowsMin {
				l.kernel(byFloat(o.X.DType, kSoftmaxRowsH, kSoftmaxRowsF, kSoftmaxRowsD), gridRows(o.Outer), args)
			} else {
				l.kernel(byFloat(o.X.DType, kSoftmaxColsH, kSoftmaxColsF, kSoftmaxColsD), [3]uint32{grid1(int64(o.Outer) * int64(o.Inner)), 1, 1}, args)
			}
		}
	case *rt.Normalize:
		if o.Outer > 0 {
			args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).u(l.ptr(o.Scale)).u(l.ptr(o.Bias)).ints(o.Outer, o.N).f(o.Eps).b
			l.kernel(byFloat(o.X.DType, kNormalizeH, kNormalizeF, kNormalizeD), gridRows(o.Outer), args)
		}
	case *rt.Gather:
		n := int64(o.Outer) * o.Idx.Len() * int64(o.Inner)
		if n > 0 {
			args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Idx)).u(l.ptr(o.Y)).
				ints(o.Outer, o.Axis, o.Inner).i(o.Idx.Len()).i(int64(o.X.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).b
			l.kernel(kGather, [3]uint32{grid1(n), 1, 1}, args)
		}
	case *rt.GatherElements, *rt.ScatterElements, *rt.TopK:
		l.indexed(op)
	case *rt.MatMul:
		l.matmul(o)
	case *rt.Conv:
		l.conv(o)
	case *rt.ConvTranspose:
		n := prod(o.N, o.K, o.OH, o.OW)
		if n > 0 {
			args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.W)).u(l.ptr(o.Bias)).u(l.ptr(o.Y)).
				ints(o.N, o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
					o.DilH, o.DilW, o.Groups, 0).f(0).f(0).b
			l.kernel(byFloat(o.X.DType, kConvtH, kConvtF, kConvtD), [3]uint32{grid1(n), 1, 1}, args)
		}
	case *rt.Pool:
		n := prod(o.NC, o.OH, o.OW)
		if n > 0 {
			args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).
				ints(o.NC, o.H, o.W, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.PadB, o.PadR,
					o.DilH, o.DilW).i(b2i(o.CountIncludePad)).ints(o.P, int(o.Fn)).b
			l.kernel(byFloat(o.X.DType, kPoolH, kPoolF, kPoolD), [3]uint32{grid1(n), 1, 1}, args)
		}
	default:
		return nil, nil, unsupported(op, rt.OpDType(op), "unknown op")
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	return l.out, l.bufs, nil
}

func (l *lowering) reduce(o *rt.Reduce) {
	tot := int64(o.Outer) * int64(o.Inner)
	if tot == 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).ints(o.Outer, o.N, o.Inner, int(o.Fn)).
		i(b2i(o.SelectLast)).i(int64(o.X.DType)).i(int64(o.Y.DType)).b
	arg := o.Fn == rt.ArgMax || o.Fn == rt.ArgMin
	switch {
	case !o.X.DType.IsFloat():
		l.kernel(kReduceInt, [3]uint32{grid1(tot), 1, 1}, args)
	case o.Inner == 1 && !arg && o.N >= rowsMin:
		l.kernel(byFloat(o.X.DType, kReduceRowsH, kReduceRowsF, kReduceRowsD), gridRows(o.Outer), args)
	default:
		l.kernel(byFloat(o.X.DType, kReduceColsH, kReduceColsF, kReduceColsD), [3]uint32{grid1(tot), 1, 1}, args)
	}
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

func (l *lowering) matmul(o *rt.MatMul) {
	if o.M == 0 || o.N == 0 {
		return
	}
	dt := o.A.DType
	shapeY := []int{o.Batch, o.M, o.N}
	yView := o.Y
	yView.Shape, yView.Strides = shapeY, []int{o.StrideY, o.N, 1}
	lda, ldb := o.K, o.N
	if o.TransA {
		lda = o.M
	}
	if o.TransB {
		ldb = o.K
	}
	if l.d.cublas && o.K > 0 && fitsInt32(o.M, o.N, o.K, o.Batch, lda, ldb) {
		beta := 0.0
		if o.Bias.Buf != nil && o.Beta != 0 {
			bst := o.Bias.StridesOrContiguous()
			bias := o.Bias
			bias.Shape, bias.Strides = shapeY, []int{0, bst[0], bst[1]}
			l.ew(o, kEwCopy, shapeY, []rt.Ref{bias, yView}, 0, 0, 0, 0)
			beta = o.Beta
		}
		// Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T.
		g := &gemmCall{dt: int(dt), ta: o.TransB, tb: o.TransA, m: o.N, n: o.M, k: o.K,
			alpha: o.Alpha, beta: beta,
			a: l.ptr(o.B), lda: ldb, sa: int64(o.StrideB),
			b: l.ptr(o.A), ldb: lda, sb: int64(o.StrideA),
			c: l.ptr(o.Y), ldc: o.N, sc: int64(o.StrideY), batch: o.Batch}
		l.out = append(l.out, launch{kernel: -1, gemm: g})
		if o.Act.Fn != rt.Copy {
			l.ew(o, unaryKernel(dt), shapeY, []rt.Ref{yView, yView}, int64(o.Act.Fn), o.Act.Alpha, o.Act.Beta, 0)
		}
		return
	}
	var brs, bcs int
	if o.Bias.Buf != nil {
		bst := o.Bias.StridesOrContiguous()
		brs, bcs = bst[0], bst[1]
	}
	args := (&argw{}).u(l.ptr(o.A)).u(l.ptr(o.B)).u(l.ptr(o.Y)).u(l.ptr(o.Bias)).
		ints(o.Batch, o.M, o.N, o.K, lda, ldb).i(b2i(o.TransA)).i(b2i(o.TransB)).
		ints(o.StrideA, o.StrideB, o.StrideY, brs, bcs, int(o.Act.Fn)).
		f(o.Alpha).f(o.Beta).f(o.Act.Alpha).f(o.Act.Beta).b
	grid := [3]uint32{tiles(o.N, 64), min(tiles(o.M, 64), 65535), uint32(min(o.Batch, 65535))}
	l.kernel(byFloat(dt, kGemmH, kGemmF, kGemmD), grid, args)
}

func (l *lowering) conv(o *rt.Conv) {
	cols := prod(o.N, o.OH, o.OW)
	if cols == 0 || o.K == 0 {
		return
	}
	if l.dnnConv(o) {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.W)).u(l.ptr(o.Bias)).u(l.ptr(o.Y)).
		ints(o.N, o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
			o.DilH, o.DilW, o.Groups, int(o.Act.Fn)).f(o.Act.Alpha).f(o.Act.Beta).b
	kg := o.K / o.Groups
	grid := [3]uint32{tiles(int(cols), 64), min(tiles(kg, 64), 65535), uint32(min(o.Groups, 65535))}
	l.kernel(byFloat(o.X.DType, kConvH, kConvF, kConvD), grid, args)
}

// strides3 returns the element strides of a [outer, n, inner] view.
func strides3(r rt.Ref) (s0, s1, s2 int64) {
	st := r.StridesOrContiguous()
	return int64(st[0]), int64(st[1]), int64(st[2])
}

// indexed lowers GatherElements, ScatterElements and TopK to the kernels
// of extra.ptx; the argument structs are GatherElArgs, ScatterElArgs and
// TopKArgs of kernels/extra.cu.
func (l *lowering) indexed(op rt.Op) {
	switch o := op.(type) {
	case *rt.GatherElements:
		n := int64(o.Outer) * int64(o.N) * int64(o.Inner)
		if n == 0 {
			return
		}
		s0, s1, s2 := strides3(o.Idx)
		args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Idx)).u(l.ptr(o.Y)).
			ints(o.Outer, o.Axis, o.N, o.Inner).i(s0).i(s1).i(s2).
			i(int64(o.X.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).b
		l.kernel(kGatherElements, [3]uint32{grid1(n), 1, 1}, args)
	case *rt.ScatterElements:
		cols := int64(o.Outer) * int64(o.Inner)
		if cols == 0 || o.N == 0 || o.Axis == 0 {
			return
		}
		is0, is1, is2 := strides3(o.Idx)
		us0, us1, us2 := strides3(o.Upd)
		args := (&argw{}).u(l.ptr(o.Y)).u(l.ptr(o.Idx)).u(l.ptr(o.Upd)).
			ints(o.Outer, o.Axis, o.N, o.Inner).i(is0).i(is1).i(is2).i(us0).i(us1).i(us2).
			i(int64(o.Y.DType)).i(int64(o.Y.DType.Size())).i(b2i(o.Idx.DType == rt.I64)).i(int64(o.Fn)).b
		l.kernel(kScatterElements, [3]uint32{grid1(cols), 1, 1}, args)
	case *rt.TopK:
		n := int64(o.Outer) * int64(o.N) * int64(o.Inner)
		if n == 0 || o.K == 0 {
			return
		}
		args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Values)).u(l.ptr(o.Indices)).
			ints(o.Outer, o.N, o.Inner, o.K).i(int64(o.X.DType)).i(b2i(o.Largest)).b
		l.kernel(kTopK, [3]uint32{grid1(n), 1, 1}, args)
	}
}
