//go:build cgo

package clshim

import (
	"fmt"

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
	a.ref(d, o.X, o.W, o.Bias, o.Y)
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
		a, err = d.kernel(o, "conv.cl", typeDefs(dt)+halfWeightDefs(o), "conv_direct")
	} else {
		a, err = d.kernel(o, "gemm.cl", d.gemmDefs(sh, dt, o.Act.Fn)+halfWeightDefs(o), "conv_gemm")
	}
	if err != nil {
		return nil, err
	}
	a.ref(d, o.X, o.W, o.Bias, o.Y)
	for _, v := range []int{o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, b01(o.Bias.Buf != nil), int(o.Act.Fn)} {
		a.i32(v)
	}
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	a.ref(d, o.Res)
	a.i32(b01(o.Res.Buf != nil))
	if direct {
		lx := 1
		for lx < o.OW && lx < 32 {
			lx *= 2
		}
		ly := max(1, min(d.cfg.ewLocal/lx, 8))
		gws := [3]int{roundUp(int64(o.OW), lx), roundUp(int64(o.OH), ly), o.N * o.K}
		return d.finishND(a, gws, [3]int{lx, ly, 1})
	}
	R := o.C / o.Groups * o.KH * o.KW
	tiles := sh.groups(kg, P, o.N*o.Groups)
	S := d.convSplits(tiles, R, sh.tk)
	a.i32(S)
	var scratch []rt.Buffer
	if S > 1 {
		accSize := 4
		if dt == rt.F64 {
			accSize = 8
		}
		part, err := d.Alloc(int64(tiles) * int64(S) * int64(sh.tm*sh.tn) * int64(accSize))
		if err != nil {
			releaseKernel(a.k)
			return nil, fmt.Errorf("opencl: Conv: split-K partials: %w", err)
		}
		cnt, err := d.Alloc(int64(4 * tiles))
		if err == nil {
			err = d.Write(cnt, 0, make([]byte, 4*tiles))
		}
		if err != nil {
			part.Free()
			if cnt != nil {
				cnt.Free()
			}
			releaseKernel(a.k)
			return nil, fmt.Errorf("opencl: Conv: split-K counters: %w", err)
		}
		scratch = []rt.Buffer{part, cnt}
		for _, b := range scratch {
			m, _ := d.memOf(b)
			a.mem(m)
			a.i64(0)
		}
	} else {
		a.mem(nil)
		a.i64(0)
		a.mem(nil)
		a.i64(0)
	}
	rn, rm := sh.local()
	gws := [3]int{(P + sh.tn - 1) / sh.tn * rn, (kg + sh.tm - 1) / sh.tm * rm, o.N * o.Groups * S}
	l, err := d.finishND(a, gws, [3]int{rn, rm, 1})
	if err != nil {
		for _, b := range scratch {
			b.Free()
		}
		return nil, err
	}
	l.scratch = scratch
	return l, nil
}

// convSplits is the split-K factor of an implicit-GEMM Conv of tiles
// output tiles and reduction depth r: enough splits to give every
// compute unit a work-group, each split at least 8 steps of tk deep, at
// most 16.
func (d *device) convSplits(tiles, r, tk int) int {
	if d.splitForce > 0 {
		return min(d.splitForce, (r+tk-1)/tk)
	}
	cus := d.ent.caps.computeUnits
	if d.ent.caps.cpu || tiles >= cus {
		return 1
	}
	return max(1, min((cus+tiles-1)/tiles, r/(8*tk), 16))
}
