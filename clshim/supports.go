//go:build cgo

package clshim

import (
	"errors"
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// Supports returns nil when the device can run op, else an
// *rt.UnsupportedError or an invalid-argument error naming the op.
func (d *device) Supports(op rt.Op) error {
	if op == nil {
		return errors.New("opencl: nil op")
	}
	return d.supports(op)
}

func unsupported(op rt.Op, dt rt.DType, reason string) error {
	return &rt.UnsupportedError{Backend: BackendName, Op: op.OpName(), DType: dt, Reason: reason}
}

// supports mirrors the CPU backend's dtype rules, plus the device's
// capabilities (f64 needs cl_khr_fp64), and runs a Conv with a residual
// (rt.Conv.Res) of Y's dtype and a Conv whose images of Y and Res are
// StrideY apart (conv_gemm and conv_direct index them so).
func (d *device) supports(op rt.Op) error {
	dt := rt.OpDType(op)
	if !dt.Valid() {
		return unsupported(op, dt, "invalid dtype")
	}
	if !d.ent.caps.fp64 {
		_, refs := rt.Refs(op)
		for _, r := range refs {
			if r.DType == rt.F64 {
				return unsupported(op, rt.F64, "device "+d.ent.info.Name+" lacks cl_khr_fp64")
			}
		}
	}
	if o, ok := op.(*rt.MatMul); ok && o.Res.Buf != nil {
		return unsupported(op, dt, "MatMul with a residual (Res)")
	}
	if o, ok := op.(*rt.Conv); ok && o.Res.Buf != nil {
		// conv_gemm and conv_direct add the residual in their epilogue.
		if o.Res.DType != o.Y.DType {
			return unsupported(op, o.Res.DType, "Conv residual (Res) dtype differs from Y's")
		}
		c := *o
		c.Res = rt.Ref{}
		return d.supports(&c)
	}
	if rt.HalfWeights(op) {
		// f16 weights beside f32 activations: gemm.cl and conv.cl read
		// the weight with vload_half (W_HALF), which needs no cl_khr_fp16.
		if o, ok := op.(*rt.MatMul); ok && int(o.Act.Fn) >= rt.NumUnaryFns {
			return unsupported(op, rt.F32, "unknown activation")
		}
		if o, ok := op.(*rt.Conv); ok && int(o.Act.Fn) >= rt.NumUnaryFns {
			return unsupported(op, rt.F32, "unknown activation")
		}
		return nil
	}
	return rt.ReferenceSupport(BackendName, op)
}

// validate is what Launch checks: dtype support, rt.CheckOp, buffer
// ownership and the kernels' extent and parameter requirements.
func (d *device) validate(op rt.Op) error {
	// rt.CheckOp checks required operands, bounds, contiguity of linearly
	// read operands and sizes (all within int32, as the kernels index).
	if err := rt.CheckOp(op); err != nil {
		return fmt.Errorf("opencl: %w", err)
	}
	if err := d.supports(op); err != nil {
		return err
	}
	var err error
	rt.MapRefs(op, func(name string, r *rt.Ref) {
		if err != nil {
			return
		}
		d.mu.Lock()
		_, e := d.memOf(r.Buf)
		d.mu.Unlock()
		if e != nil {
			err = fmt.Errorf("opencl: %s: operand %s: %w", op.OpName(), name, e)
		}
	})
	return err
}
