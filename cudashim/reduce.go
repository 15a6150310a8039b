//go:build cgo

package cudashim

import (
	"github.com/vrun-go/vrun/rt"
)

func (l *lowering) Reduce(o *rt.Reduce) {
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

func (l *lowering) Softmax(o *rt.Softmax) {
	if o.Outer*o.Inner <= 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).ints(o.Outer, o.N, o.Inner).i(b2i(o.Log)).b
	if o.Inner == 1 && o.N >= rowsMin {
		l.kernel(byFloat(o.X.DType, kSoftmaxRowsH, kSoftmaxRowsF, kSoftmaxRowsD), gridRows(o.Outer), args)
	} else {
		l.kernel(byFloat(o.X.DType, kSoftmaxColsH, kSoftmaxColsF, kSoftmaxColsD), [3]uint32{grid1(int64(o.Outer) * int64(o.Inner)), 1, 1}, args)
	}
}

func (l *lowering) Normalize(o *rt.Normalize) {
	if o.Outer <= 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).u(l.ptr(o.Scale)).u(l.ptr(o.Bias)).ints(o.Outer, o.N).f(o.Eps).b
	l.kernel(byFloat(o.X.DType, kNormalizeH, kNormalizeF, kNormalizeD), gridRows(o.Outer), args)
}
