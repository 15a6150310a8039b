//go:build cgo

package vulkan

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// Lowering of the index-driven primitives Gather, GatherElements,
// ScatterElements and TopK (shaders gather.comp, gatherel.comp,
// scatter.comp, topk.comp).

// strides3 returns the element strides of a rank-3 view as int32 push
// words.
func (l *lowering) strides3(name string, r rt.Ref) ([3]uint32, bool) {
	st := r.StridesOrContiguous()
	var out [3]uint32
	if len(st) != 3 {
		l.err = fmt.Errorf("%s: %s has rank %d, want 3", l.op.OpName(), name, len(st))
		return out, false
	}
	for i, s := range st {
		if s > math.MaxInt32 || s < math.MinInt32 {
			l.err = fmt.Errorf("%s: %s stride %d out of the int32 range", l.op.OpName(), name, s)
			return out, false
		}
		out[i] = uint32(int32(s))
	}
	return out, true
}

// statusBuf stands for the stream's index status words (the
// rt.IndexStatusWords that the index kernels flag an out-of-range index
// in) in binds; the stream replaces it with the buffer it owns.
var statusBuf = &buffer{}

// statusBind binds the stream's status words (binding 3 of gather.comp,
// gatherel.comp and scatter.comp).
func statusBind() bind { return bind{b: statusBuf, off: 0, rng: 4 * rt.IndexStatusWords} }

// idxWords returns the idx64 push flag of an index operand and its
// element offset off in the int32 words the shaders read indices as.
func idxWords(idx rt.Ref, off uint32) (idx64, words uint32) {
	if idx.DType == rt.I64 {
		return 1, 2 * off
	}
	return 0, off
}

func (l *lowering) GatherElements(o *rt.GatherElements) {
	dt := o.X.DType
	if o.Y.DType != dt {
		l.err = fmt.Errorf("GatherElements: Y is %s, want %s", o.Y.DType, dt)
		return
	}
	if err := l.needSize(dt); err != nil {
		l.err = err
		return
	}
	ny := int64(o.Outer) * int64(o.N) * int64(o.Inner)
	nx := int64(o.Outer) * int64(o.Axis) * int64(o.Inner)
	if ny == 0 {
		return
	}
	if !fits32(ny) || !fits32(nx) || !fits32(2*o.Idx.Len()) {
		l.err = fmt.Errorf("GatherElements: sizes exceed 2^32 elements")
		return
	}
	ist, ok := l.strides3("Idx", o.Idx)
	if !ok {
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Idx", "Y"}, []rt.Ref{o.X, o.Idx, o.Y}, []int64{max(nx, 1), -1, ny}, 2)
	if !ok {
		return
	}
	idx64, offI := idxWords(o.Idx, offs[1])
	l.add(dispatch{shader: "gatherel_" + sizeName(dt.Size()), spec: []uint32{wgSize},
		binds: append(binds, statusBind()), reads: reads, writes: writes,
		groups: groups1D(l.d, ny, wgSize),
		push: []uint32{uint32(o.Outer), uint32(o.Axis), uint32(o.N), uint32(o.Inner), offs[0], offI, offs[2], idx64,
			ist[0], ist[1], ist[2], 0}, tagAt: 11})
}

func (l *lowering) ScatterElements(o *rt.ScatterElements) {
	dt := o.Y.DType
	if o.Fn > rt.ScatterMin {
		l.err = l.unsupported(dt, "unknown scatter function %d", o.Fn)
		return
	}
	if o.Upd.DType != dt {
		l.err = fmt.Errorf("%s: Upd is %s, want %s", l.op.OpName(), o.Upd.DType, dt)
		return
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return
	}
	cols := int64(o.Outer) * int64(o.Inner)
	ny := cols * int64(o.Axis)
	if cols == 0 || o.N == 0 || o.Axis == 0 {
		return
	}
	if !fits32(ny) || !fits32(2*o.Idx.Len()) || !fits32(o.Upd.Len()) || !fits32(cols*int64(o.N)) {
		l.err = fmt.Errorf("%s: sizes exceed 2^32 elements", l.op.OpName())
		return
	}
	ist, ok := l.strides3("Idx", o.Idx)
	if !ok {
		return
	}
	ust, ok := l.strides3("Upd", o.Upd)
	if !ok {
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"Idx", "Upd", "Y"}, []rt.Ref{o.Idx, o.Upd, o.Y}, []int64{-1, -1, ny}, 2)
	if !ok {
		return
	}
	idx64, offI := idxWords(o.Idx, offs[0])
	// Y is read too: the reductions combine with its elements.
	l.add(dispatch{shader: "scatter_" + dt.String(), spec: []uint32{wgSize},
		binds: append(binds, statusBind()), reads: append(reads, writes...), writes: writes,
		groups: groups1D(l.d, cols, wgSize),
		push: []uint32{uint32(o.Outer), uint32(o.Axis), uint32(o.N), uint32(o.Inner), offs[2], offI, offs[1], idx64,
			ist[0], ist[1], ist[2], uint32(o.Fn), ust[0], ust[1], ust[2], 0}, tagAt: 15})
}

