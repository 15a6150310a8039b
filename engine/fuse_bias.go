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
		add, ok := p.steps[seq[k+1].s].ops[seq[k+1].i].(*rt.Binary)
		if !ok || add.Fn != rt.Add {
			continue
		}
		if f := foldBias(mm, add, reads); f != nil && p.canRun(f) {
			p.steps[seq[k].s].ops[seq[k].i] = nil
			p.steps[seq[k+1].s].ops[seq[k+1].i] = f
			if t := rootOfRef(f.Bias); t != nil {
				t.lastUse = max(t.lastUse, seq[k+1].s+1)
			}
			for _, r := range []rt.Ref{f.A, f.B} {
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
	}
	if changed {
		p.compactOps()
	}
}

// canRun reports whether the plan's device (and fold device) runs op.
func (p *plan) canRun(op rt.Op) bool {
	if rt.CheckOp(op) != nil || p.mode.supports(op) != nil {
		return false
	}
	return p.fold.dev == nil || p.fold.dev.Supports(op) == nil
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
	is := func(r rt.Ref) bool {
		return r.Buf == mm.Y.Buf && r.Off == mm.Y.Off && r.DType == mm.Y.DType && r.Contiguous() && r.Len() == n
	}
	if !is(add.Y) {
		// The MatMul's own result vanishes: nothing else may read it. (In
		// place, later readers read the sum, as before.)
		if reads[t] != 1 {
			return nil
		}
		for _, a := range append([]*tensor{t}, t.aliases...) {
			if a.output {
				return nil
			}
		}
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
