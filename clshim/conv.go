//go:build cgo

package clshim

import (
	"github.com/vrun-go/vrun/rt"
)

func (d *device) lowerConvT(o *rt.ConvTranspose) (*launchSpec, error) {
	total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	a, err := d.kernel(o, "conv.cl", typeDefs(dt), "convt")
	if err != nil {
		return nil, err
	}
	a.i64(total)
	a.ref(d, o.X)
	a.ref(d, o.W)
	a.ref(d, o.Bias)
	a.ref(d, o.Y)
	for _, v := range []int{o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil)} {
		a.i32(v)
	}
	return d.finish1D(a, total, d.cfg.ewLocal)
}

func (d *device) lowerConv(o *rt.Conv) (*launchSpec, error) {
	total := int64(o.N) * int64(o.K) * int64(o.OH) * int64(o.OW)
	if total == 0 {
		return &launchSpec{}, nil
	}
	dt := o.X.DType
	kg := o.K / o.Groups
	direct := kg < 8
	var a *args
	var err error
	P := o.OH * o.OW
	sh := d.pickGEMM(dt, kg, P, o.N*o.Groups)
	if direct {
		a, err = d.kernel(o, "conv.cl", typeDefs(dt), "conv_direct")
	} else {
		a, err = d.kernel(o, "gemm.cl", sh.defs(dt), "conv_gemm")
	}
	if err != nil {
		return nil, err
	}
	if direct {
		a.i64(total)
	}
	a.ref(d, o.X)
	a.ref(d, o.W)
	a.ref(d, o.Bias)
	a.ref(d, o.Y)
	for _, v := range []int{o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil), int(o.Act.Fn)} {
		a.i32(v)
	}
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	if direct {
		return d.finish1D(a, total, d.cfg.ewLocal)
	}
	rn, rm := sh.local()
	gws := [3]int{(P + sh.tn - 1) / sh.tn * rn, (kg + sh.tm - 1) / sh.tm * rm, o.N * o.Groups}
	return d.finishND(a, gws, [3]int{rn, rm, 1})
}
