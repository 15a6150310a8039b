//go:build cgo

package cudashim

import (
	"github.com/vrun-go/vrun/rt"
)

// gemmCall is a cuBLAS strided batched GEMM in cuBLAS's column-major
// terms: C[m×n] = alpha op(A)[m×k] op(B)[k×n] + beta C.
type gemmCall struct {
	dt          rt.DType // F32, F16 or F64
	ta, tb      bool
	m, n, k     int
	alpha, beta float64
	a, b, c     uint64
	lda, ldb    int
	ldc         int
	sa, sb, sc  int64
	batch       int
}

func (l *lowering) MatMul(o *rt.MatMul) {
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
		g := &gemmCall{dt: dt, ta: o.TransB, tb: o.TransA, m: o.N, n: o.M, k: o.K,
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
