package engine

import "github.com/vrun-go/vrun/rt"

// fuseMatMulResidual folds a residual addition into the MatMul in front of
// it: a MatMul without activation or residual whose result only the next
// op reads, a Binary Add of all of that result and a computed tensor of
// the same layout (the shortcut of a transformer block: x + Linear(h)),
// becomes the MatMul with that tensor as its Res, writing the Add's result
// (which may be the residual itself, in place). The Add's pass over
// memory goes. Like the other fusions it runs only for inference plans
// that may fuse, and only where the device runs a MatMul with Res;
// VRUN_FUSE_OFF=mmres turns it off (for A/B timing).
func (p *plan) fuseMatMulResidual() {
	if fuseOff("mmres") {
		return
	}
	p.foldIntoMatMul(func(mm *rt.MatMul, next rt.Op, reads map[*tensor]int) *rt.MatMul {
		add, ok := next.(*rt.Binary)
		if !ok || add.Fn != rt.Add {
			return nil
		}
		return foldResidualMatMul(mm, add, reads)
	})
}

// foldResidualMatMul returns mm with add's other operand as its residual,
// writing add's result, or nil when they may not be merged.
func foldResidualMatMul(mm *rt.MatMul, add *rt.Binary, reads map[*tensor]int) *rt.MatMul {
	if mm.Res.Buf != nil || mm.Act != (rt.Activation{}) || (mm.Batch > 1 && mm.StrideY != mm.M*mm.N) {
		return nil
	}
	t := rootOfRef(mm.Y)
	if t == nil || t.input || t.where != inArena {
		return nil
	}
	n := int64(mm.Batch) * int64(mm.M) * int64(mm.N)
	dense := func(r rt.Ref) bool { return r.DType == mm.Y.DType && r.Contiguous() && r.Len() == n }
	res := add.A
	switch {
	case wholeResult(add.A, mm) && !wholeResult(add.B, mm):
		res = add.B
	case !wholeResult(add.B, mm):
		return nil
	}
	rt0 := rootOfRef(res)
	if rt0 == nil || rt0 == t || rt0.value != nil || !dense(res) {
		return nil // a constant (a bias) is fuseBias's
	}
	y := add.Y
	if !wholeResult(y, mm) {
		// The MatMul's result vanishes; y is the residual itself (the
		// same view) or apart from it.
		inPlace := y.Buf == res.Buf && y.Off == res.Off
		if !resultDropped(t, reads) || !dense(y) || rootOfRef(y) == nil || (!inPlace && overlaps(y, res)) {
			return nil
		}
	}
	for _, r := range []rt.Ref{mm.A, mm.B, mm.Bias} {
		if r.Buf != nil && overlaps(y, r) {
			return nil
		}
	}
	f := *mm
	f.Res = res
	f.Y = y
	return &f
}
