package engine

import "github.com/vrun-go/vrun/rt"

// fuseBias folds a bias addition into the MatMul in front of it: a MatMul
// without bias or activation whose result only the next op reads, a
// Binary Add of it and a constant that broadcasts over its batch (the
// Add(bias, MatMul) that exporters write for a linear layer), becomes the
// MatMul with that Bias (Beta 1) writing the Add's result, one pass fewer
// (the bias joins the GEMM's epilogue). Like the other fusions it runs
// only for inference plans that may fuse (not with Options.NoFusion).
func (p *plan) fuseBias() {
	p.foldIntoMatMul(func(mm *rt.MatMul, next rt.Op, reads map[*tensor]int) *rt.MatMul {
		add, ok := next.(*rt.Binary)
		if !ok || add.Fn != rt.Add {
			return nil
		}
		return foldBias(mm, add, reads)
	})
}

// foldIntoMatMul runs fold over every MatMul and the op right after it;
// where fold returns a MatMul that the device runs, that MatMul replaces
// the pair (in the second op's place, so everything it reads is still
// live there). fuseBias and fuseActivation are its two folds.
func (p *plan) foldIntoMatMul(fold func(mm *rt.MatMul, next rt.Op, reads map[*tensor]int) *rt.MatMul) {
	if !p.mayFuse() {
		return
	}
	reads := p.rootReads()
	seq := p.opSeq()
	changed := false
	for k := 0; k+1 < len(seq); k++ {
		mm, ok := p.steps[seq[k].s].ops[seq[k].i].(*rt.MatMul)
		if !ok {
			continue
		}
		f := fold(mm, p.steps[seq[k+1].s].ops[seq[k+1].i], reads)
		if f == nil || !p.canRun(f) {
			continue
		}
		p.steps[seq[k].s].ops[seq[k].i] = nil
		p.steps[seq[k+1].s].ops[seq[k+1].i] = f
		for _, r := range []rt.Ref{f.A, f.B, f.Bias} {
			if t := rootOfRef(r); t != nil {
				t.lastUse = max(t.lastUse, seq[k+1].s+1)
			}
		}
		if t := rootOfRef(f.Y); t != nil {
			t.first = min(t.first, seq[k+1].s+1)
		}
		changed = true
		k++
	}
	if changed {
		p.compactOps()
	}
}

// wholeResult reports whether r views all of mm's result as mm writes it
// (one batch after another): its buffer, offset and dtype, contiguous.
func wholeResult(r rt.Ref, mm *rt.MatMul) bool {
	n := int64(mm.Batch) * int64(mm.M) * int64(mm.N)
	return r.Buf == mm.Y.Buf && r.Off == mm.Y.Off && r.DType == mm.Y.DType && r.Contiguous() && r.Len() == n
}

// resultDropped reports whether the result t of a MatMul may vanish when a
// fold makes the MatMul write elsewhere: nothing but the folded op reads
// it and it is no graph output. (Written in place, later readers read the
// folded result, as before, and this check is not needed.)
func resultDropped(t *tensor, reads map[*tensor]int) bool {
	return reads[t] == 1 && !t.isOutput()
}

// canRun reports whether the plan's device runs op. The plan-time passes
// that ask run after every node is lowered, when constant folding is
// over: the fold device never runs what they make, and need not support
// it (the CPU adds no MatMul residual).
func (p *plan) canRun(op rt.Op) bool {
	return rt.CheckOp(op) == nil && p.mode.supports(op) == nil
}

// foldBias returns mm with add's constant operand as its bias, writing
// add's result, or nil when they may not be merged.
func foldBias(mm *rt.MatMul, add *rt.Binary, reads map[*tensor]int) *rt.MatMul {
	if mm.Bias.Buf != nil || mm.Act != (rt.Activation{}) || (mm.Batch > 1 && mm.StrideY != mm.M*mm.N) {
		return nil
	}
	t := rootOfRef(mm.Y)
	if t == nil || t.input || t.where != inArena {
		return nil
	}
	n := int64(mm.Batch) * int64(mm.M) * int64(mm.N)
	is := func(r rt.Ref) bool { return wholeResult(r, mm) }
	if !is(add.Y) && !resultDropped(t, reads) {
		return nil
	}
	bias := add.A
	if !is(add.B) {
		if !is(add.A) {
			return nil
		}
		bias = add.B
	}
	bt := rootOfRef(bias)
	if bt == nil || bt.value == nil || bt == t || bias.DType != mm.Y.DType {
		return nil
	}
	// The bias must be the same for every batch: a row of N broadcast over
	// everything else, or [.., M, N] with zero strides in front.
	s, st := bias.Shape, bias.StridesOrContiguous()
	r := len(s)
	if r < 1 || s[r-1] != mm.N || rt.NumElements(s) != n {
		return nil
	}
	row := true
	for i := 0; i < r-1; i++ {
		if s[i] != 1 && st[i] != 0 {
			row = false
		}
	}
	bst := []int{0, st[r-1]}
	if !row {
		if r < 2 || s[r-2] != mm.M {
			return nil
		}
		for i := 0; i < r-2; i++ {
			if s[i] != 1 && st[i] != 0 {
				return nil
			}
		}
		bst = []int{st[r-2], st[r-1]}
	}
	y := add.Y
	if !is(y) && (rootOfRef(y) == nil || !y.Contiguous() || y.Len() != n || y.DType != mm.Y.DType) {
		return nil
	}
	f := *mm
	f.Bias = bias
	f.Bias.Shape, f.Bias.Strides = []int{mm.M, mm.N}, bst
	f.Beta = 1
	f.Y = y
	return &f
}
