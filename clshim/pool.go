//go:build cgo

package clshim

import (
	"github.com/vrun-go/vrun/rt"
)

func (d *device) lowerPool(o *rt.Pool) (*launchSpec, error) {
	total := int64(o.NC) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	a, err := d.kernel(o, "conv.cl", typeDefs(o.X.DType), "pool")
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X, o.Y)
	for _, v := range []int{o.H, o.W, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.PadB, o.PadR, o.DilH, o.DilW, int(o.Fn), b01(o.CountIncludePad), o.P} {
		a.i32(v)
	}
	return d.finish1D(a, total, d.cfg.ewLocal)
}
