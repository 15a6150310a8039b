package engine

import (
	"os"
	"slices"
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// Plan-time fusion of elementwise chains: two adjacent ops of the plan
// (in one step or across consecutive steps), each a float Unary, Binary or
// single-output Fused op, become one rt.Fused op when the second reads the
// first's result through the same view and nothing else can see that
// result: the second writes it back in place, or no other op reads its
// tensor and it is not a graph output. The merged op takes the second's
// place; the inputs of the first are kept alive until then. The pass runs
// only for inference plans on devices that support rt.Fused (plan.optional);
// elsewhere, and with Options.NoFusion, the ops stay as they are.

// fuseMinElements is the smallest output, in elements, of a chain that
// fuseElementwise merges. Below it a fused pass costs the CPU as much as
// the separate ops or more (each op costs only about 0.1-0.2 µs, and a
// fused pass makes more kernel calls over shorter stretches); above it
// fusion saves memory traffic. In BenchmarkFusedChain (bias add and ReLU,
// 3 runs each) fused and unfused are even at 64x1024 elements
// (11.2-12.6 vs 10.4-12.0 CPU µs) and fused takes 0.75x the CPU time at
// 256x1024 (48.6-53.0 vs 62.9-71.4 µs).
var fuseMinElements int64 = 1 << 18

// fuseElementwise merges adjacent elementwise ops into rt.Fused ops.
func (p *plan) fuseElementwise() {
	if !p.mayFuse() {
		return
	}
	reads := p.rootReads() // op operands that read each root
	prevS, prevI := -1, -1
	changed := false
	for s := range p.steps {
		for i, op := range p.steps[s].ops {
			if prevS >= 0 {
				prev := p.steps[prevS].ops[prevI]
				if f := p.fusePair(prev, op, reads); f != nil {
					for _, in := range fusedOf(prev).In {
						if sl, ok := in.Buf.(slot); ok {
							// Read at step s+1 now (steps count from 1).
							sl.t.lastUse = max(sl.t.lastUse, s+1)
						}
					}
					p.steps[prevS].ops[prevI] = nil
					p.steps[s].ops[i] = f
					op = f
					changed = true
				}
			}
			prevS, prevI = s, i
		}
	}
	if changed {
		p.compactOps()
	}
}

// fusePair returns a and b merged into one rt.Fused op, or nil when they
// may not be (see fuseElementwise). reads counts the readers of each root
// and is updated for a merge.
func (p *plan) fusePair(a, b rt.Op, reads map[*tensor]int) *rt.Fused {
	fa, fb := fusedOf(a), fusedOf(b)
	if fa == nil || fb == nil || len(fa.Out) != 1 || len(fb.Out) != 1 {
		return nil
	}
	y, z := fa.Out[0], fb.Out[0]
	ys, ok := y.Buf.(slot)
	if !ok || y.DType != z.DType || !slices.Equal(y.Shape, z.Shape) || rt.NumElements(z.Shape) < fuseMinElements {
		return nil
	}
	links := 0 // operands of b that read y
	for _, in := range fb.In {
		switch {
		case sameRef(in, y):
			links++
		case overlaps(in, y):
			return nil // another view of y: it would see the unfused write
		}
	}
	if links == 0 {
		return nil
	}
	if !sameRef(z, y) {
		// y vanishes: no other op may read it, and nothing at the end.
		root := ys.t
		own := 0 // a's reads of the root (of its values before a)
		for _, in := range fa.In {
			if sl, ok := in.Buf.(slot); ok && sl.t == root {
				own++
			}
		}
		if reads[root] != links+own || root.input || root.where != inArena {
			return nil
		}
		for _, t := range append([]*tensor{root}, root.aliases...) {
			if t.output {
				return nil
			}
		}
	}
	f := mergeFused(fa, fb, y)
	if f == nil || len(f.In) > rt.MaxFusedOperands || len(f.Code) > rt.MaxFusedCode {
		return nil
	}
	for _, in := range f.In {
		if !sameRef(in, z) && overlaps(in, z) {
			return nil
		}
	}
	if !p.optional(f) {
		return nil
	}
	reads[ys.t] -= links
	return f
}

// fusedOf returns op as a Fused op: itself, or a float Unary (not a copy)
// or arithmetic Binary as a one-instruction program; nil for other ops.
func fusedOf(op rt.Op) *rt.Fused {
	switch o := op.(type) {
	case *rt.Fused:
		return o
	case *rt.Unary:
		if o.Fn == rt.Copy || o.Fn == rt.Not || !o.X.DType.IsFloat() || o.X.DType != o.Y.DType {
			return nil
		}
		var p rt.FusedProgram
		p.Output(o.Y, p.Unary(o.Fn, o.Alpha, o.Beta, p.Input(o.X)))
		return p.Op()
	case *rt.Binary:
		if o.Fn.IsCompare() || o.Fn.IsLogical() || !o.A.DType.IsFloat() || o.A.DType != o.Y.DType || o.B.DType != o.Y.DType {
			return nil
		}
		var p rt.FusedProgram
		p.Output(o.Y, p.Binary(o.Fn, p.Input(o.A), p.Input(o.B)))
		return p.Op()
	}
	return nil
}

// mergeFused returns the program of a followed by b, where b's inputs
// that are link (a's output) read a's result instead. Identical inputs
// are loaded once.
func mergeFused(a, b *rt.Fused, link rt.Ref) *rt.Fused {
	var p rt.FusedProgram
	var ins []rt.Ref
	var vals []rt.FusedValue
	input := func(r rt.Ref) rt.FusedValue {
		for k, in := range ins {
			if sameRef(in, r) {
				return vals[k]
			}
		}
		v := p.Input(r)
		ins, vals = append(ins, r), append(vals, v)
		return v
	}
	replay := func(f *rt.Fused, regs []rt.FusedValue) []rt.FusedValue {
		for _, in := range f.Code {
			if in.Binary {
				regs = append(regs, p.Binary(in.Fn, regs[in.A], regs[in.B]))
			} else {
				regs = append(regs, p.Unary(in.Unary, in.Alpha, in.Beta, regs[in.A]))
			}
		}
		return regs
	}
	var ra []rt.FusedValue
	for _, in := range a.In {
		ra = append(ra, input(in))
	}
	ra = replay(a, ra)
	ya := ra[a.Result[0]]
	var rb []rt.FusedValue
	for _, in := range b.In {
		if sameRef(in, link) {
			rb = append(rb, ya)
		} else {
			rb = append(rb, input(in))
		}
	}
	rb = replay(b, rb)
	p.Output(b.Out[0], rb[b.Result[0]])
	return p.Op()
}

// sameRef reports whether two refs view the same elements the same way.
func sameRef(a, b rt.Ref) bool {
	return a.Buf == b.Buf && a.Off == b.Off && a.DType == b.DType && slices.Equal(a.Shape, b.Shape) &&
		slices.Equal(a.StridesOrContiguous(), b.StridesOrContiguous())
}

// mayFuse reports whether the plan's ops may be fused: an inference plan
// (no training, no gradients) with a device that says what it supports.
func (p *plan) mayFuse() bool {
	return p.mode.supports != nil && !p.mode.train && p.mode.grad == nil
}

// opPos is an op's place in a plan: step s, index i.
type opPos struct{ s, i int }

// opSeq lists the places of the plan's ops in order, across steps.
func (p *plan) opSeq() []opPos {
	var seq []opPos
	for s := range p.steps {
		for i := range p.steps[s].ops {
			seq = append(seq, opPos{s, i})
		}
	}
	return seq
}

// opsAt returns the op at seq index k of seq (an opSeq of p); nil where a
// fusion has removed it.
func (p *plan) opsAt(seq []opPos) func(k int) rt.Op {
	return func(k int) rt.Op { return p.steps[seq[k].s].ops[seq[k].i] }
}

// touchesRoot reports whether op references root t, and whether it
// writes it; a nil op (removed by a fusion) touches nothing.
func touchesRoot(op rt.Op, t *tensor) (hit, writes bool) {
	if op == nil {
		return false, false
	}
	for _, o := range rt.Operands(op) {
		if o.Ref.Buf != nil && rootOfRef(*o.Ref) == t {
			hit = true
			writes = writes || o.Output
		}
	}
	return hit, writes
}

// fuseOff reports whether $VRUN_FUSE_OFF, a comma-separated list of pass
// names, names the plan-time pass name ("sink", "mmres"): for timing a
// model with and without one pass (Options.NoFusion turns them all off).
func fuseOff(name string) bool {
	for _, f := range strings.Split(os.Getenv("VRUN_FUSE_OFF"), ",") {
		if strings.TrimSpace(f) == name {
			return true
		}
	}
	return false
}
