//go:build cgo

package vulkan

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// This file lowers rt ops to dispatches: it picks the shader variant,
// binds each operand's byte range, and packs push constants.

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
}

// lowering collects the dispatches of one op.
type lowering struct {
	d     *device
	op    rt.Op
	err   error
	outs  []dispatch
	probe bool // checking support only: buffers are not bound
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
		// Supports: only the device's limits matter, not whose buffer it is.
		if hi-(lo&^(l.d.minAlign-1)) > l.d.maxRange {
			return bind{}, 0, fmt.Errorf("%s: operand %s spans %d bytes, more than maxStorageBufferRange (%d) of %s", l.op.OpName(), name, hi-lo, l.d.maxRange, l.d.phys.info.Name)
		}
		return bind{}, 0, nil
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

// ---- elementwise ----

// coalesce drops unit dims and merges dims that are contiguous in every
// operand, so strided elementwise ops fit the kernels' rank.
func coalesce(shape []int, strides [][]int) ([]int, [][]int) {
	var sh []int
	st := make([][]int, len(strides))
	for d, n := range shape {
		if n == 1 {
			continue
		}
		if len(sh) > 0 {
			last := len(sh) - 1
			ok := true
			for k := range strides {
				if st[k][last] != strides[k][d]*n {
					ok = false
					break
				}
			}
			if ok {
				sh[last] *= n
				for k := range strides {
					st[k][last] = strides[k][d]
				}
				continue
			}
		}
		sh = append(sh, n)
		for k := range strides {
			st[k] = append(st[k], strides[k][d])
		}
	}
	return sh, st
}

// ew lowers an elementwise op over refs (all of one shape): push words are
// header, dims 1..rank-1, element offsets, strides, then trailer (8-byte
// aligned). The last ref is the output.
func (l *lowering) ew(shader string, names []string, refs []rt.Ref, rank int, header, trailer []uint32) {
	if l.err != nil {
		return
	}
	n := refs[len(refs)-1].Len()
	if n == 0 {
		return
	}
	if !fits32(n) {
		l.err = fmt.Errorf("%s: %d elements exceed the 2^32 limit of the Vulkan kernels", l.op.OpName(), n)
		return
	}
	strides := make([][]int, len(refs))
	for i, r := range refs {
		strides[i] = r.StridesOrContiguous()
	}
	sh, st := coalesce(refs[0].Shape, strides)
	if len(sh) > rank {
		l.err = fmt.Errorf("%s: strided view of shape %v has rank %d after merging contiguous dims; the Vulkan kernel handles at most %d (make an operand contiguous first)", l.op.OpName(), refs[0].Shape, len(sh), rank)
		return
	}
	pad := rank - len(sh)
	full := make([]int, rank)
	for i := range full {
		full[i] = 1
		if i >= pad {
			full[i] = sh[i-pad]
		}
	}
	dsp := dispatch{shader: shader, spec: []uint32{wgSize}, groups: groups1D(l.d, n, wgSize)}
	push := append([]uint32{}, header...)
	for _, v := range full[1:] {
		push = append(push, uint32(v))
	}
	var offs []uint32
	for i, r := range refs {
		bd, off, sp, err := l.bindRef(names[i], r)
		if err != nil {
			l.err = err
			return
		}
		dsp.binds = append(dsp.binds, bd)
		offs = append(offs, off)
		if i == len(refs)-1 {
			dsp.writes = append(dsp.writes, sp)
		} else {
			dsp.reads = append(dsp.reads, sp)
		}
	}
	push = append(push, offs...)
	for k := range refs {
		for i := 0; i < rank; i++ {
			s := 0
			if i >= pad {
				s = st[k][i-pad]
			}
			if s > math.MaxInt32 || s < math.MinInt32 {
				l.err = fmt.Errorf("%s: stride %d out of the int32 range", l.op.OpName(), s)
				return
			}
			push = append(push, uint32(int32(s)))
		}
	}
	if len(trailer) > 0 {
		if len(push)%2 == 1 {
			push = append(push, 0)
		}
		push = append(push, trailer...)
	}
	dsp.push = push
	l.outs = append(l.outs, dsp)
}

func fillBits(dt rt.DType, v float64) (lo, hi uint32) {
	var b uint64
	switch dt {
	case rt.F32:
		b = uint64(math.Float32bits(float32(v)))
	case rt.F16:
		b = uint64(rt.F16Bits(float32(v)))
	case rt.F64:
		b = math.Float64bits(v)
	case rt.I32:
		b = uint64(uint32(int32(v)))
	case rt.I64:
		b = uint64(int64(v))
	case rt.U8:
		b = uint64(uint8(int64(v)))
	case rt.I8:
		b = uint64(uint8(int8(int64(v))))
	case rt.Bool:
		if v != 0 {
			b = 1
		}
	}
	return uint32(b), uint32(b >> 32)
}

func clampInt(v float64, dt rt.DType) int64 {
	lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
	switch dt {
	case rt.I64:
		lo, hi = -9.2e18, 9.2e18
	case rt.U8:
		lo, hi = 0, 255
	case rt.I8:
		lo, hi = -128, 127
	case rt.Bool:
		lo, hi = 0, 1
	}
	if math.IsNaN(v) {
		return 0
	}
	return int64(math.Max(lo, math.Min(hi, math.Round(v))))
}

var intUnary = map[rt.UnaryFn]bool{rt.Copy: true, rt.Neg: true, rt.Abs: true, rt.Relu: true, rt.Sign: true, rt.Clip: true, rt.Square: true}

func (l *lowering) unary(o *rt.Unary) {
	x, y := o.X.DType, o.Y.DType
	if err := l.needDType(x); err != nil {
		l.err = err
		return
	}
	if err := l.needDType(y); err != nil {
		l.err = err
		return
	}
	names, refs := []string{"X", "Y"}, []rt.Ref{o.X, o.Y}
	if o.Fn == rt.Copy {
		if x == y {
			l.ew("copy_"+sizeName(x.Size()), names, refs, 6, []uint32{0, 0, 0, 0}, nil)
		} else {
			l.ew("cast_"+x.String()+"_"+y.String(), names, refs, 6, []uint32{0, 0, 0, 0}, nil)
		}
		return
	}
	if x != y {
		l.err = fmt.Errorf("%s: X is %s but Y is %s (only Copy converts)", l.op.OpName(), x, y)
		return
	}
	if o.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
		l.err = l.unsupported(x, "unknown unary function %d", o.Fn)
		return
	}
	var tr []uint32
	switch {
	case isFloat(x):
		a, b := realBits(x, o.Alpha), realBits(x, o.Beta)
		tr = []uint32{a[0], a[1], b[0], b[1]}
	case x == rt.Bool:
		if o.Fn != rt.Not {
			l.err = l.unsupported(x, "bool supports only Not and Copy")
			return
		}
		tr = []uint32{0, 0, 0, 0}
	default:
		if !intUnary[o.Fn] {
			l.err = l.unsupported(x, "integer unary supports Copy, Neg, Abs, Relu, Sign, Clip, Square")
			return
		}
		a, b := clampInt(o.Alpha, x), clampInt(o.Beta, x)
		tr = []uint32{uint32(a), uint32(uint64(a) >> 32), uint32(b), uint32(uint64(b) >> 32)}
	}
	l.ew("unary_"+x.String(), names, refs, 6, []uint32{0, uint32(o.Fn), 0, 0}, tr)
}

