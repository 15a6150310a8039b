//go:build cgo

package vulkan

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// This file lowers rt ops to dispatches: lower hands each op to its
// family's file (elementwise.go, reduce.go, matmul.go, conv.go, pool.go,
// indexed.go, optim.go), which picks the shader variant, binds each
// operand's byte range, and packs push constants.

const wgSize = 256 // workgroup size of 1-D kernels (spec constant 0)

type span struct {
	b      *buffer
	lo, hi int64
}

type bind struct {
	b        *buffer
	off, rng int64
}

// dispatch is one vkCmdDispatch with its bindings and push constants.
type dispatch struct {
	shader string
	spec   []uint32
	binds  []bind
	push   []uint32
	groups [3]uint32
	reads  []span
	writes []span
	pipe   *pipeline
	// scratch is the size in bytes of the stream scratch buffer this
	// dispatch binds through scratchBuf (split-K partials), or 0.
	scratch int64
	// slot is the slot of the scratch buffer the dispatch binds (see
	// stream.Launch).
	slot int
	// tagAt, when > 0, is the push word that takes the op's index-status
	// tag (its launch index + 1, or 0 when it allows out-of-range
	// indices); the dispatch binds the stream's status words through
	// statusBuf (indexstatus.glsl).
	tagAt int
}

// lowering collects the dispatches of one op.
type lowering struct {
	d     *device
	op    rt.Op
	err   error
	outs  []dispatch
	probe bool // checking support only: buffers are not bound
	// force, when set, is the tuner's candidate for the op's tiled GEMM
	// (tunedGEMM).
	force *gemmForce
}

func (l *lowering) unsupported(dt rt.DType, format string, args ...any) error {
	return &rt.UnsupportedError{Backend: backendName, Op: l.op.OpName(), DType: dt, Reason: fmt.Sprintf(format, args...)}
}

// needDType checks that the device can store dt in a shader.
func (l *lowering) needDType(dt rt.DType) error {
	c := l.d.phys.caps
	switch dt {
	case rt.F16:
		if !c.storage16 {
			return l.unsupported(dt, "device lacks storageBuffer16BitAccess")
		}
	case rt.F64:
		if !c.shaderFloat64 {
			return l.unsupported(dt, "device lacks shaderFloat64")
		}
	case rt.I64:
		if !c.shaderInt64 {
			return l.unsupported(dt, "device lacks shaderInt64")
		}
	case rt.U8, rt.Bool, rt.I8:
		if !c.storage8 {
			return l.unsupported(dt, "device lacks storageBuffer8BitAccess")
		}
	case rt.F32, rt.I32:
	default:
		return l.unsupported(dt, "unknown dtype")
	}
	return nil
}

func (l *lowering) needSize(dt rt.DType) error {
	switch dt.Size() {
	case 1:
		return l.needDType(rt.U8)
	case 2:
		return l.needDType(rt.F16)
	}
	return nil
}

func sizeName(n int) string { return fmt.Sprintf("b%d", n) }

func isFloat(dt rt.DType) bool { return dt == rt.F32 || dt == rt.F16 || dt == rt.F64 }

// bindRange binds [lo, hi) of r's buffer and returns the element offset of
// r.Off within the binding.
func (l *lowering) bindRange(name string, r rt.Ref, lo, hi int64) (bind, uint32, error) {
	if lo > r.Off {
		lo = r.Off
	}
	if hi <= lo {
		hi = lo + int64(r.DType.Size())
	}
	if l.probe {
		// Supports and Prepare: only the device's limits matter, not whose
		// buffer it is. The element offset is the one a real binding gets
		// when the buffer places r.Off at a multiple of minAlign (as the
		// engine's arena and weights do), so that offset-dependent
		// variant choices (vec4 loads) match the launch.
		base := lo &^ (l.d.minAlign - 1)
		if hi-base > l.d.maxRange {
			return bind{}, 0, fmt.Errorf("%s: operand %s spans %d bytes, more than maxStorageBufferRange (%d) of %s", l.op.OpName(), name, hi-lo, l.d.maxRange, l.d.phys.info.Name)
		}
		return bind{}, uint32((r.Off - base) / int64(r.DType.Size())), nil
	}
	b, err := l.d.own(r.Buf)
	if err != nil {
		return bind{}, 0, fmt.Errorf("%s: operand %s: %w", l.op.OpName(), name, err)
	}
	if lo < 0 || hi > b.size {
		return bind{}, 0, fmt.Errorf("%s: operand %s: range [%d,%d) outside buffer of %d bytes", l.op.OpName(), name, lo, hi, b.size)
	}
	base := lo &^ (l.d.minAlign - 1)
	rng := hi - base
	if rng > l.d.maxRange {
		return bind{}, 0, fmt.Errorf("%s: operand %s spans %d bytes, more than maxStorageBufferRange (%d) of %s", l.op.OpName(), name, rng, l.d.maxRange, l.d.phys.info.Name)
	}
	// keep the range a multiple of 4 where the buffer allows (8/16-bit arrays)
	if r := (base + rng) % 4; r != 0 && base+rng+(4-r) <= b.alloc {
		rng += 4 - r
	}
	es := int64(r.DType.Size())
	return bind{b: b, off: base, rng: rng}, uint32((r.Off - base) / es), nil
}

