//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

func (l *lowering) Pool(o *rt.Pool) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	if o.Y.DType != dt {
		l.err = fmt.Errorf("%s: Y is %s, want %s", l.op.OpName(), o.Y.DType, dt)
		return
	}
	if o.Fn > rt.LpPool {
		l.err = l.unsupported(dt, "unknown pool function %d", o.Fn)
		return
	}
	if o.Fn == rt.LpPool && o.P < 1 {
		l.err = fmt.Errorf("%s: P = %d", l.op.OpName(), o.P)
		return
	}
	if o.PadT < 0 || o.PadL < 0 || o.PadB < 0 || o.PadR < 0 {
		l.err = fmt.Errorf("%s: negative padding", l.op.OpName())
		return
	}
	ny := int64(o.NC) * int64(o.OH) * int64(o.OW)
	nx := int64(o.NC) * int64(o.H) * int64(o.W)
	if ny == 0 {
		return
	}
	if !fits32(ny) || !fits32(nx) {
		l.err = fmt.Errorf("%s: operands exceed 2^32 elements", l.op.OpName())
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Y"}, []rt.Ref{o.X, o.Y}, []int64{max(nx, 1), ny}, 1)
	if !ok {
		return
	}
	cip := uint32(0)
	if o.CountIncludePad {
		cip = 1
	}
	push := []uint32{uint32(o.NC), uint32(o.H), uint32(o.W), uint32(o.OH), uint32(o.OW), uint32(o.KH), uint32(o.KW), uint32(o.StrideH),
		uint32(o.StrideW), uint32(o.PadT), uint32(o.PadL), uint32(o.PadB), uint32(o.PadR), uint32(o.DilH), uint32(o.DilW), uint32(o.Fn),
		cip, uint32(o.P), offs[0], offs[1]}
	l.add(dispatch{shader: "pool_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes, push: push, groups: groups1D(l.d, ny, wgSize)})
}