func (l *lowering) binary(o *rt.Binary) {
	dt := o.A.DType
	if o.B.DType != dt {
		l.err = fmt.Errorf("%s: A is %s but B is %s", l.op.OpName(), dt, o.B.DType)
		return
	}
	if o.Fn >= rt.BinaryFn(rt.NumBinaryFns) {
		l.err = l.unsupported(dt, "unknown binary function %d", o.Fn)
		return
	}
	if err := l.needDType(dt); err != nil {
		l.err = err
		return
	}
	want := dt
	if o.Fn.IsCompare() || o.Fn.IsLogical() {
		want = rt.Bool
	}
	if o.Y.DType != want {
		l.err = fmt.Errorf("%s: Y is %s, want %s", l.op.OpName(), o.Y.DType, want)
		return
	}
	if o.Fn.IsLogical() && dt != rt.Bool {
		l.err = l.unsupported(dt, "logical functions take bool")
		return
	}
	if dt == rt.Bool && !o.Fn.IsLogical() && o.Fn != rt.Equal && o.Fn != rt.Max && o.Fn != rt.Min {
		l.err = l.unsupported(dt, "bool supports only And, Or, Xor, Equal, Max, Min")
		return
	}
	if err := l.needDType(o.Y.DType); err != nil {
		l.err = err
		return
	}
	shader := "binary_" + dt.String()
	if o.Fn.IsCompare() {
		shader = "cmp_" + dt.String()
	}
	l.ew(shader, []string{"A", "B", "Y"}, []rt.Ref{o.A, o.B, o.Y}, 6, []uint32{0, uint32(o.Fn)}, nil)
}

