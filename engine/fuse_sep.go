package engine

import "github.com/vrun-go/vrun/rt"

// Plan-time fusion of depthwise-separable convolutions: a depthwise Conv
// (one filter per channel) immediately followed by the pointwise (1×1)
// Conv that is the only reader of its result, the pair of every
// MobileNet block, becomes one rt.SepConv where the device supports it
// (plan.optional). The device then computes each depthwise output where
// the pointwise GEMM loads it: one dispatch instead of two, and the
// intermediate tensor is never written. The pass runs after the
// BatchNorm, activation and residual folds have shaped both Convs, for
// inference plans only, without Options.Precision f16 (its f16 weights
// are for the two Convs); Options.NoFusion keeps the two Convs.

// fuseSepConv replaces depthwise + pointwise Conv pairs with rt.SepConv ops.
func (p *plan) fuseSepConv() {
	if !p.mayFuse() || p.mode.half != nil {
		// Precision f16 stores both Convs' weights in f16 (halfWeights),
		// which SepConv does not take.
		return
	}
	reads := p.rootReads()
	seq := p.opSeq()
	at := p.opsAt(seq)
	changed := false
	for k := 0; k+1 < len(seq); k++ {
		dw, ok1 := at(k).(*rt.Conv)
		pw, ok2 := at(k + 1).(*rt.Conv)
		if !ok1 || !ok2 || dw.Groups != dw.C || dw.K != dw.C || dw.Res.Buf != nil || !sameRef(pw.X, dw.Y) {
			continue
		}
		root := rootOfRef(dw.Y)
		if root == nil || reads[root] != 1 || root.input || root.where != inArena || root.isOutput() {
			continue
		}
		sep := &rt.SepConv{DW: *dw, PW: *pw}
		sep.DW.Y, sep.PW.X = rt.Ref{}, rt.Ref{}
		if rt.CheckOp(sep) != nil || !p.optional(sep) {
			continue
		}
		last := seq[k+1]
		p.steps[seq[k].s].ops[seq[k].i] = nil
		p.steps[last.s].ops[last.i] = sep
		for _, r := range []rt.Ref{sep.DW.X, sep.DW.W, sep.DW.Bias} {
			if t := rootOfRef(r); t != nil {
				// Read at step last.s+1 now (steps count from 1).
				t.lastUse = max(t.lastUse, last.s+1)
			}
		}
		reads[root]--
		k++
		changed = true
	}
	if changed {
		p.compactOps()
	}
}
