//go:build cgo

package clshim

import (
	"github.com/vrun-go/vrun/rt"
)

func (d *device) lowerReduce(o *rt.Reduce) (*launchSpec, error) {
	outs := int64(o.Outer) * int64(o.Inner)
	if outs == 0 {
		return &launchSpec{}, nil
	}
	R := d.cfg.redWG
	wg := o.N >= 8*R && (outs < 16384 || o.N >= 4096)
	name := "reduce_serial"
	if wg {
		name = "reduce_wg"
	}
	a, err := d.kernel(o, "reduce.cl", typeDefs(o.X.DType)+d.buildConst("RED_FN", int(o.Fn)), name)
	if err != nil {
		return nil, err
	}
	a.ref(d, o.X)
	ym, _ := d.memOf(o.Y.Buf)
	a.mem(ym)
	a.mem(ym)
	a.i64(o.Y.Off / int64(o.Y.DType.Size()))
	a.i32(o.Outer)
	a.i32(o.N)
	a.i32(o.Inner)
	a.i32(int(o.Fn))
	a.i32(b01(o.SelectLast))
	if wg {
		return d.finish1D(a, outs*int64(R), R)
	}
	return d.finish1D(a, outs, d.cfg.ewLocal)
}

func (d *device) lowerSoftmax(o *rt.Softmax) (*launchSpec, error) {
	rows := int64(o.Outer) * int64(o.Inner)
	if rows == 0 || o.N == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "reduce.cl", typeDefs(o.X.DType), "softmax")
	if err != nil {
		return nil, err
	}
	a.ref(d, o.X, o.Y)
	a.i32(o.N)
	a.i32(o.Inner)
	a.i32(b01(o.Log))
	return d.finish1D(a, rows*int64(d.cfg.redWG), d.cfg.redWG)
}

func (d *device) lowerNormalize(o *rt.Normalize) (*launchSpec, error) {
	if o.Outer == 0 || o.N == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	a, err := d.kernel(o, "reduce.cl", typeDefs(dt), "normalize_rows")
	if err != nil {
		return nil, err
	}
	a.ref(d, o.X, o.Y, o.Scale, o.Bias)
	a.i32(o.N)
	a.acc(dt, o.Eps)
	a.i32(b01(o.Scale.Buf != nil))
	a.i32(b01(o.Bias.Buf != nil))
	return d.finish1D(a, int64(o.Outer)*int64(d.cfg.redWG), d.cfg.redWG)
}