func (l *lowering) where(o *rt.Where) {
	if o.Cond.DType != rt.Bool {
		l.err = fmt.Errorf("Where: Cond is %s, want bool", o.Cond.DType)
		return
	}
	if o.A.DType != o.Y.DType || o.B.DType != o.Y.DType {
		l.err = fmt.Errorf("Where: A %s, B %s and Y %s differ", o.A.DType, o.B.DType, o.Y.DType)
		return
	}
	if err := l.needDType(rt.Bool); err != nil {
		l.err = err
		return
	}
	if err := l.needSize(o.Y.DType); err != nil {
		l.err = err
		return
	}
	l.ew("where_"+sizeName(o.Y.DType.Size()), []string{"Cond", "A", "B", "Y"}, []rt.Ref{o.Cond, o.A, o.B, o.Y}, 5, []uint32{0}, nil)
	if l.err == nil && len(l.outs) > 0 {
		// pad to the shader's 32-word block
		last := &l.outs[len(l.outs)-1]
		for len(last.push) < 32 {
			last.push = append(last.push, 0)
		}
	}
}

func (l *lowering) fill(o *rt.Fill) {
	if err := l.needSize(o.Y.DType); err != nil {
		l.err = err
		return
	}
	lo, hi := fillBits(o.Y.DType, o.Value)
	l.ew("fill_"+sizeName(o.Y.DType.Size()), []string{"Y"}, []rt.Ref{o.Y}, 6, []uint32{0, lo, hi, 0}, nil)
}

// fixN writes the element count into word 0 of each elementwise dispatch.
func (l *lowering) fixN(n int64) {
	for i := range l.outs {
		l.outs[i].push[0] = uint32(n)
	}
}

// ---- reductions ----

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

