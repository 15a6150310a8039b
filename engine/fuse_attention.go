package engine

import (
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// Plan-time fusion of attention: the ops that exported transformers
// lower scaled dot-product attention to,
//
//	S = Alpha * A @ B                (MatMul, no bias or activation)
//	S = S * c  or  S / c             (optional, c a constant scalar; repeated)
//	S = S + Mask                     (optional, one additive mask)
//	P = softmax(S) over the keys     (Softmax, last axis)
//	Y = P @ V                        (MatMul, no bias or activation)
//
// adjacent in the plan, become one rt.Attention op when no other op reads
// S or P and the device supports it (plan.optional). The pattern is what
// nn.MultiheadAttention exports to (torch 1.13 scales Q by a Div before
// the first MatMul; torch 2 scales Q and K^T by Muls) and what
// lowerAttention emits for ONNX Attention without a mask. The Attention op
// reads Q, K and V where the MatMuls read them (K^T, stored, is read
// through strides), so the scores never reach memory.

// attnMatch is a candidate attention pattern being matched.
type attnMatch struct {
	p      *plan
	m1, m3 *rt.MatMul
	scale  float64
	mask   rt.Ref
	roots  map[*tensor]int // intermediate roots: their reads by the pattern
	cur    rt.Ref          // the scores (or weights) as the next op must read them
	n      int             // ops matched
}

// fuseAttention replaces attention patterns with rt.Attention ops.
func (p *plan) fuseAttention() {
	if !p.mayFuse() {
		return
	}
	reads := p.rootReads()
	seq := p.opSeq()
	at := p.opsAt(seq)
	changed := false
	for k := 0; k < len(seq); k++ {
		m1, ok := at(k).(*rt.MatMul)
		if !ok {
			continue
		}
		m := &attnMatch{p: p, m1: m1, scale: m1.Alpha, roots: map[*tensor]int{}}
		var ops []rt.Op
		for j := k; j < len(seq) && j < k+8; j++ {
			ops = append(ops, at(j))
		}
		att := m.match(ops, reads)
		if att == nil {
			continue
		}
		end := k + m.n - 1
		gone := p.absorbOperands(at, k, end, att, reads)
		if j, ok := p.absorbOutput(at, end, len(seq), att, reads, seq[end].s+1); ok {
			gone = append(gone, j)
		}
		last := seq[end]
		for j := k; j < end; j++ {
			p.steps[seq[j].s].ops[seq[j].i] = nil
		}
		for _, j := range gone {
			p.steps[seq[j].s].ops[seq[j].i] = nil
		}
		p.steps[last.s].ops[last.i] = att
		for _, r := range []rt.Ref{att.Q, att.K, att.V, att.Mask} {
			if sl, ok := r.Buf.(slot); ok {
				sl.t.lastUse = max(sl.t.lastUse, last.s+1)
			}
		}
		k += m.n - 1
		changed = true
	}
	if changed {
		p.compactOps()
	}
}

// rootReads counts the op operands that read each arena root.
func (p *plan) rootReads() map[*tensor]int {
	reads := map[*tensor]int{}
	for _, st := range p.steps {
		for _, op := range st.ops {
			for _, o := range rt.Operands(op) {
				if sl, ok := o.Ref.Buf.(slot); ok && !o.Output {
					reads[sl.t]++
				}
			}
		}
	}
	return reads
}

// compactOps drops the nil ops that fusion left and recounts the ops.
func (p *plan) compactOps() {
	p.opCounts = map[string]int{}
	p.numOps = 0
	for s := range p.steps {
		ops := p.steps[s].ops[:0]
		for _, op := range p.steps[s].ops {
			if op != nil {
				ops = append(ops, op)
				p.opCounts[op.OpName()]++
			}
		}
		p.steps[s].ops = ops
		p.numOps += len(ops)
	}
}

// rootOfRef returns the arena root a ref views, or nil.
func rootOfRef(r rt.Ref) *tensor {
	if sl, ok := r.Buf.(slot); ok {
		return sl.t
	}
	return nil
}

// isScores reports whether r views the scores as the pattern wrote them:
// the same root, offset and element count, contiguous.
func (m *attnMatch) isScores(r rt.Ref) bool {
	return r.Buf == m.cur.Buf && r.Off == m.cur.Off && r.DType == m.cur.DType && r.Contiguous() &&
		r.Len() == int64(m.m1.Batch)*int64(m.m1.M)*int64(m.m1.N)
}

// write moves the scores to the output y of a pattern op (which read
// them): in place, or into a new intermediate.
func (m *attnMatch) write(y rt.Ref) bool {
	if !m.isScores(y) {
		if rootOfRef(y) == nil || !y.Contiguous() || y.Len() != m.cur.Len() || y.DType != m.cur.DType {
			return false
		}
		m.cur = y
	}
	m.roots[rootOfRef(y)] += 0
	return true
}

// read records that a pattern op reads the scores.
func (m *attnMatch) read() { m.roots[rootOfRef(m.cur)]++ }

// scalarConst returns the value of a constant that r broadcasts.
func scalarConst(r rt.Ref) (float64, bool) {
	t := rootOfRef(r)
	if t == nil || t.value == nil || t.value.Len() != 1 || r.Off != 0 {
		return 0, false
	}
	return t.value.Float64s()[0], true
}

// match matches ops (from a MatMul on) against the pattern and returns
// the Attention op that replaces its first m.n ops, or nil.
func (m *attnMatch) match(ops []rt.Op, reads map[*tensor]int) *rt.Attention {
	m1 := m.m1
	if m1.Bias.Buf != nil || m1.Act != (rt.Activation{}) || m1.StrideY != m1.M*m1.N || rootOfRef(m1.Y) == nil {
		return nil
	}
	m.cur = m1.Y
	m.roots[rootOfRef(m1.Y)] += 0
	masked := false
	for k := 1; k < len(ops); k++ {
		switch o := ops[k].(type) {
		case *rt.Binary:
			if !m.isScores(o.A) && !((o.Fn == rt.Add || o.Fn == rt.Mul) && m.isScores(o.B)) {
				return nil
			}
			other := o.B
			if !m.isScores(o.A) {
				other = o.A
			}
			switch o.Fn {
			case rt.Mul, rt.Div:
				c, ok := scalarConst(other)
				if !ok || c == 0 {
					return nil
				}
				if o.Fn == rt.Mul {
					m.scale *= c
				} else {
					m.scale /= c
				}
			case rt.Add:
				if masked || rootOfRef(other) == rootOfRef(m.cur) {
					return nil
				}
				masked, m.mask = true, other
			default:
				return nil
			}
			m.read()
			if !m.write(o.Y) {
				return nil
			}
		case *rt.Softmax:
			if !m.isScores(o.X) || o.Log || o.Inner != 1 || o.N != m1.N || o.Outer != m1.Batch*m1.M {
				return nil
			}
			m.read()
			if !m.write(o.Y) {
				return nil
			}
			if k+1 >= len(ops) {
				return nil
			}
			m3, ok := ops[k+1].(*rt.MatMul)
			if !ok || !m.isScores(m3.A) || m3.TransA || m3.Bias.Buf != nil || m3.Act != (rt.Activation{}) || m3.Alpha != 1 ||
				m3.Batch != m1.Batch || m3.M != m1.M || m3.K != m1.N || m3.StrideA != m1.M*m1.N {
				return nil
			}
			m.read()
			m.m3, m.n = m3, k+2
			return m.build(reads)
		default:
			return nil
		}
	}
	return nil
}

// build checks that nothing else sees the intermediates and returns the
// Attention op.
func (m *attnMatch) build(reads map[*tensor]int) *rt.Attention {
	m1, m3 := m.m1, m.m3
	for t, n := range m.roots {
		if reads[t] != n || t.input || t.where != inArena || t.isOutput() {
			return nil
		}
	}
	for _, r := range []rt.Ref{m1.A, m1.B, m3.B, m.mask} {
		if _, ok := m.roots[rootOfRef(r)]; ok && r.Buf != nil {
			return nil
		}
	}
	if _, ok := m.roots[rootOfRef(m3.Y)]; ok {
		return nil
	}
	b, h := attnHeads(m1.Y, m1.Batch, m1.M, m1.N)
	lq, lk, d, dv := m1.M, m1.N, m1.K, m3.N
	view := func(r rt.Ref, stride, l, w, row, col int) rt.Ref {
		r.Shape = []int{b, h, l, w}
		r.Strides = []int{h * stride, stride, row, col}
		return r
	}
	q := view(m1.A, m1.StrideA, lq, d, d, 1)
	if m1.TransA {
		q = view(m1.A, m1.StrideA, lq, d, 1, lq)
	}
	k := view(m1.B, m1.StrideB, lk, d, 1, lk)
	if m1.TransB {
		k = view(m1.B, m1.StrideB, lk, d, d, 1)
	}
	v := view(m3.B, m3.StrideB, lk, dv, dv, 1)
	if m3.TransB {
		v = view(m3.B, m3.StrideB, lk, dv, 1, lk)
	}
	y := view(m3.Y, m3.StrideY, lq, dv, dv, 1)
	att := &rt.Attention{Q: q, K: k, V: v, Y: y, B: b, H: h, Lq: lq, Lk: lk, D: d, Dv: dv, Scale: m.scale}
	if m.mask.Buf != nil {
		mk, ok := attnMaskView(m.mask, b, h, lq, lk)
		if !ok {
			return nil
		}
		att.Mask = mk
	}
	if rt.CheckOp(att) != nil || !m.p.optional(att) {
		return nil
	}
	return att
}

// attnHeads splits the batch of the scores y (Batch matrices M×N) into
// batch and heads: [B, H, M, N] when y's shape says so, else [1, Batch].
func attnHeads(y rt.Ref, batch, m, n int) (b, h int) {
	s := y.Shape
	r := len(s)
	if r >= 3 && s[r-2] == m && s[r-1] == n && int(rt.NumElements(s[:r-2])) == batch {
		h = s[r-3]
		if h > 0 && batch%h == 0 {
			return batch / h, h
		}
	}
	return 1, batch
}

// attnMaskView returns the mask r, of the scores' shape [..., Lq, Lk], as
// a [B, H, Lq, Lk] view: its dim before the last two is the heads when its
// shape splits the batch as the scores do (attnHeads), and the dims in
// front of that fold into one batch stride.
func attnMaskView(r rt.Ref, b, h, lq, lk int) (rt.Ref, bool) {
	s, st := r.Shape, r.StridesOrContiguous()
	n := len(s)
	if n < 2 || s[n-2] != lq || s[n-1] != lk || int(rt.NumElements(s[:n-2])) != b*h {
		return r, false
	}
	// merged folds dims [lo, hi) into one stride, if they allow.
	merged := func(lo, hi int) (int, bool) {
		stride, have := 0, false
		for i := hi - 1; i >= lo; i-- {
			if s[i] == 1 {
				continue
			}
			if !have {
				stride, have = st[i], true
				continue
			}
			// dim i must step over the dims after it: st[i] == size*stride
			// of the merged inner part.
			inner := int(rt.NumElements(s[i+1 : hi]))
			if st[i] != inner*stride {
				return 0, false
			}
		}
		return stride, true
	}
	var sb, sh int
	if mb, mh := attnHeads(r, b*h, lq, lk); mb == b && mh == h && n >= 3 {
		var ok bool
		if sb, ok = merged(0, n-3); !ok {
			return r, false
		}
		sh = st[n-3]
		if s[n-3] == 1 {
			sh = 0
		}
	} else {
		s1, ok := merged(0, n-2)
		if !ok {
			return r, false
		}
		sb, sh = h*s1, s1
	}
	r.Shape = []int{b, h, lq, lk}
	r.Strides = []int{sb, sh, st[n-2], st[n-1]}
	return r, true
}

// absorbOperands lets the Attention op att, which replaces the ops at seq
// indices [k, end], read Q, K and V from before the transposing copies
// and scalings that produced them (see absorb), and returns the seq
// indices of the ops that became redundant.
func (p *plan) absorbOperands(at func(int) rt.Op, k, end int, att *rt.Attention, reads map[*tensor]int) []int {
	var gone []int
	patternReads := func(t *tensor) int {
		n := 0
		count := func(j int) {
			for _, o := range rt.Operands(at(j)) {
				if !o.Output && o.Ref.Buf != nil && rootOfRef(*o.Ref) == t {
					n++
				}
			}
		}
		for j := k; j <= end; j++ {
			count(j)
		}
		for _, j := range gone {
			count(j)
		}
		return n
	}
	refs := []*rt.Ref{&att.Q, &att.K, &att.V}
	scale := []bool{true, true, false}
	done := make([]bool, len(refs))
	// Follow chains of copies (a transpose of a transpose) back, a level
	// at a time for all three operands: operands that share a root (Q, K
	// and V split from one projection) are absorbed together or not at
	// all, and then without scalings (they would scale each).
	for range 6 {
		progress := false
		seen := make([]bool, len(refs))
		for i := range refs {
			if done[i] || seen[i] {
				continue
			}
			t := rootOfRef(*refs[i])
			group := []int{i}
			for j := i + 1; j < len(refs); j++ {
				if !done[j] && rootOfRef(*refs[j]) == t {
					group = append(group, j)
				}
			}
			for _, g := range group {
				seen[g] = true
			}
			stop := func() {
				for _, g := range group {
					done[g] = true
				}
			}
			if t == nil || (att.Mask.Buf != nil && rootOfRef(att.Mask) == t) {
				stop()
				continue
			}
			// Another operand still reads t: its chain may join this one a
			// level later (K has one more transpose than Q and V).
			shared := false
			for j := range refs {
				if !slices.Contains(group, j) && rootOfRef(*refs[j]) == t {
					shared = true
				}
			}
			if shared {
				continue
			}
			pr := patternReads(t)
			var rs []rt.Ref
			var fs []float64
			var gs [][]int
			ok := true
			for _, g := range group {
				r, f, gg := p.absorb(at, k, end, *refs[g], scale[g] && len(group) == 1, reads, pr, gone)
				if len(gg) == 0 || (len(gs) > 0 && !slices.Equal(gg, gs[0])) {
					ok = false
					break
				}
				rs, fs, gs = append(rs, r), append(fs, f), append(gs, gg)
			}
			if !ok {
				continue // perhaps at a later level, when the other readers of t have joined
			}
			old := make([]rt.Ref, len(group))
			oldScale := att.Scale
			for n, g := range group {
				old[n] = *refs[g]
				*refs[g] = rs[n]
				att.Scale *= fs[n]
			}
			if rt.CheckOp(att) != nil || !p.optional(att) {
				for n, g := range group {
					*refs[g] = old[n]
				}
				att.Scale = oldScale
				stop()
				continue
			}
			gone = append(gone, gs[0]...)
			progress = true
			for n, g := range group {
				if sameRef(rs[n], old[n]) {
					done[g] = true // scalings only: no copy to follow
				}
			}
		}
		if !progress {
			break
		}
	}
	return gone
}

// absorb looks back from the op at seq index k for the ops that produced
// the attention operand r (a [B, H, L, W] view of one arena root): scalings
// in place by a constant (when scale allows them) and, before them, a
// strided copy (a transpose) that wrote the viewed elements. It returns r
// read from the copy's source instead, the product of the scalings, and
// the seq indices of the ops that became redundant; or r, 1 and nil.
// patternReads is how many operands of the pattern's ops (and of the ops
// already absorbed) read r's root; ops at the seq indices in skip are gone.
func (p *plan) absorb(at func(int) rt.Op, k, end int, r rt.Ref, scale bool, reads map[*tensor]int, patternReads int, skip []int) (rt.Ref, float64, []int) {
	t := rootOfRef(r)
	if t == nil || t.input || t.where != inArena || reads[t] < patternReads || t.isOutput() {
		return r, 1, nil
	}
	f := 1.0
	var gone []int
	n := r.Len()
	covers := func(y rt.Ref) bool { return y.Off == r.Off && y.Contiguous() && y.Len() == n && y.DType == r.DType }
	for j := k - 1; j >= 0; j-- {
		op := at(j)
		if op == nil || slices.Contains(skip, j) {
			continue
		}
		writes := false
		for _, o := range rt.Operands(op) {
			if o.Output && o.Ref.Buf != nil && rootOfRef(*o.Ref) == t {
				writes = true
			}
		}
		if !writes {
			continue
		}
		switch o := op.(type) {
		case *rt.Binary:
			c, ok := scalarConst(o.B)
			if !scale || (o.Fn != rt.Mul && o.Fn != rt.Div) || !ok || c == 0 || !covers(o.A) || !covers(o.Y) || rootOfRef(o.A) != t {
				return r, 1, nil
			}
			if o.Fn == rt.Mul {
				f *= c
			} else {
				f /= c
			}
			gone = append(gone, j)
			continue
		case *rt.Unary:
			if o.Fn != rt.Copy || o.X.DType != o.Y.DType || !inside(r, o.Y) || reads[t] != patternReads+len(gone) {
				break
			}
			src, ok := composeView(r, o.Y, o.X)
			if !ok || !p.unwritten(at, j+1, end, src, append(gone, skip...)) {
				break
			}
			return src, f, append(gone, j)
		case *rt.Gather:
			// One constant index: a strided copy of a slice of X.
			it := rootOfRef(o.Idx)
			if it == nil || it.value == nil || it.value.Len() != 1 || o.Idx.Off != 0 || !inside(r, o.Y) ||
				reads[t] != patternReads+len(gone) || o.Outer*o.Inner == 0 {
				break
			}
			ix := int(it.value.Float64s()[0])
			if ix < 0 {
				ix += o.Axis
			}
			if ix < 0 || ix >= o.Axis {
				break
			}
			y, x := o.Y, o.X
			y.Shape, y.Strides = []int{o.Outer, o.Inner}, nil
			x.Shape, x.Strides = []int{o.Outer, o.Inner}, []int{o.Axis * o.Inner, 1}
			x.Off += int64(ix*o.Inner) * int64(x.DType.Size())
			src, ok := composeView(r, y, x)
			if !ok || !p.unwritten(at, j+1, end, src, append(gone, skip...)) {
				break
			}
			return src, f, append(gone, j)
		}
		break
	}
	if reads[t] != patternReads+len(gone) {
		return r, 1, nil
	}
	return r, f, gone
}

// unwritten reports whether no op at seq indices [from, to), other than
// those in skip, writes memory that r views.
func (p *plan) unwritten(at func(int) rt.Op, from, to int, r rt.Ref, skip []int) bool {
	for j := from; j < to; j++ {
		if at(j) == nil || slices.Contains(skip, j) {
			continue
		}
		for _, o := range rt.Operands(at(j)) {
			if o.Output && o.Ref.Buf != nil && overlaps(*o.Ref, r) {
				return false
			}
		}
	}
	return true
}

// composeView returns the view r of y's elements (y contiguous, r at y's
// offset) as a view of x, the strided source y was copied from (x has y's
// shape): each dim of r must step along one dim of y without carrying
// into the next.
func composeView(r, y, x rt.Ref) (rt.Ref, bool) {
	cs := rt.ContiguousStrides(y.Shape)
	xs := x.StridesOrContiguous()
	rs := r.StridesOrContiguous()
	out := make([]int, len(r.Shape))
	reach := make([]int, len(y.Shape)) // highest index reached along each y dim
	// r starts rel elements into y: at that multi-index of y, and of x.
	es := int64(r.DType.Size())
	rel := (r.Off - y.Off) / es
	if rel < 0 || (r.Off-y.Off)%es != 0 {
		return r, false
	}
	off := x.Off
	for i, c := range cs {
		if y.Shape[i] > 0 {
			reach[i] = int(rel / int64(c))
			rel %= int64(c)
			off += int64(reach[i]) * int64(xs[i]) * es
		}
	}
	for k, size := range r.Shape {
		if size == 1 {
			continue
		}
		s, found := rs[k], false
		for i := range y.Shape {
			if y.Shape[i] == 1 || s < cs[i] || s%cs[i] != 0 || s/cs[i] >= y.Shape[i] {
				continue
			}
			step := s / cs[i]
			reach[i] += step * (size - 1)
			if reach[i] >= y.Shape[i] {
				return r, false
			}
			out[k] = step * xs[i]
			found = true
			break
		}
		if !found {
			return r, false
		}
	}
	v := x
	v.Off = off
	v.Shape = append([]int(nil), r.Shape...)
	v.Strides = out
	return v, true
}

// inside reports whether the view r lies within the contiguous view y
// (of the same root and dtype).
func inside(r, y rt.Ref) bool {
	if y.Buf != r.Buf || y.DType != r.DType || !y.Contiguous() {
		return false
	}
	lo, hi := r.Span()
	ylo, yhi := y.Span()
	return ylo <= lo && hi <= yhi
}

// absorbOutput lets the Attention op att, at seq index end (in plan step
// step), write its result where the op after it that reads it, a
// transposing copy, would put it: when the copy is the only reader of
// att.Y's root, reads all of it through a permutation of its layout, and
// nothing between them touches the copy's destination. It returns the
// copy's seq index.
func (p *plan) absorbOutput(at func(int) rt.Op, end, n int, att *rt.Attention, reads map[*tensor]int, step int) (int, bool) {
	t := rootOfRef(att.Y)
	if t == nil || reads[t] != 1 || t.input || t.where != inArena || t.isOutput() {
		return 0, false
	}
	for j := end + 1; j < n; j++ {
		op := at(j)
		if hit, _ := touchesRoot(op, t); !hit {
			continue
		}
		c, ok := op.(*rt.Unary)
		if !ok || c.Fn != rt.Copy || c.X.DType != c.Y.DType || rootOfRef(c.X) != t || c.X.Off != 0 ||
			c.X.Len() != rt.NumElements(t.shape) || !permutedDense(c.X) {
			return 0, false
		}
		dt := rootOfRef(c.Y)
		if dt == nil || dt == t {
			return 0, false
		}
		for i := end + 1; i < j; i++ {
			if hit, _ := touchesRoot(at(i), dt); hit {
				return 0, false
			}
		}
		y, ok := composeStrided(att.Y, c.X, c.Y)
		if !ok {
			return 0, false
		}
		old := att.Y
		att.Y = y
		if rt.CheckOp(att) != nil || !p.optional(att) {
			att.Y = old
			return 0, false
		}
		dt.first = min(dt.first, step)
		return j, true
	}
	return 0, false
}

// permutedDense reports whether the view r reaches each element of a
// dense block exactly once: its strides, sorted, are those of a
// contiguous layout of its dims in some order.
func permutedDense(r rt.Ref) bool {
	st := r.StridesOrContiguous()
	idx := make([]int, 0, len(st))
	for i := range st {
		if r.Shape[i] > 1 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return st[a] - st[b] })
	want := 1
	for _, i := range idx {
		if st[i] != want {
			return false
		}
		want *= r.Shape[i]
	}
	return true
}