func (l *lowering) TopK(o *rt.TopK) {
	dt := o.X.DType
	switch dt {
	case rt.F32, rt.F16, rt.F64, rt.I32, rt.I64:
	default:
		l.err = l.unsupported(dt, "TopK is implemented for f32, f16, f64, i32 and i64")
		return
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return
	}
	if o.Values.DType != dt || o.Indices.DType != rt.I64 {
		l.err = fmt.Errorf("TopK: Values %s and Indices %s, want %s and i64", o.Values.DType, o.Indices.DType, dt)
		return
	}
	rows := int64(o.Outer) * int64(o.Inner)
	nx := rows * int64(o.N)
	ny := rows * int64(o.K)
	if ny == 0 {
		return
	}
	if !fits32(nx) || !fits32(2*ny) {
		l.err = fmt.Errorf("TopK: sizes exceed 2^32 elements")
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Values", "Indices"}, []rt.Ref{o.X, o.Values, o.Indices}, []int64{nx, ny, ny}, -1)
	if !ok {
		return
	}
	// bindsOf marks no output when out is -1: Values and Indices are.
	reads, writes = reads[:1], reads[1:]
	lg := uint32(0)
	if o.Largest {
		lg = 1
	}
	wg := uint32(32)
	for wg < wgSize && int(wg) < o.N {
		wg *= 2
	}
	l.add(dispatch{shader: "topk_" + dt.String(), spec: []uint32{wg}, binds: binds, reads: reads, writes: writes,
		groups: groups2D(l.d, rows),
		push:   []uint32{uint32(o.Outer), uint32(o.N), uint32(o.Inner), uint32(o.K), offs[0], offs[1], 2 * offs[2], lg}})
}

func (l *lowering) Gather(o *rt.Gather) {
	dt := o.X.DType
	if o.Y.DType != dt {
		l.err = fmt.Errorf("Gather: Y is %s, want %s", o.Y.DType, dt)
		return
	}
	if err := l.needSize(dt); err != nil {
		l.err = err
		return
	}
	nidx := o.Idx.Len()
	n := int64(o.Outer) * nidx * int64(o.Inner)
	if n == 0 {
		return
	}
	nx := int64(o.Outer) * int64(o.Axis) * int64(o.Inner)
	if !fits32(n) || !fits32(nx) {
		l.err = fmt.Errorf("Gather: sizes exceed 2^32 elements")
		return
	}
	if nx == 0 {
		nx = 1
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Idx", "Y"}, []rt.Ref{o.X, o.Idx, o.Y}, []int64{nx, nidx, n}, 2)
	if !ok {
		return
	}
	idx64, offI := idxWords(o.Idx, offs[1])
	l.add(dispatch{shader: "gather_" + sizeName(dt.Size()), spec: []uint32{wgSize}, binds: append(binds, statusBind()),
		reads: reads, writes: writes, groups: groups1D(l.d, n, wgSize),
		push:  []uint32{uint32(o.Outer), uint32(o.Axis), uint32(o.Inner), uint32(nidx), offs[0], offI, offs[2], idx64, 0},
		tagAt: 8})
}
