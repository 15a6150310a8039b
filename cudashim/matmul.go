//go:build cgo

package cudashim

import (
	"fmt"

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
	cublas := l.d.cublas && o.K > 0 && fitsInt32(o.M, o.N, o.K, o.Batch, lda, ldb)
	if o.Res.Buf != nil && !cublas {
		l.err = unsupported(o, dt, "MatMul with a residual (Res) without cuBLAS")
		return
	}
	if cublas {
		// cuBLAS adds beta*C: C (Y) holds the bias, the residual, or
		// their sum (matMulResSupported: Beta 1 with both) first.
		beta := 0.0
		res := o.Res
		res.Shape, res.Strides = shapeY, []int{o.StrideY, o.N, 1}
		var bias rt.Ref
		if o.Bias.Buf != nil && o.Beta != 0 {
			bst := o.Bias.StridesOrContiguous()
			bias = o.Bias
			bias.Shape, bias.Strides = shapeY, []int{0, bst[0], bst[1]}
			beta = o.Beta
		}
		switch {
		case bias.Buf != nil && o.Res.Buf != nil:
			l.ew(o, byFloat(dt, kEwBinaryF, kEwBinaryF, kEwBinaryD), shapeY, []rt.Ref{bias, res, yView}, int64(rt.Add), 0, 0, 0)
		case bias.Buf != nil:
			l.ew(o, kEwCopy, shapeY, []rt.Ref{bias, yView}, 0, 0, 0, 0)
		case o.Res.Buf != nil:
			if o.Res.Buf != o.Y.Buf || o.Res.Off != o.Y.Off {
				l.ew(o, kEwCopy, shapeY, []rt.Ref{res, yView}, 0, 0, 0, 0)
			}
			beta = 1
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

// matMulResSupported reports whether a MatMul with a residual runs: on
// the cuBLAS path (Device.Supports checks that cuBLAS is there), with K
// > 0, and with Beta 1 where a bias is present too (C = Bias + Res).
func matMulResSupported(o *rt.MatMul) error {
	dt := o.A.DType
	c := *o
	c.Res = rt.Ref{}
	if err := rt.ReferenceSupport(BackendName, &c); err != nil {
		return err
	}
	switch {
	case o.Res.DType != o.Y.DType:
		return unsupported(o, dt, fmt.Sprintf("MatMul residual (Res) of dtype %s with Y %s", o.Res.DType, o.Y.DType))
	case o.K == 0:
		return unsupported(o, dt, "MatMul with a residual (Res) and K = 0")
	case o.Bias.Buf != nil && o.Beta != 1:
		return unsupported(o, dt, "MatMul with a residual (Res) and a bias scaled by Beta != 1")
	}
	return nil
}
