//go:build cgo

package vulkan

import (
	"github.com/vrun-go/vrun/rt"
)

// OptimStep lowers rt.OptimStep to one dispatch of shaders/optim.comp
// (variants optim_f32, optim_f64).
func (l *lowering) OptimStep(o *rt.OptimStep) {
	dt := o.P.DType
	if dt != rt.F32 && dt != rt.F64 {
		l.err = l.unsupported(dt, "optimizer steps are implemented for f32 and f64")
		return
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return
	}
	if err := rt.ReferenceSupport(backendName, o); err != nil {
		l.err = err
		return
	}
	n := int64(o.N)
	if n == 0 {
		return
	}
	// Bindings in the shader's order; an absent operand binds one element
	// of P, which the shader never touches.
	type operand struct {
		name  string
		ref   rt.Ref
		elems int64
		out   bool
	}
	ops := []operand{{"P", o.P, n, true}, {"G", o.G, n, o.Scale.Buf != nil}, {"S1", o.S1, n, true},
		{"S2", o.S2, n, true}, {"S3", o.S3, n, true}, {"H", o.H, rt.OptimHyperLen, false}, {"Scale", o.Scale, 1, false}}
	var binds []bind
	var offs []uint32
	var reads, writes []span
	for _, x := range ops {
		present := x.ref.Buf != nil
		if !present {
			x.ref, x.elems = o.P, 1
		}
		bd, off, sp, err := l.bindElems(x.name, x.ref, x.elems)
		if err != nil {
			l.err = err
			return
		}
		binds, offs = append(binds, bd), append(offs, off)
		switch {
		case !present:
		case x.out:
			writes = append(writes, sp)
		default:
			reads = append(reads, sp)
		}
	}
	push := []uint32{uint32(n), uint32(o.Fn), o.Flags(), 0, offs[0], offs[1], offs[2], offs[3], offs[4], offs[5], offs[6], 0}
	for _, c := range o.Coefs() {
		b := realBits(dt, c)
		push = append(push, b[0], b[1])
	}
	l.add(dispatch{shader: "optim_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes,
		push: push, groups: groups1D(l.d, n, wgSize)})
}
