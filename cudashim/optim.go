//go:build cgo

package cudashim

import (
	"github.com/vrun-go/vrun/rt"
)

// Lowering of rt.OptimStep, which runs on the kernels of optim.ptx
// (optim_f for f32, optim_d for f64), whose argument struct is OptimArgs
// of kernels/optim.cu.

// optimSupported refuses OptimStep while optim.ptx is not loaded.
func (d *Device) optimSupported(op rt.Op) error {
	if _, ok := op.(*rt.OptimStep); ok && d.noOptim != "" {
		return unsupported(op, rt.OpDType(op), d.noOptim)
	}
	return nil
}

func (l *lowering) OptimStep(o *rt.OptimStep) {
	n := int64(o.N)
	if n == 0 {
		return
	}
	a := (&argw{}).u(l.ptr(o.P)).u(l.ptr(o.G)).u(l.ptr(o.S1)).u(l.ptr(o.S2)).u(l.ptr(o.S3)).u(l.ptr(o.H)).u(l.ptr(o.Scale)).
		i(n).i(int64(o.Fn)).i(int64(o.Flags()))
	for _, c := range o.Coefs() {
		a.f(c)
	}
	k := kOptimF
	if o.P.DType == rt.F64 {
		k = kOptimD
	}
	l.kernel(k, [3]uint32{grid1(n), 1, 1}, a.b)
}