func (l *lowering) bindsOf(names []string, refs []rt.Ref, elems []int64, out int) (binds []bind, offs []uint32, reads, writes []span, ok bool) {
	for i, r := range refs {
		bd, off, sp, err := l.bindElems(names[i], r, elems[i])
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

var intReduce = map[rt.ReduceFn]bool{rt.Sum: true, rt.RMax: true, rt.RMin: true, rt.Prod: true, rt.SumSquare: true, rt.L1: true}

func (l *lowering) reduce(o *rt.Reduce) {
	dt := o.X.DType
	arg := o.Fn == rt.ArgMax || o.Fn == rt.ArgMin
	if o.Fn >= rt.ReduceFn(rt.NumReduceFns) {
		l.err = l.unsupported(dt, "unknown reduce function %d", o.Fn)
		return
	}
	switch {
	case isFloat(dt):
		if err := l.needDType(dt); err != nil {
			l.err = err
			return
		}
	case (dt == rt.I32 || dt == rt.I64) && intReduce[o.Fn]:
		if err := l.needDType(dt); err != nil {
			l.err = err
			return
		}
	default:
		l.err = l.unsupported(dt, "reduce %s is implemented for f32, f16, f64 (and Sum/Max/Min/Prod/SumSquare/L1 for i32, i64)", o.Fn)
		return
	}
	want := dt
	if arg {
		want = rt.I64
	}
	if o.Y.DType != want {
		l.err = fmt.Errorf("%s: Y is %s, want %s", l.op.OpName(), o.Y.DType, want)
		return
	}
	total := int64(o.Outer) * int64(o.Inner)
	nx := total * int64(o.N)
	if total == 0 {
		return
	}
	if !fits32(nx) {
		l.err = fmt.Errorf("%s: %d elements exceed 2^32", l.op.OpName(), nx)
		return
	}
	if o.N == 0 && (arg || o.Fn == rt.Mean) {
		l.err = fmt.Errorf("%s: empty reduction axis", l.op.OpName())
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Y"}, []rt.Ref{o.X, o.Y}, []int64{nx, total}, 1)
	if !ok {
		return
	}
	shader := "reduce_" + dt.String()
	if arg {
		shader = "argreduce_" + dt.String()
	}
	mode := uint32(1)
	if o.Inner == 1 || total < 1024 {
		mode = 0
	}
	sel := uint32(0)
	if o.SelectLast {
		sel = 1
	}
	dsp := dispatch{shader: shader, spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes,
		push: []uint32{uint32(o.Outer), uint32(o.N), uint32(o.Inner), uint32(o.Fn), sel, offs[0], offs[1], mode}}
	if mode == 0 {
		dsp.groups = groups2D(l.d, total)
	} else {
		dsp.groups = groups1D(l.d, total, wgSize)
	}
	l.add(dsp)
}

func (l *lowering) softmax(o *rt.Softmax) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	if o.Y.DType != dt {
		l.err = fmt.Errorf("Softmax: Y is %s, want %s", o.Y.DType, dt)
		return
	}
	total := int64(o.Outer) * int64(o.Inner)
	n := total * int64(o.N)
	if n == 0 {
		return
	}
	if !fits32(n) {
		l.err = fmt.Errorf("Softmax: %d elements exceed 2^32", n)
		return
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "Y"}, []rt.Ref{o.X, o.Y}, []int64{n, n}, 1)
	if !ok {
		return
	}
	mode := uint32(1)
	if o.Inner == 1 || total < 1024 {
		mode = 0
	}
	lg := uint32(0)
	if o.Log {
		lg = 1
	}
	dsp := dispatch{shader: "softmax_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes,
		push: []uint32{uint32(o.Outer), uint32(o.N), uint32(o.Inner), lg, offs[0], offs[1], mode, 0}}
	if mode == 0 {
		dsp.groups = groups2D(l.d, total)
	} else {
		dsp.groups = groups1D(l.d, total, wgSize)
	}
	l.add(dsp)
}

func (l *lowering) normalize(o *rt.Normalize) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	n := int64(o.Outer) * int64(o.N)
	if n == 0 {
		return
	}
	if !fits32(n) {
		l.err = fmt.Errorf("Normalize: %d elements exceed 2^32", n)
		return
	}
	names := []string{"X", "Scale", "Bias", "Y"}
	refs := []rt.Ref{o.X, o.Scale, o.Bias, o.Y}
	elems := []int64{n, int64(o.N), int64(o.N), n}
	flags := uint32(0)
	if o.Scale.Buf != nil {
		flags |= 1
	} else {
		refs[1], elems[1] = o.X, 1
	}
	if o.Bias.Buf != nil {
		flags |= 2
	} else {
		refs[2], elems[2] = o.X, 1
	}
	for i, r := range refs {
		if r.DType != dt {
			l.err = fmt.Errorf("Normalize: %s is %s, want %s", names[i], r.DType, dt)
			return
		}
	}
	binds, offs, reads, writes, ok := l.bindsOf(names, refs, elems, 3)
	if !ok {
		return
	}
	e := realBits(dt, o.Eps)
	l.add(dispatch{shader: "normalize_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes,
		groups: groups2D(l.d, int64(o.Outer)),
		push:   []uint32{uint32(o.Outer), uint32(o.N), flags, 0, offs[0], offs[1], offs[2], offs[3], e[0], e[1]}})
}

func (l *lowering) gather(o *rt.Gather) {
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
	idx64 := uint32(0)
	offI := offs[1]
	if o.Idx.DType == rt.I64 {
		idx64 = 1
		offI *= 2 // the shader reads indices as int32 words
	}
	l.add(dispatch{shader: "gather_" + sizeName(dt.Size()), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes,
		groups: groups1D(l.d, n, wgSize),
		push:   []uint32{uint32(o.Outer), uint32(o.Axis), uint32(o.Inner), uint32(nidx), offs[0], offI, offs[2], idx64}})
}

// ---- matmul ----

// gemmTile is a matmul.comp configuration (shaders/gen's gemmTiles): a
// bm x bn block per workgroup of (bm/tm)*(bn/tn) invocations, each with a
// tm x tn register micro-tile, walking K in bk slices through two
// shared-memory stages.
type gemmTile struct {
	name               string
	bm, bn, bk, tm, tn int
}

