//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// poolVec is the outputs per invocation of pool.comp's VEC variants
// (poolv: 3×3, stride-2 max and average pools on rows of a multiple of 4
// items, with vector loads), 2 or 4; 0 (benchmarks) turns them off.
// H200, 2026-12-04 (BenchmarkBandwidth, 200 runs, same run): 2 reads
// 2665 GB/s of GPU time, 4 2404, the scalar pool3 2330. H100, 2026-12-07,
// with one edge column loaded a row: 2 0.91 of the copy kernel, 4 0.88.
var poolVec = 2

// poolVecOK reports whether poolv runs o, whose X starts at element
// offset off within its binding.
func poolVecOK(o *rt.Pool, off uint32) bool {
	return (poolVec == 2 || poolVec == 4) && (o.X.DType == rt.F32 || o.X.DType == rt.F16) &&
		(o.Fn == rt.MaxPool || o.Fn == rt.AvgPool) && o.KH == 3 && o.KW == 3 && o.DilH == 1 && o.DilW == 1 &&
		o.StrideW == 2 && o.PadL <= 1 && o.H > 0 && o.W > 0 && o.W%4 == 0 && off%4 == 0
}

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
	if poolVecOK(o, offs[0]) {
		pv := int64(poolVec)
		n := int64(o.NC) * int64(o.OH) * ((int64(o.OW) + pv - 1) / pv)
		l.add(dispatch{shader: "poolv_" + dt.String(), spec: []uint32{wgSize, uint32(pv)}, binds: binds, reads: reads, writes: writes,
			push: push, groups: groups1D(l.d, n, wgSize)})
		return
	}
	l.add(dispatch{shader: "pool_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes, push: push, groups: groups1D(l.d, ny, wgSize)})
}
