//go:build cgo

package clshim

import (
	"errors"
	"fmt"
	"math"

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
// capabilities (f64 needs cl_khr_fp64).
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
	return rt.ReferenceSupport(BackendName, op)
}

// field is one operand of an op with its linear extent.
type field struct {
	name string
	ref  *rt.Ref
	need int64 // elements read linearly from Off; -1 for a strided view
	// (0 for the strided Idx and Upd of the indexed ops, whose span
	// rt.CheckOp bounds)
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
		return []field{{"X", &o.X, -1}, {"Y", &o.Y, -1}}
	case *rt.Binary:
		return []field{{"A", &o.A, -1}, {"B", &o.B, -1}, {"Y", &o.Y, -1}}
	case *rt.Where:
		return []field{{"Cond", &o.Cond, -1}, {"A", &o.A, -1}, {"B", &o.B, -1}, {"Y", &o.Y, -1}}
	case *rt.Fill:
		return []field{{"Y", &o.Y, -1}}
	case *rt.Reduce:
		return []field{{"X", &o.X, prod(o.Outer, o.N, o.Inner)}, {"Y", &o.Y, prod(o.Outer, o.Inner)}}
	case *rt.Softmax:
		n := prod(o.Outer, o.N, o.Inner)
		return []field{{"X", &o.X, n}, {"Y", &o.Y, n}}
	case *rt.MatMul:
		return []field{
			{"A", &o.A, batchNeed(o.Batch, o.StrideA, o.M, o.K)},
			{"B", &o.B, batchNeed(o.Batch, o.StrideB, o.K, o.N)},
			{"Bias", &o.Bias, -1},
			{"Y", &o.Y, batchNeed(o.Batch, o.StrideY, o.M, o.N)},
		}
	case *rt.Conv:
		cg := -1
		if o.Groups > 0 {
			cg = o.C / o.Groups
		}
		return []field{
			{"X", &o.X, prod(o.N, o.C, o.H, o.W_)},
			{"W", &o.W, prod(o.K, cg, o.KH, o.KW)},
			{"Bias", &o.Bias, prod(o.K)},
			{"Y", &o.Y, prod(o.N, o.K, o.OH, o.OW)},
		}
	case *rt.ConvTranspose:
		kg := -1
		if o.Groups > 0 {
			kg = o.K / o.Groups
		}
		return []field{
			{"X", &o.X, prod(o.N, o.C, o.H, o.W_)},
			{"W", &o.W, prod(o.C, kg, o.KH, o.KW)},
			{"Bias", &o.Bias, prod(o.K)},
			{"Y", &o.Y, prod(o.N, o.K, o.OH, o.OW)},
		}
	case *rt.Pool:
		return []field{{"X", &o.X, prod(o.NC, o.H, o.W)}, {"Y", &o.Y, prod(o.NC, o.OH, o.OW)}}
	case *rt.Normalize:
		n := prod(o.Outer, o.N)
		return []field{{"X", &o.X, n}, {"Scale", &o.Scale, prod(o.N)}, {"Bias", &o.Bias, prod(o.N)}, {"Y", &o.Y, n}}
	case *rt.Gather:
		ni := o.Idx.Len()
		ny := int64(-1)
		if ni >= 0 && ni <= math.MaxInt32 {
			ny = prod(o.Outer, int(ni), o.Inner)
		}
		return []field{{"X", &o.X, prod(o.Outer, o.Axis, o.Inner)}, {"Idx", &o.Idx, ni}, {"Y", &o.Y, ny}}
	case *rt.GatherElements:
		return []field{{"X", &o.X, prod(o.Outer, o.Axis, o.Inner)}, {"Idx", &o.Idx, 0}, {"Y", &o.Y, prod(o.Outer, o.N, o.Inner)}}
	case *rt.ScatterElements:
		return []field{{"Idx", &o.Idx, 0}, {"Upd", &o.Upd, 0}, {"Y", &o.Y, prod(o.Outer, o.Axis, o.Inner)}}
	case *rt.TopK:
		n := prod(o.Outer, o.K, o.Inner)
		return []field{{"X", &o.X, prod(o.Outer, o.N, o.Inner)}, {"Values", &o.Values, n}, {"Indices", &o.Indices, n}}
	}
	return nil
}