// gemmTiles, largest first. Shared memory is 2*bk*(bm+bn) elements of the
// compute type: 32 KiB for "l" in f32/f16, so every tile fits the 32 KiB
// guaranteed... by lavapipe and the 48 KiB of NVIDIA; f64 has only "s"
// and "t" (shaders/gen compiles no larger f64 tile).
var gemmTiles = []gemmTile{
	{"l", 128, 128, 16, 8, 8},
	{"m", 128, 64, 16, 8, 4},
	{"s", 64, 64, 16, 8, 4},
	{"t", 32, 32, 16, 4, 4},
}

func (t gemmTile) threads() int { return (t.bm / t.tm) * (t.bn / t.tn) }

func (t gemmTile) shared(dt rt.DType) int {
	es := 4
	if dt == rt.F64 {
		es = 8
	}
	return 2 * t.bk * (t.bm + t.bn) * es
}

func (t gemmTile) grid(m, n, batch int) int64 {
	return int64((m+t.bm-1)/t.bm) * int64((n+t.bn-1)/t.bn) * int64(batch)
}

// forceGemmTile, when set (tests), selects that tile whenever it fits.
var forceGemmTile string

// gemmTarget is the number of workgroups a tile should produce before the
// next smaller one is preferred: enough to fill a large GPU (132 SMs of
// an H100/H200 with two 256-invocation workgroups each). A CPU device
// (lavapipe) has few cores and prefers the largest tile.
func gemmTarget(cpu bool) int64 {
	if cpu {
		return 1
	}
	return 256
}

// pickTile chooses the matmul.comp tile for an m x n (x batch) output:
// the largest tile that fits the device (shared memory, invocations),
// is not more than twice the output in either dimension, and gives at
// least gemmTarget workgroups; failing that, the smallest that fits.
func pickTile(dt rt.DType, m, n, batch int, sharedLim, maxInv uint32, cpu bool) (gemmTile, bool) {
	return pickFrom(gemmTiles, dt, m, n, batch, sharedLim, maxInv, cpu)
}

// pickFrom is pickTile over a tile table (largest first).
func pickFrom(tiles []gemmTile, dt rt.DType, m, n, batch int, sharedLim, maxInv uint32, cpu bool) (gemmTile, bool) {
	var fit []gemmTile
	for _, t := range tiles {
		if dt == rt.F64 && t.bm*t.bn > 64*64 {
			continue
		}
		if t.shared(dt) <= int(sharedLim) && t.threads() <= int(maxInv) {
			fit = append(fit, t)
		}
	}
	if len(fit) == 0 {
		return gemmTile{}, false
	}
	if forceGemmTile != "" {
		for _, t := range fit {
			if t.name == forceGemmTile {
				return t, true
			}
		}
	}
	for _, t := range fit {
		if t.bm >= 2*m || t.bn >= 2*n {
			continue
		}
		if t.grid(m, n, batch) >= gemmTarget(cpu) {
			return t, true
		}
	}
	return fit[len(fit)-1], true
}

