//go:build cgo

package cudashim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

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

func (l *lowering) Unary(o *rt.Unary) {
	refs := []rt.Ref{o.X, o.Y}
	switch {
	case o.Fn == rt.Copy && o.X.DType == o.Y.DType:
		l.ew(o, kEwCopy, o.Y.Shape, refs, 0, 0, 0, 0)
	case o.Fn == rt.Copy:
		l.ew(o, kEwCast, o.Y.Shape, refs, 0, 0, 0, 0)
	default:
		l.ew(o, unaryKernel(o.X.DType), o.Y.Shape, refs, int64(o.Fn), o.Alpha, o.Beta, 0)
	}
}

func (l *lowering) Binary(o *rt.Binary) {
	k := kEwBinaryI
	switch o.A.DType {
	case rt.F64:
		k = kEwBinaryD
	case rt.F32, rt.F16:
		k = kEwBinaryF
	}
	l.ew(o, k, o.Y.Shape, []rt.Ref{o.A, o.B, o.Y}, int64(o.Fn), 0, 0, 0)
}

func (l *lowering) Where(o *rt.Where) {
	l.ew(o, kEwWhere, o.Y.Shape, []rt.Ref{o.Cond, o.A, o.B, o.Y}, 0, 0, 0, 0)
}

func (l *lowering) Fill(o *rt.Fill) {
	l.ew(o, kEwFill, o.Y.Shape, []rt.Ref{o.Y}, 0, 0, 0, rt.FillBits(o.Y.DType, o.Value))
}