// bindRef binds the whole view of r.
func (l *lowering) bindRef(name string, r rt.Ref) (bind, uint32, span, error) {
	lo, hi := r.Span()
	bd, off, err := l.bindRange(name, r, lo, hi)
	return bd, off, span{bd.b, lo, hi}, err
}

// bindElems binds n contiguous elements from r.Off.
func (l *lowering) bindElems(name string, r rt.Ref, n int64) (bind, uint32, span, error) {
	lo, hi := r.Off, r.Off+n*int64(r.DType.Size())
	bd, off, err := l.bindRange(name, r, lo, hi)
	return bd, off, span{bd.b, lo, hi}, err
}

func groups1D(d *device, n int64, per int64) [3]uint32 {
	g := (n + per - 1) / per
	if g < 1 {
		g = 1
	}
	if g > int64(d.maxGroups[0]) {
		g = int64(d.maxGroups[0])
	}
	return [3]uint32{uint32(g), 1, 1}
}

// groups2D spreads n workgroups over x and y (kernels loop past the grid).
func groups2D(d *device, n int64) [3]uint32 {
	if n < 1 {
		n = 1
	}
	x := min(n, int64(d.maxGroups[0]))
	y := min((n+x-1)/x, int64(d.maxGroups[1]))
	return [3]uint32{uint32(x), uint32(y), 1}
}

func realBits(dt rt.DType, v float64) [2]uint32 {
	if dt == rt.F64 {
		b := math.Float64bits(v)
		return [2]uint32{uint32(b), uint32(b >> 32)}
	}
	return [2]uint32{math.Float32bits(float32(v)), 0}
}

func fits32(n int64) bool { return n >= 0 && n <= math.MaxUint32 }

func (l *lowering) floatOnly(dt rt.DType) bool {
	if !isFloat(dt) {
		l.err = l.unsupported(dt, "only f32, f16 and f64 are implemented")
		return false
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return false
	}
	return true
}

func (l *lowering) add(d dispatch) { l.outs = append(l.outs, d) }

// bindsOf binds refs in order: elems[i] contiguous elements of refs[i],
// or, where elems[i] < 0, its whole strided view. refs[out] is the
// written one (none when out is -1).
func (l *lowering) bindsOf(names []string, refs []rt.Ref, elems []int64, out int) (binds []bind, offs []uint32, reads, writes []span, ok bool) {
	for i, r := range refs {
		var bd bind
		var off uint32
		var sp span
		var err error
		if elems[i] < 0 {
			bd, off, sp, err = l.bindRef(names[i], r)
		} else {
			bd, off, sp, err = l.bindElems(names[i], r, elems[i])
		}
		if err != nil {
			l.err = err
			return nil, nil, nil, nil, false
		}
		binds = append(binds, bd)
		offs = append(offs, off)
		if i == out {
			writes = append(writes, sp)
		} else {
			reads = append(reads, sp)
		}
	}
	return binds, offs, reads, writes, true
}

// lower validates op and returns its dispatches (pipelines not resolved).
func (d *device) lower(op rt.Op) ([]dispatch, error) { return d.lowerWith(op, false, nil) }

// lowerOp lowers op; with probe, only to check support or to list its
// pipelines.
func (d *device) lowerOp(op rt.Op, probe bool) ([]dispatch, error) {
	return d.lowerWith(op, probe, nil)
}

// lowerWith is lowerOp with the tuner's forced choice (nil: none).
func (d *device) lowerWith(op rt.Op, probe bool, force *gemmForce) ([]dispatch, error) {
	if op == nil {
		return nil, fmt.Errorf("vulkan: nil op")
	}
	if err := rt.CheckOp(op); err != nil {
		return nil, err
	}
	l := &lowering{d: d, op: op, probe: probe, force: force}
	if o, ok := op.(*rt.Attention); ok { // optional: not in rt.OpLowerer
		l.attention(o)
	} else if o, ok := op.(*rt.SepConv); ok { // optional too
		l.SepConv(o)
	} else if !rt.LowerOp(op, l) {
		return nil, &rt.UnsupportedError{Backend: backendName, Op: op.OpName(), DType: rt.OpDType(op), Reason: fmt.Sprintf("unknown op type %T", op)}
	}
	if l.err != nil {
		return nil, l.err
	}
	for _, x := range l.outs {
		if 4*len(x.push) > pushSize {
			return nil, fmt.Errorf("vulkan: %s: %d bytes of push constants (max %d)", op.OpName(), 4*len(x.push), pushSize)
		}
	}
	return l.outs, nil
}

// Supports reports whether the device can run op: its kinds, dtypes and
// sizes against the device's limits. The operands' buffers may belong to
// anyone (the engine asks with placeholders before allocating).
func (d *device) Supports(op rt.Op) error {
	_, err := d.lowerOp(op, true)
	return err
}

func pushBytes(w []uint32) []byte {
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}