func (l *lowering) matmul(o *rt.MatMul) {
	dt := o.A.DType
	if !l.floatOnly(dt) {
		return
	}
	for _, p := range []struct {
		n string
		r rt.Ref
	}{{"B", o.B}, {"Y", o.Y}, {"Bias", o.Bias}} {
		if p.r.Buf != nil && p.r.DType != dt {
			l.err = fmt.Errorf("MatMul: %s is %s, want %s", p.n, p.r.DType, dt)
			return
		}
	}
	if o.StrideA < 0 || o.StrideB < 0 || o.StrideY < 0 {
		l.err = fmt.Errorf("MatMul: negative batch strides are not supported")
		return
	}
	if o.Act.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
		l.err = l.unsupported(dt, "unknown activation %d", o.Act.Fn)
		return
	}
	M, N, K, B := int64(o.M), int64(o.N), int64(o.K), int64(o.Batch)
	if M == 0 || N == 0 {
		return
	}
	ea := (B-1)*int64(o.StrideA) + M*K
	eb := (B-1)*int64(o.StrideB) + K*N
	ey := (B-1)*int64(o.StrideY) + M*N
	if !fits32(ea) || !fits32(eb) || !fits32(ey) {
		l.err = fmt.Errorf("MatMul: operands exceed 2^32 elements")
		return
	}
	names := []string{"A", "B", "Bias", "Y"}
	refs := []rt.Ref{o.A, o.B, o.Y, o.Y}
	elems := []int64{max(ea, 1), max(eb, 1), 1, ey}
	var binds []bind
	var offs []uint32
	var reads, writes []span
	for i := range refs {
		var bd bind
		var off uint32
		var sp span
		var err error
		if i == 2 && o.Bias.Buf != nil {
			bd, off, sp, err = l.bindRef("Bias", o.Bias)
		} else {
			bd, off, sp, err = l.bindElems(names[i], refs[i], elems[i])
		}
		if err != nil {
			l.err = err
			return
		}
		binds, offs = append(binds, bd), append(offs, off)
		switch {
		case i == 3:
			writes = append(writes, sp)
		case i == 2 && o.Bias.Buf == nil:
		default:
			reads = append(reads, sp)
		}
	}
	flags := uint32(0)
	if o.TransA {
		flags |= 1
	}
	if o.TransB {
		flags |= 2
	}
	var bs0, bs1 int
	if o.Bias.Buf != nil {
		flags |= 4
		st := o.Bias.StridesOrContiguous()
		bs0, bs1 = st[0], st[1]
	}
	al, be := realBits(dt, o.Alpha), realBits(dt, o.Beta)
	aa, ab := realBits(dt, o.Act.Alpha), realBits(dt, o.Act.Beta)
	push := []uint32{uint32(M), uint32(N), uint32(K), flags,
		uint32(o.StrideA), uint32(o.StrideB), uint32(o.StrideY), uint32(o.Act.Fn),
		offs[0], offs[1], offs[3], offs[2], uint32(int32(bs0)), uint32(int32(bs1)), uint32(B), 0,
		al[0], al[1], be[0], be[1], aa[0], aa[1], ab[0], ab[1]}
	bz := uint32(min(B, int64(l.d.maxGroups[2])))
	if (M == 1 || N == 1) && K >= 128 {
		g := groups2D(l.d, M*N)
		if M == 1 && !o.TransB || N == 1 && o.TransA {
			// column mode: W is contiguous along the outputs
			push[3] |= 8
			if M != 1 {
				push[3] |= 16
			}
			g = groups2D(l.d, (M*N+31)/32)
		}
		g[2] = bz
		l.add(dispatch{shader: "gemv_" + dt.String(), spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes, push: push, groups: g})
		return
	}
	if l.coopMatMul(o, dt, binds, reads, writes, push, bz) {
		return
	}
	lim := l.d.phys.limits
	t, ok := pickTile(dt, o.M, o.N, o.Batch, lim.MaxComputeSharedMemorySize, lim.MaxComputeWorkGroupInvocations, l.d.phys.info.Kind == rt.KindCPU)
	if !ok {
		l.err = l.unsupported(dt, "no GEMM tile fits maxComputeSharedMemorySize %d", lim.MaxComputeSharedMemorySize)
		return
	}
	bm, bn := int64(t.bm), int64(t.bn)
	gx, gy := (N+bn-1)/bn, (M+bm-1)/bm
	if gx > int64(l.d.maxGroups[0]) || gy > int64(l.d.maxGroups[1]) {
		l.err = fmt.Errorf("MatMul: %dx%d output needs more workgroups than the device allows", M, N)
		return
	}
	if sk := l.pickSplitK(t, dt, o.M, o.N, o.K, o.Batch); sk.s > 1 {
		// partial pass: A, B -> scratch; reduction: scratch, Bias -> Y
		pp := append(append([]uint32(nil), push...), uint32(sk.s), uint32(sk.ks))
		sb, ss := sk.scratch()
		l.add(dispatch{shader: "matmulk_" + dt.String() + "_" + t.name, spec: []uint32{uint32(t.threads())},
			binds: []bind{binds[0], binds[1], binds[2], sb}, reads: reads[:2], writes: []span{ss}, push: pp,
			groups: [3]uint32{uint32(gx), uint32(gy), uint32(min(B*int64(sk.s), int64(l.d.maxGroups[2])))}, scratch: sk.bytes})
		rflags := uint32(0)
		rreads := []span{ss}
		if o.Bias.Buf != nil {
			rflags = 1
			rreads = append(rreads, reads[2])
		}
		rp := []uint32{uint32(M), uint32(N), uint32(sk.s), uint32(B),
			uint32(N), 0, uint32(N), uint32(o.StrideY),
			offs[3], offs[2], 0, rflags, uint32(int32(bs0)), uint32(int32(bs1)), uint32(o.Act.Fn), 0,
			al[0], al[1], be[0], be[1], aa[0], aa[1], ab[0], ab[1]}
		l.add(dispatch{shader: "splitk_" + dt.String(), spec: []uint32{wgSize}, binds: []bind{sb, binds[2], binds[3]},
			reads: rreads, writes: writes, push: rp, groups: groups1D(l.d, B*M*N, wgSize), scratch: sk.bytes})
		return
	}
	l.add(dispatch{shader: "matmul_" + dt.String() + "_" + t.name, spec: []uint32{uint32(t.threads())},
		binds: binds, reads: reads, writes: writes, push: push, groups: [3]uint32{uint32(gx), uint32(gy), bz}})
}

