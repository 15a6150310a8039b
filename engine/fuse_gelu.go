package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// fuseGelu replaces the five ops that exporters write for the erf GELU,
//
//	t1 = x / sqrt(2)   (or x * (1/sqrt(2)))
//	t2 = Erf(t1)
//	t3 = t2 + 1        (either operand order)
//	t4 = x * t3        (either order)
//	y  = t4 * 0.5      (either order)
//
// (torch.nn.functional.gelu through ONNX opset < 20), by one Unary Gelu
// of x writing y, when the intermediates are read by nothing else. Then
// fuseActivation can fold the Gelu into the MatMul in front of it. Like
// the other fusions it runs only for inference plans that may fuse.
func (p *plan) fuseGelu() {
	if !p.mayFuse() {
		return
	}
	reads := p.rootReads()
	seq := p.opSeq()
	changed := false
	at := p.opsAt(seq)
	for k := 0; k+4 < len(seq); k++ {
		var ops [5]rt.Op
		for j := range ops {
			ops[j] = at(k + j)
		}
		g := matchGelu(ops, reads)
		if g == nil || !p.canRun(g) {
			continue
		}
		for j := 0; j < 4; j++ {
			p.steps[seq[k+j].s].ops[seq[k+j].i] = nil
		}
		p.steps[seq[k+4].s].ops[seq[k+4].i] = g
		if t := rootOfRef(g.X); t != nil {
			t.lastUse = max(t.lastUse, seq[k+4].s+1)
		}
		changed = true
		k += 4
	}
	if changed {
		p.compactOps()
	}
}

// matchGelu returns the Unary Gelu that replaces ops, or nil when they are
// not the erf GELU pattern of fuseGelu over contiguous views of one shape
// whose intermediates nothing else reads.
func matchGelu(ops [5]rt.Op, reads map[*tensor]int) *rt.Unary {
	div, ok1 := ops[0].(*rt.Binary)
	erf, ok2 := ops[1].(*rt.Unary)
	add, ok3 := ops[2].(*rt.Binary)
	mul, ok4 := ops[3].(*rt.Binary)
	half, ok5 := ops[4].(*rt.Binary)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil
	}
	x := div.A
	n := x.Len()
	dt := x.DType
	if (dt != rt.F32 && dt != rt.F64 && dt != rt.F16) || !x.Contiguous() {
		return nil
	}
	// same: one op reads what the one before wrote (the engine runs such
	// chains in place, so the intermediates may share a root).
	same := func(a, b rt.Ref) bool {
		return a.Buf == b.Buf && a.Off == b.Off && a.DType == b.DType && a.Contiguous() && b.Contiguous() && a.Len() == b.Len()
	}
	near := func(v, want float64) bool { return math.Abs(v-want) <= 1e-6*math.Abs(want) }
	// other returns the operand of a commutative b that is not r.
	other := func(b *rt.Binary, r rt.Ref) (rt.Ref, bool) {
		switch {
		case same(b.A, r):
			return b.B, true
		case same(b.B, r):
			return b.A, true
		}
		return rt.Ref{}, false
	}
	if s, ok := scalarConst(div.B); !ok || !((div.Fn == rt.Div && near(s, math.Sqrt2)) || (div.Fn == rt.Mul && near(s, 1/math.Sqrt2))) {
		return nil
	}
	if div.Y.Len() != n || erf.Fn != rt.Erf || !same(erf.X, div.Y) || erf.Y.Len() != n {
		return nil
	}
	if add.Fn != rt.Add || mul.Fn != rt.Mul || half.Fn != rt.Mul {
		return nil
	}
	one, ok := other(add, erf.Y)
	if v, isConst := scalarConst(one); !ok || !isConst || v != 1 || add.Y.Len() != n {
		return nil
	}
	xm, ok := other(mul, add.Y)
	if !ok || !same(xm, x) || mul.Y.Len() != n {
		return nil
	}
	h, ok := other(half, mul.Y)
	if v, isConst := scalarConst(h); !ok || !isConst || v != 0.5 {
		return nil
	}
	y := half.Y
	if y.Len() != n || y.DType != dt || !y.Contiguous() {
		return nil
	}
	// Nothing but the pattern may read the intermediates t1..t4: every
	// read of their roots (but y's, which later ops may read) is one of
	// the pattern's.
	yt := rootOfRef(y)
	patternReads := map[*tensor]int{}
	for _, op := range ops {
		for _, o := range rt.Operands(op) {
			if t := rootOfRef(*o.Ref); t != nil && !o.Output {
				patternReads[t]++
			}
		}
	}
	for _, r := range []rt.Ref{div.Y, erf.Y, add.Y, mul.Y} {
		t := rootOfRef(r)
		if t == yt {
			continue
		}
		if t == nil || t.input || t.where != inArena {
			return nil
		}
		if reads[t] != patternReads[t] || t.isOutput() {
			return nil
		}
	}
	return &rt.Unary{Fn: rt.Gelu, X: x, Y: y}
}

// fuseActivation folds a Unary activation into the MatMul in front of it:
// a MatMul without activation whose result only the next op reads, a
// Unary (Relu, Gelu, Sigmoid, Tanh, ...) of that whole result, becomes the
// MatMul with the function as its epilogue, writing the Unary's result.
// The lowering does the same for ONNX activation nodes; this catches the
// ones that other fusions make (fuseGelu) or that follow a folded bias.
func (p *plan) fuseActivation() {
	p.foldIntoMatMul(foldActivation)
}

// foldActivation returns mm with next's function as its epilogue, writing
// next's result, or nil when next is no such Unary of mm's whole result.
func foldActivation(mm *rt.MatMul, next rt.Op, reads map[*tensor]int) *rt.MatMul {
	u, ok := next.(*rt.Unary)
	if !ok || u.Fn == rt.Copy || u.X.DType != u.Y.DType || mm.Act != (rt.Activation{}) ||
		(mm.Batch > 1 && mm.StrideY != mm.M*mm.N) {
		return nil
	}
	n := int64(mm.Batch) * int64(mm.M) * int64(mm.N)
	t := rootOfRef(mm.Y)
	x, y := u.X, u.Y
	if t == nil || t.input || t.where != inArena || !wholeResult(x, mm) || !y.Contiguous() || y.Len() != n || rootOfRef(y) == nil {
		return nil
	}
	if (y.Buf != x.Buf || y.Off != x.Off) && !resultDropped(t, reads) {
		return nil
	}
	f := *mm
	f.Act = rt.Activation{Fn: u.Fn, Alpha: u.Alpha, Beta: u.Beta}
	f.Y = y
	return &f
}