// composeStrided returns the view y (over the root that the copy reads
// through x) as the same elements of dst, where the copy wrote element
// x[i] to dst[i]: each dim of y must step along one dim of x without
// carrying into another.
func composeStrided(y, x, dst rt.Ref) (rt.Ref, bool) {
	xs, ds, ys := x.StridesOrContiguous(), dst.StridesOrContiguous(), y.StridesOrContiguous()
	out := make([]int, len(y.Shape))
	reach := make([]int, len(x.Shape))
	for k, size := range y.Shape {
		if size == 1 {
			continue
		}
		s, best := ys[k], -1
		for i := range x.Shape {
			if x.Shape[i] > 1 && xs[i] > 0 && xs[i] <= s && s%xs[i] == 0 && s/xs[i] < x.Shape[i] && (best < 0 || xs[i] > xs[best]) {
				best = i
			}
		}
		if best < 0 {
			return y, false
		}
		step := s / xs[best]
		reach[best] += step * (size - 1)
		if reach[best] >= x.Shape[best] {
			return y, false
		}
		out[k] = step * ds[best]
	}
	// y's first element must be x's (offset 0 of the root).
	if y.Off != x.Off {
		return y, false
	}
	v := dst
	v.Shape = append([]int(nil), y.Shape...)
	v.Strides = out
	return v, true
}