// ---- split-K ----

// Split-K: where a GEMM's output tiles give fewer than gemmTarget
// workgroups, matmul.comp / convgemm.comp built with SPLITK (variants
// matmulk_*, convgemmk_*) compute S partial tiles per output tile, each
// over one slice of K (a multiple of the tile's BK, at least splitMinK
// deep), into the stream's scratch buffer; splitk.comp then sums the S
// partials in a fixed order and applies alpha, beta*Bias and the
// activation. The scratch buffer is bound through the scratchBuf sentinel,
// which the stream replaces with the buffer it owns (see stream.Launch).

// splitMinK is the least K depth of one split-K slice.
const splitMinK = 256

// forceSplitK, when > 0 (tests), splits every tiled GEMM (MatMul and
// Conv) into that many K slices, fewer where K has fewer BK slices, on
// any device.
var forceSplitK int

// scratchBuf stands for the stream's scratch buffer in binds and spans.
var scratchBuf = &buffer{}

type splitPlan struct {
	s, ks int   // slices, K per slice
	bytes int64 // scratch size
}

func (p splitPlan) scratch() (bind, span) {
	return bind{b: scratchBuf, off: 0, rng: p.bytes}, span{scratchBuf, 0, p.bytes}
}

// pickSplitK chooses the K split of a batch x m x n x k GEMM run with tile
// t: S slices so that tiles*S reaches gemmTarget (at most k/splitMinK, so
// no split on CPU devices or where K is short), each a multiple of t.bk.
// S = 1 means no split.
func (l *lowering) pickSplitK(t gemmTile, dt rt.DType, m, n, k, batch int) splitPlan {
	return splitFor(t, dt, m, n, k, batch, l.d.phys.info.Kind == rt.KindCPU, l.d.maxRange)
}

// splitFor is pickSplitK for a device kind and maxStorageBufferRange (the
// scratch binding must fit it).
func splitFor(t gemmTile, dt rt.DType, m, n, k, batch int, cpu bool, maxRange int64) splitPlan {
	if k <= t.bk {
		return splitPlan{s: 1, ks: k}
	}
	grid := t.grid(m, n, batch)
	s := 1
	switch {
	case forceSplitK > 0:
		s = forceSplitK
	case !cpu && grid < gemmTarget(cpu):
		s = int(min((gemmTarget(cpu)+grid-1)/grid, int64(k/splitMinK)))
	}
	es := int64(4)
	if dt == rt.F64 {
		es = 8
	}
	for ; s > 1; s-- {
		ks := (k + s - 1) / s
		ks = (ks + t.bk - 1) / t.bk * t.bk
		s := (k + ks - 1) / ks
		if s <= 1 {
			break
		}
		elems := int64(batch) * int64(s) * int64(m) * int64(n)
		if !fits32(elems) || elems*es > maxRange || int64(batch)*int64(s) > int64(^uint32(0)>>1) {
			continue
		}
		return splitPlan{s: s, ks: ks, bytes: elems * es}
	}
	return splitPlan{s: 1, ks: k}
}

// ---- conv and pool (Conv itself: conv.go) ----

func (l *lowering) convT(o *rt.ConvTranspose) {
	dt := o.X.DType
	if !l.floatOnly(dt) {
		return
	}
	l.convCommon("convt_"+dt.String(), dt, o.X, o.W, o.Bias, o.Y, o.N, o.C, o.H, o.W_, o.K, o.OH, o.OW, o.KH, o.KW,
		o.StrideH, o.StrideW, o.PadT, o.PadL, o.DilH, o.DilW, o.Groups, int64(o.C)*int64(o.K/o.Groups)*int64(o.KH)*int64(o.KW), nil)
}

