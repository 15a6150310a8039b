//go:build cgo

package vulkan

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// ewUnroll is the items per invocation and pass of the elementwise
// kernels (common.glsl's EW_U).
const ewUnroll = 4

// noVecEW turns the 4-item vector variants of the elementwise kernels off
// (tests and benchmarks compare both paths); ewMaxGroups, when > 0, caps
// their workgroups (the kernels loop over the grid: fewer, fuller
// workgroups).
var (
	noVecEW     bool
	ewMaxGroups int
)

// vecDTypes are the dtypes of the vector variants unaryv_, binaryv_ and
// castv_ (shaders/gen: vec.glsl's X_VT).
var vecDTypes = map[rt.DType]bool{rt.F32: true, rt.F16: true, rt.I32: true}

// vecCopy is copyv_'s element sizes (four elements as one 32-bit word, two
// or four words).
func vecCopy(size int) bool { return size == 1 || size == 2 || size == 4 }

// ew lowers an elementwise op over refs (all of one shape): push words are
// header (whose word 0 ew sets to the element count), dims 1..rank-1,
// element offsets, strides, then trailer (8-byte aligned). The last ref is
// the output.
//
// vec, when not "", names the shader's 4-item vector variant (vec.glsl),
// which ew takes when vecLayout allows; its header is header's first two
// words, then the item count and the broadcast mask (header's words 2
// and 3, when present, must be padding). splat says whether the variant
// may read an input broadcast along the innermost dim.
func (l *lowering) ew(shader, vec string, splat bool, names []string, refs []rt.Ref, rank int, header, trailer []uint32) {
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
	sh, st := rt.Coalesce(refs[0].Shape, strides...)
	if len(sh) > rank {
		l.err = fmt.Errorf("%s: strided view of shape %v has rank %d after merging contiguous dims; the Vulkan kernel handles at most %d (make an operand contiguous first)", l.op.OpName(), refs[0].Shape, len(sh), rank)
		return
	}
	items := n // what the kernel walks: elements, or 4-item vectors
	var mask uint32
	if vec != "" && !noVecEW { // probes too: Prepare must build the variant the launch takes
		if m, ok := vecLayout(l.d, sh, st, refs, splat); ok {
			shader, mask = vec, m
			last := len(sh) - 1
			sh = append([]int{}, sh...)
			sh[last] /= 4 // rank 1 leaves a scalar tail
			items = n / 4
			for k := range st {
				st[k] = append([]int{}, st[k]...)
				st[k][last] *= 4
			}
			h := append([]uint32{}, header...)
			for len(h) < 4 {
				h = append(h, 0)
			}
			h[2], h[3] = uint32(n), mask
			header = h
		}
	}
	// The merged dims lead and size-1 dims pad the end, which the kernels
	// skip (common.glsl's ew_index): a contiguous view indexes with no
	// division at all.
	full := make([]int, rank)
	for i := range full {
		full[i] = 1
		if i < len(sh) {
			full[i] = sh[i]
		}
	}
	groups := groups1D(l.d, items, wgSize*ewUnroll)
	if items == 0 {
		groups = groups1D(l.d, n, wgSize) // only the tail
	}
	if ewMaxGroups > 0 && groups[0] > uint32(ewMaxGroups) {
		groups[0] = uint32(ewMaxGroups)
	}
	dsp := dispatch{shader: shader, spec: []uint32{wgSize}, groups: groups}
	push := append([]uint32{}, header...)
	push[0] = uint32(items)
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
	if shader == vec {
		// vecLayout checked the view offsets; the binding offsets are
		// multiples of minAlign (>= 16 bytes), so the element offsets
		// within the bindings keep that alignment
		for k, off := range offs {
			if mask&(1<<k) == 0 && off%4 != 0 {
				l.err = fmt.Errorf("%s: internal error: operand %s at element %d of its binding is not 4-aligned", l.op.OpName(), names[k], off)
				return
			}
		}
	}
	push = append(push, offs...)
	for k := range refs {
		for i := 0; i < rank; i++ {
			s := 0
			if i < len(sh) {
				s = st[k][i]
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

// vecLayout reports whether the coalesced space sh with strides st (one
// list per ref, the output last) can run 4 items per vector, and returns
// the mask of inputs broadcast along the innermost dim (stride 0, read as
// one scalar per vector; only when splat). Every other operand must be
// contiguous along the innermost dim, start at a multiple of 4 elements
// from its buffer's start (the binding offsets are multiples of 16 bytes)
// and have outer strides that are multiples of 4. The innermost dim must
// be a multiple of 4, except at rank 1, where the kernel finishes a
// scalar tail.
func vecLayout(d *device, sh []int, st [][]int, refs []rt.Ref, splat bool) (uint32, bool) {
	if len(sh) == 0 {
		return 0, false
	}
	last := len(sh) - 1
	if sh[last] < 4 || (last > 0 && sh[last]%4 != 0) {
		return 0, false
	}
	var mask uint32
	for k, r := range refs {
		es := int64(r.DType.Size())
		switch st[k][last] {
		case 0:
			if k == len(refs)-1 || !splat {
				return 0, false
			}
			mask |= 1 << k
			continue
		case 1:
		default:
			return 0, false
		}
		if r.Off%(4*es) != 0 || d.minAlign%(4*es) != 0 {
			return 0, false
		}
		for _, s := range st[k][:last] {
			if s%4 != 0 {
				return 0, false
			}
		}
	}
	return mask, true
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

func (l *lowering) Unary(o *rt.Unary) {
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
			vec := ""
			if vecCopy(x.Size()) {
				vec = "copyv_" + sizeName(x.Size())
			}
			l.ew("copy_"+sizeName(x.Size()), vec, false, names, refs, 6, []uint32{0, 0, 0, 0}, nil)
		} else {
			vec := ""
			if vecDTypes[x] && vecDTypes[y] {
				vec = "castv_" + x.String() + "_" + y.String()
			}
			l.ew("cast_"+x.String()+"_"+y.String(), vec, true, names, refs, 6, []uint32{0, 0, 0, 0}, nil)
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
	vec := ""
	if vecDTypes[x] {
		vec = "unaryv_" + x.String()
	}
	l.ew("unary_"+x.String(), vec, true, names, refs, 6, []uint32{0, uint32(o.Fn), 0, 0}, tr)
}

func (l *lowering) Binary(o *rt.Binary) {
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
	shader, vec := "binary_"+dt.String(), ""
	if vecDTypes[dt] {
		vec = "binaryv_" + dt.String()
	}
	if o.Fn.IsCompare() {
		shader, vec = "cmp_"+dt.String(), ""
	}
	l.ew(shader, vec, true, []string{"A", "B", "Y"}, []rt.Ref{o.A, o.B, o.Y}, 6, []uint32{0, uint32(o.Fn)}, nil)
}

func (l *lowering) Where(o *rt.Where) {
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
	l.ew("where_"+sizeName(o.Y.DType.Size()), "", false, []string{"Cond", "A", "B", "Y"}, []rt.Ref{o.Cond, o.A, o.B, o.Y}, 5, []uint32{0}, nil)
	if l.err == nil && len(l.outs) > 0 {
		// pad to the shader's 32-word block
		last := &l.outs[len(l.outs)-1]
		for len(last.push) < 32 {
			last.push = append(last.push, 0)
		}
	}
}

func (l *lowering) Fill(o *rt.Fill) {
	if err := l.needSize(o.Y.DType); err != nil {
		l.err = err
		return
	}
	bits := rt.FillBits(o.Y.DType, o.Value)
	lo, hi := uint32(bits), uint32(bits>>32)
	vec := ""
	if vecCopy(o.Y.DType.Size()) {
		vec = "fillv_" + sizeName(o.Y.DType.Size())
	}
	l.ew("fill_"+sizeName(o.Y.DType.Size()), vec, false, []string{"Y"}, []rt.Ref{o.Y}, 6, []uint32{0, lo, hi, 0}, nil)
}
