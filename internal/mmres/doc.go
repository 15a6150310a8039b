// Package mmres checks a backend's rt.MatMul with a residual (MatMul.Res:
// Y = Act(Alpha*op(A)@op(B) + Beta*Bias + Res)) against a float64
// reference: the residual apart from Y and in place (Res is Y), with and
// without a bias and an activation, batched with a gap between the
// batches' results, transposed operands, at odd sizes. Each backend that
// runs a MatMul with Res calls [Run] with its device (under each kernel
// choice it can force); the others call [Refused].
package mmres