func (l *lowering) convCommon(shader string, dt rt.DType, x, w, bias, y rt.Ref, N, C, H, W, K, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, groups int, nw int64, act *rt.Activation) {
	for _, p := range []struct {
		n string
		r rt.Ref
	}{{"W", w}, {"Y", y}, {"Bias", bias}} {
		if p.r.Buf != nil && p.r.DType != dt {
			l.err = fmt.Errorf("%s: %s is %s, want %s", l.op.OpName(), p.n, p.r.DType, dt)
			return
		}
	}
	ny := int64(N) * int64(K) * int64(OH) * int64(OW)
	nx := int64(N) * int64(C) * int64(H) * int64(W)
	if ny == 0 {
		return
	}
	if !fits32(ny) || !fits32(nx) || !fits32(nw) {
		l.err = fmt.Errorf("%s: operands exceed 2^32 elements", l.op.OpName())
		return
	}
	if pt < 0 || pl < 0 {
		l.err = fmt.Errorf("%s: negative padding", l.op.OpName())
		return
	}
	flags := uint32(0)
	b := bias
	nb := int64(K)
	if bias.Buf != nil {
		flags = 1
	} else {
		b, nb = y, 1
	}
	binds, offs, reads, writes, ok := l.bindsOf([]string{"X", "W", "Bias", "Y"}, []rt.Ref{x, w, b, y}, []int64{max(nx, 1), max(nw, 1), nb, ny}, 3)
	if !ok {
		return
	}
	if bias.Buf == nil {
		reads = reads[:2]
	}
	push := []uint32{uint32(N), uint32(C), uint32(H), uint32(W), uint32(K), uint32(OH), uint32(OW), uint32(KH),
		uint32(KW), uint32(sh), uint32(sw), uint32(pt), uint32(pl), uint32(dh), uint32(dw), uint32(groups),
		offs[0], offs[1], offs[2], offs[3], flags}
	if act != nil {
		if act.Fn >= rt.UnaryFn(rt.NumUnaryFns) {
			l.err = l.unsupported(dt, "unknown activation %d", act.Fn)
			return
		}
		aa, ab := realBits(dt, act.Alpha), realBits(dt, act.Beta)
		push = append(push, uint32(act.Fn), 0, 0, aa[0], aa[1], ab[0], ab[1])
	}
	l.add(dispatch{shader: shader, spec: []uint32{wgSize}, binds: binds, reads: reads, writes: writes, push: push, groups: groups1D(l.d, ny, wgSize)})
}

func (l *lowering) pool(o *rt.Pool) {
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

// lower validates op and returns its dispatches (pipelines not resolved).
func (d *device) lower(op rt.Op) ([]dispatch, error) { return d.lowerOp(op, false) }

func (d *device) lowerOp(op rt.Op, probe bool) ([]dispatch, error) {
	if op == nil {
		return nil, fmt.Errorf("vulkan: nil op")
	}
	if err := rt.CheckOp(op); err != nil {
		return nil, err
	}
	l := &lowering{d: d, op: op, probe: probe}
	switch o := op.(type) {
	case *rt.Unary:
		l.unary(o)
		l.fixN(o.Y.Len())
	case *rt.Binary:
		l.binary(o)
		l.fixN(o.Y.Len())
	case *rt.Where:
		l.where(o)
		l.fixN(o.Y.Len())
	case *rt.Fill:
		l.fill(o)
		l.fixN(o.Y.Len())
	case *rt.Reduce:
		l.reduce(o)
	case *rt.Softmax:
		l.softmax(o)
	case *rt.Normalize:
		l.normalize(o)
	case *rt.Gather:
		l.gather(o)
	case *rt.MatMul:
		l.matmul(o)
	case *rt.Conv:
		l.conv(o)
	case *rt.ConvTranspose:
		l.convT(o)
	case *rt.Pool:
		l.pool(o)
	case *rt.GatherElements:
		l.gatherElements(o)
	case *rt.ScatterElements:
		l.scatterElements(o)
	case *rt.TopK:
		l.topK(o)
	default:
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
