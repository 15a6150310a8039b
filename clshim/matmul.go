//go:build cgo

package clshim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

func (d *device) gemmDefs(dt rt.DType) string {
	c := d.cfg
	tm, tn, wm, wn := c.tm, c.tn, c.wm, c.wn
	if dt == rt.F64 {
		tm, tn, wm, wn = c.tm64, c.tn64, c.wm64, c.wn64
	}
	return fmt.Sprintf("%s -DTM=%d -DTN=%d -DTK=%d -DWM=%d -DWN=%d", typeDefs(dt), tm, tn, c.tk, wm, wn)
}

// gemmTile returns the tile and work-group shape used for dt.
func (d *device) gemmTile(dt rt.DType) (tm, tn, rm, rn int) {
	c := d.cfg
	if dt == rt.F64 {
		return c.tm64, c.tn64, c.tm64 / c.wm64, c.tn64 / c.wn64
	}
	return c.tm, c.tn, c.tm / c.wm, c.tn / c.wn
}

func (d *device) lowerMatMul(o *rt.MatMul) (*launchSpec, error) {
	if o.M == 0 || o.N == 0 {
		return &launchSpec{}, nil
	}
	dt := o.A.DType
	a, err := d.kernel(o, "gemm.cl", d.gemmDefs(dt), "gemm")
	if err != nil {
		return nil, err
	}
	a.ref(d, o.A)
	a.ref(d, o.B)
	bs0, bs1 := 0, 0
	if o.Bias.Buf != nil {
		st := o.Bias.StridesOrContiguous()
		bs0, bs1 = st[0], st[1]
	}
	a.ref(d, o.Bias)
	a.i32(bs0)
	a.i32(bs1)
	a.ref(d, o.Y)
	a.i32(o.M)
	a.i32(o.N)
	a.i32(o.K)
	a.i32(b01(o.TransA))
	a.i32(b01(o.TransB))
	a.i64(int64(o.StrideA))
	a.i64(int64(o.StrideB))
	a.i64(int64(o.StrideY))
	a.acc(dt, o.Alpha)
	a.acc(dt, o.Beta)
	a.i32(b01(o.Bias.Buf != nil))
	a.i32(int(o.Act.Fn))
	a.acc(dt, o.Act.Alpha)
	a.acc(dt, o.Act.Beta)
	tm, tn, rm, rn := d.gemmTile(dt)
	gws := [3]int{(o.N + tn - 1) / tn * rn, (o.M + tm - 1) / tm * rm, o.Batch}
	return d.finishND(a, gws, [3]int{rn, rm, 1})
}