func optional(name string) bool { return name == "Bias" || name == "Scale" }

// validate is what Launch checks: dtype support, rt.CheckOp, buffer
// ownership and the kernels' extent and parameter requirements.
func (d *device) validate(op rt.Op) error {
	fs := fields(op)
	for _, f := range fs {
		if f.ref.Buf == nil && !optional(f.name) {
			return fmt.Errorf("opencl: %s: operand %s has no buffer", op.OpName(), f.name)
		}
	}
	if err := d.supports(op); err != nil {
		return err
	}
	if err := rt.CheckOp(op); err != nil {
		return fmt.Errorf("opencl: %w", err)
	}
	ew := isElementwise(op)
	for _, f := range fs {
		r := f.ref
		if r.Buf == nil {
			continue
		}
		d.mu.Lock()
		_, err := d.memOf(r.Buf)
		d.mu.Unlock()
		if err != nil {
			return fmt.Errorf("opencl: %s: operand %s: %w", op.OpName(), f.name, err)
		}
		if ew || (f.need == -1 && f.name == "Bias") {
			continue
		}
		if f.need < 0 {
			return fmt.Errorf("opencl: %s: bad sizes for operand %s (negative or overflowing)", op.OpName(), f.name)
		}
		sz := int64(r.DType.Size())
		if r.Off < 0 || f.need > (r.Buf.Size()-r.Off)/sz {
			return fmt.Errorf("opencl: %s: operand %s: %d elements from byte %d exceed buffer of %d bytes", op.OpName(), f.name, f.need, r.Off, r.Buf.Size())
		}
	}
	switch o := op.(type) {
	case *rt.MatMul:
		if o.StrideA < 0 || o.StrideB < 0 || o.StrideY < 0 {
			return fmt.Errorf("opencl: MatMul: negative batch stride")
		}
		if o.M > math.MaxInt32 || o.N > math.MaxInt32 || o.K > math.MaxInt32 {
			return unsupported(op, o.A.DType, "dimension above 2^31")
		}
	case *rt.Conv:
		if o.N < 0 || o.C < 0 || o.H < 0 || o.W_ < 0 || o.K < 0 || o.OH < 0 || o.OW < 0 || o.KH < 0 || o.KW < 0 {
			return fmt.Errorf("opencl: Conv: negative size")
		}
	case *rt.ConvTranspose:
		if o.N < 0 || o.C < 0 || o.H < 0 || o.W_ < 0 || o.K < 0 || o.OH < 0 || o.OW < 0 || o.KH < 0 || o.KW < 0 {
			return fmt.Errorf("opencl: ConvTranspose: negative size")
		}
	case *rt.Pool:
		if o.NC < 0 || o.H < 0 || o.W < 0 || o.OH < 0 || o.OW < 0 {
			return fmt.Errorf("opencl: %s: negative size", op.OpName())
		}
		if o.Fn == rt.LpPool && o.P < 1 {
			return fmt.Errorf("opencl: Pool.Lp: P = %d, want >= 1", o.P)
		}
	case *rt.Gather:
		if o.Outer < 0 || o.Axis < 0 || o.Inner < 0 {
			return fmt.Errorf("opencl: Gather: negative size")
		}
	case *rt.Reduce:
		if o.Outer < 0 || o.N < 0 || o.Inner < 0 || o.N > math.MaxInt32 {
			return fmt.Errorf("opencl: %s: bad sizes", op.OpName())
		}
	case *rt.Softmax:
		if o.Outer < 0 || o.N < 0 || o.Inner < 0 || o.N > math.MaxInt32 {
			return fmt.Errorf("opencl: Softmax: bad sizes")
		}
	case *rt.Normalize:
		if o.Outer < 0 || o.N < 0 || o.N > math.MaxInt32 {
			return fmt.Errorf("opencl: Normalize: bad sizes")
		}
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
