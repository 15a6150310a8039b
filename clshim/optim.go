//go:build cgo

package clshim

import (
	"github.com/vrun-go/vrun/rt"
)

// lowerOptim lowers rt.OptimStep to one launch of kernels/optim.cl.
func (d *device) lowerOptim(o *rt.OptimStep) (*launchSpec, error) {
	if o.N == 0 {
		return &launchSpec{}, nil
	}
	dt := o.P.DType
	a, err := d.kernel(o, "optim.cl", typeDefs(dt), "optim_step")
	if err != nil {
		return nil, err
	}
	a.i64(int64(o.N))
	a.i32(int(o.Fn))
	a.i32(int(o.Flags()))
	a.ref(d, o.P, o.G, o.S1, o.S2, o.S3, o.H, o.Scale)
	for _, c := range o.Coefs() {
		a.acc(dt, c)
	}
	return d.finish1D(a, int64(o.N), d.cfg.ewLocal)
}
