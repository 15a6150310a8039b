package engine

import (
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// Transpose sinking: a copy that only reorders the rows of a tensor (it
// permutes the outer dims and keeps the last one whole and innermost)
// next to a MatMul that works row by row can go, when the rows' order is
// moved into the strided views of the ops beyond the MatMul instead.
//
// PyTorch exports nn.MultiheadAttention with batch_first=True as a
// [B, L, E] → [L, B, E] Transpose in front of the in-projection and a
// [L, B, E] → [B, L, E] Transpose after the out-projection. The attention
// between them reads and writes through strided views, so both copies can
// go:
//
//   - in front (sinkCopyIntoMatMul): the MatMul reads the copy's source
//     directly, so its result holds the rows in the source's order, and
//     every view that later ops take of that result is re-expressed for
//     the new order (composeView); a later row-wise MatMul that reads all
//     of it passes the order on to its own result (permuteRows), and a
//     copy that restores the order is left a plain copy;
//   - after (sinkCopyFromMatMul): the MatMul writes the copy's destination
//     directly, and, unless the copy is plain, the op that wrote the
//     MatMul's input (through a strided view) writes its rows in the
//     destination's order.
//
// Each rewrite is checked op by op (rt.CheckOp and the device's Supports)
// and left undone when any op would not take its new views. Like the
// fusions it runs only for inference plans that may fuse; VRUN_FUSE_OFF=sink
// turns it off (for A/B timing).
func (p *plan) sinkTransposes() {
	if !p.mayFuse() || fuseOff("sink") {
		return
	}
	changed := false
	seq := p.opSeq()
	at := p.opsAt(seq)
	for k := range seq {
		c, ok := at(k).(*rt.Unary)
		if !ok || c.Fn != rt.Copy {
			continue
		}
		if p.sinkCopyIntoMatMul(seq, k, c) || p.sinkCopyFromMatMul(seq, k, c) {
			changed = true
		}
	}
	if changed {
		p.compactOps()
	}
}

// rowPermute describes a copy that reorders rows: the copy's source view
// has the destination's shape rows ++ [n], the last dim contiguous (stride
// 1), and the row dims' strides are a permutation of a dense layout of
// rows of n elements. It reports the row dims' strides in rows (the source
// row of destination row index i is sum i[k]*rowStride[k]), and whether
// the order is unchanged (a plain copy).
func rowPermute(c *rt.Unary) (rowStride []int, n int, same, ok bool) {
	x, y := c.X, c.Y
	r := len(x.Shape)
	if x.DType != y.DType || r < 2 || !slices.Equal(x.Shape, y.Shape) || !y.Contiguous() || !permutedDense(x) {
		return nil, 0, false, false
	}
	st := x.StridesOrContiguous()
	n = x.Shape[r-1]
	if n < 2 || st[r-1] != 1 {
		return nil, 0, false, false
	}
	rowStride = make([]int, r-1)
	same = true
	cs := rt.ContiguousStrides(x.Shape[:r-1])
	for i := range r - 1 {
		if x.Shape[i] > 1 {
			if st[i]%n != 0 {
				return nil, 0, false, false
			}
			same = same && st[i]/n == cs[i]
		}
		rowStride[i] = st[i] / n
	}
	return rowStride, n, same, true
}

// whole reports whether r views all of its root t (in the arena)
// contiguously from its start.
func whole(r rt.Ref, t *tensor) bool {
	return t != nil && rootOfRef(r) == t && r.Off == 0 && r.Contiguous() && r.Len() == rt.NumElements(t.shape) &&
		r.DType == t.dtype
}

// rowMatMul reports whether mm computes each row of its result from the
// same row of A alone: one batch, A not transposed, and a bias that is
// the same for every row.
func rowMatMul(mm *rt.MatMul) bool {
	if mm.Batch != 1 || mm.TransA {
		return false
	}
	if mm.Bias.Buf != nil {
		st := mm.Bias.StridesOrContiguous()
		if len(st) != 2 || st[0] != 0 {
			return false
		}
	}
	return true
}

// private reports whether root t is an arena intermediate that the plan
// alone sees: no graph input or output.
func private(t *tensor) bool {
	return t != nil && !t.input && t.where == inArena && !t.isOutput()
}

// touchers lists the seq indices of the ops from seq index from on that
// reference root t, and whether each writes it.
func (p *plan) touchers(seq []opPos, from int, t *tensor) (idx []int, writes []bool) {
	at := p.opsAt(seq)
	for j := from; j < len(seq); j++ {
		if hit, w := touchesRoot(at(j), t); hit {
			idx, writes = append(idx, j), append(writes, w)
		}
	}
	return idx, writes
}

// rowViews returns y, root t as rows rows ++ [n] seen contiguously, and
// x, the same elements once row i has moved to position
// sum i[k]*rowStride[k] of t.
func rowViews(t *tensor, rows []int, rowStride []int, n int) (y, x rt.Ref) {
	shape := append(slices.Clone(rows), n)
	y = rt.Ref{Buf: slot{t}, DType: t.dtype, Shape: shape}
	st := make([]int, len(shape))
	for i, s := range rowStride {
		st[i] = s * n
	}
	st[len(rows)] = 1
	x = rt.Ref{Buf: slot{t}, DType: t.dtype, Shape: shape, Strides: st}
	return y, x
}

// permuteRows finds what must change when the rows of root t, as written
// by the op at seq index j, move (row i of rows ++ [n] to position
// sum i[k]*rowStride[k]): the later ops that view t read and write
// through re-expressed views (composeView), and a later row-wise MatMul
// that reads all of t as A passes the new order on to its own result,
// whose later ops change in turn. The changed ops go into repl by seq
// index. It reports false when an op would not take its new views.
func (p *plan) permuteRows(seq []opPos, j int, t *tensor, rows, rowStride []int, n int, repl map[int]rt.Op) bool {
	later, _ := p.touchers(seq, j+1, t)
	y, x := rowViews(t, rows, rowStride, n)
	for _, l := range later {
		op := repl[l]
		if op == nil {
			op = p.steps[seq[l].s].ops[seq[l].i]
		}
		if mm, ok := op.(*rt.MatMul); ok && rowMatMul(mm) && whole(mm.A, t) && mm.K == n &&
			rootOfRef(mm.B) != t && rootOfRef(mm.Bias) != t {
			if tq := rootOfRef(mm.Y); whole(mm.Y, tq) && private(tq) && tq != t {
				if !p.permuteRows(seq, l, tq, rows, rowStride, mm.N, repl) {
					return false
				}
				continue
			}
		}
		if op = p.reviewed(op, y, x); op == nil {
			return false
		}
		repl[l] = op
	}
	return true
}

// reviewed returns a clone of op with every ref to the root of y
// re-expressed by composeView(ref, y, x), or nil when one does not
// compose, a view that must be contiguous would not be, or the device
// would not run the result.
func (p *plan) reviewed(op rt.Op, y, x rt.Ref) rt.Op {
	t := rootOfRef(y)
	op = rt.CloneOp(op)
	for _, o := range rt.Operands(op) {
		if o.Ref.Buf == nil || rootOfRef(*o.Ref) != t {
			continue
		}
		v, ok := composeView(*o.Ref, y, x)
		if !ok || (!o.Strided && !v.Contiguous()) {
			return nil
		}
		*o.Ref = v
	}
	if !p.canRun(op) {
		return nil
	}
	return op
}

// sinkCopyIntoMatMul removes the row-reordering (or plain) copy c at seq
// index k when the only op that reads its result is a row-wise MatMul
// that reads all of it as A: the MatMul reads c's source instead, so its
// result holds the rows in the source's order, which permuteRows passes
// on. (A Transpose that moves only dims of size 1, such as [B, L, E] →
// [L, B, E] at batch 1, is a plain copy.)
func (p *plan) sinkCopyIntoMatMul(seq []opPos, k int, c *rt.Unary) bool {
	rowStride, n, same, ok := rowPermute(c)
	if !ok {
		return false
	}
	at := p.opsAt(seq)
	tx, ty := rootOfRef(c.X), rootOfRef(c.Y)
	if tx == nil || !whole(c.Y, ty) || !private(ty) || tx == ty || c.X.Off != 0 ||
		c.X.Len() != rt.NumElements(tx.shape) || c.X.DType != tx.dtype {
		return false
	}
	users, writes := p.touchers(seq, k+1, ty)
	if len(users) != 1 || writes[0] {
		return false
	}
	j := users[0]
	mm, ok := at(j).(*rt.MatMul)
	if !ok || !rowMatMul(mm) || !whole(mm.A, ty) || mm.K != n || rootOfRef(mm.B) == ty || rootOfRef(mm.Bias) == ty {
		return false
	}
	tp := rootOfRef(mm.Y)
	if !whole(mm.Y, tp) || !private(tp) || tp == tx || tp == ty {
		return false
	}
	// c's source must keep its values until the MatMul reads it.
	if !p.unwritten(at, k+1, j, c.X, nil) {
		return false
	}
	f := *mm
	f.A = rt.Ref{Buf: c.X.Buf, DType: c.X.DType, Shape: []int{mm.M, mm.K}}
	if !p.canRun(&f) {
		return false
	}
	repl := map[int]rt.Op{}
	if !same && !p.permuteRows(seq, j, tp, c.Y.Shape[:len(c.Y.Shape)-1], rowStride, mm.N, repl) {
		return false
	}
	p.steps[seq[k].s].ops[seq[k].i] = nil
	p.steps[seq[j].s].ops[seq[j].i] = &f
	for l, op := range repl {
		p.steps[seq[l].s].ops[seq[l].i] = op
	}
	tx.lastUse = max(tx.lastUse, seq[j].s+1)
	return true
}

// sinkCopyFromMatMul removes the row-reordering (or plain) copy c at seq
// index k when what it reads is all of a row-wise MatMul's result that
// nothing else reads: the MatMul writes c's destination instead. For a
// reordering, the MatMul's A must be all of a root that one earlier op
// writes through a strided view and nothing but the MatMul reads; that op
// writes its rows in c's destination order.
func (p *plan) sinkCopyFromMatMul(seq []opPos, k int, c *rt.Unary) bool {
	rowStride, n, same, ok := rowPermute(c)
	if !ok {
		return false
	}
	tz, tw := rootOfRef(c.X), rootOfRef(c.Y)
	if tz == nil || tw == nil || tz == tw || !private(tz) || c.X.Off != 0 || c.X.Len() != rt.NumElements(tz.shape) ||
		!whole(c.Y, tw) {
		return false
	}
	at := p.opsAt(seq)
	// The MatMul: the last op before c that touches tz, writing it whole;
	// c is the only op after it that touches tz.
	users, _ := p.touchers(seq, 0, tz)
	if len(users) < 2 || users[len(users)-1] != k {
		return false
	}
	jm := users[len(users)-2]
	mm, ok := at(jm).(*rt.MatMul)
	if !ok || !rowMatMul(mm) || !whole(mm.Y, tz) || mm.N != n || rootOfRef(mm.A) == tz || rootOfRef(mm.B) == tz ||
		rootOfRef(mm.Bias) == tz {
		return false
	}
	// The MatMul now writes c's destination, earlier: nothing between
	// them may touch it, and the MatMul must not read it.
	if u, _ := p.touchers(seq, jm, tw); len(u) == 0 || u[0] != k {
		return false
	}
	f := *mm
	f.Y = c.Y
	f.Y.Shape = slices.Clone(mm.Y.Shape)
	if !p.canRun(&f) {
		return false
	}
	var writer rt.Op
	jw := -1
	if !same {
		to := rootOfRef(mm.A)
		if !whole(mm.A, to) || !private(to) || to == tw || rootOfRef(mm.B) == to || rootOfRef(mm.Bias) == to {
			return false
		}
		// The writer of A: the only op that touches it before the
		// MatMul, writing it and not reading it; nothing after the
		// MatMul touches it.
		users, writes := p.touchers(seq, 0, to)
		if len(users) != 2 || users[1] != jm || !writes[0] {
			return false
		}
		jw = users[0]
		for _, o := range rt.Operands(at(jw)) {
			if o.Ref.Buf != nil && rootOfRef(*o.Ref) == to && !o.Output {
				return false
			}
		}
		// Row m = sum i[k]*rowStride[k] of A (i over c's destination
		// rows) must move to c's destination row i: A's rows seen in
		// that order (dims sorted by rowStride, largest first) are
		// contiguous, and go to the destination's strides.
		r := len(rowStride)
		order := make([]int, r)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return rowStride[b] - rowStride[a] })
		dst := rt.ContiguousStrides(c.Y.Shape[:r])
		rows, dstStride := make([]int, r), make([]int, r)
		for i, d := range order {
			rows[i], dstStride[i] = c.Y.Shape[d], dst[d]
		}
		y, x := rowViews(to, rows, dstStride, mm.K)
		if writer = p.reviewed(at(jw), y, x); writer == nil {
			return false
		}
	}
	if writer != nil {
		p.steps[seq[jw].s].ops[seq[jw].i] = writer
	}
	p.steps[seq[jm].s].ops[seq[jm].i] = &f
	p.steps[seq[k].s].ops[seq[k].i] = nil
	tw.first = min(tw.first, seq[jm].s+1)
	return true
}
