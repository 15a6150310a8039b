package nn

import (
	"math"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Losses with the semantics of torch.nn.functional: each returns the
// loss Value, a scalar unless the reduction is NoReduction.

// Reduction says how a loss reduces its elementwise values.
type Reduction int

// Reductions. BatchMean (KLDiv only) divides the sum by the batch size,
// dim 0 of the input.
const (
	Mean Reduction = iota
	Sum
	BatchMean
	NoReduction
)

// String returns PyTorch's name of the reduction.
func (r Reduction) String() string {
	switch r {
	case Mean:
		return "mean"
	case Sum:
		return "sum"
	case BatchMean:
		return "batchmean"
	case NoReduction:
		return "none"
	}
	return "Reduction(?)"
}

// reduceLoss applies r to the elementwise loss l of input x.
func (g *Graph) reduceLoss(l, x Value, r Reduction, what string) Value {
	switch r {
	case Mean:
		return g.Mean(l, false)
	case Sum:
		return g.Sum(l, false)
	case NoReduction:
		return l
	case BatchMean:
		if what != "KLDiv" {
			return g.errorf("%s: reduction batchmean is KLDiv's only", what)
		}
		return g.Div(g.Sum(l, false), g.dimSize(x, 0))
	}
	return g.errorf("%s: unknown reduction %d", what, int(r))
}

// dimSize returns dim i of x's shape as a float scalar (a shape subgraph
// the planner folds).
func (g *Graph) dimSize(x Value, i int) Value {
	sh := withDType(g.op("Shape", []Value{x}, nil, 1), rt.I64)
	n := g.Gather(sh, g.ConstInt64("", nil, []int64{int64(i)}), 0)
	return g.Cast(n, x.dtype)
}

func (g *Graph) sameFloat(what string, vs ...Value) bool {
	if !g.check(vs...) {
		return false
	}
	for _, v := range vs {
		if v.name == "" {
			continue
		}
		if !v.dtype.IsFloat() || v.dtype != vs[0].dtype {
			g.errorf("%s: operand %q has dtype %s, want %s", what, v.name, v.dtype, vs[0].dtype)
			return false
		}
	}
	return true
}

// MSELoss is the mean (or sum) of (input - target)².
func MSELoss(g *Graph, input, target Value, r Reduction) Value {
	if !g.sameFloat("MSELoss", input, target) {
		return Value{bad: true, rank: -1}
	}
	d := g.Sub(input, target)
	return g.reduceLoss(g.Mul(d, d), input, r, "MSELoss")
}

// L1Loss is the mean (or sum) of |input - target|.
func L1Loss(g *Graph, input, target Value, r Reduction) Value {
	if !g.sameFloat("L1Loss", input, target) {
		return Value{bad: true, rank: -1}
	}
	return g.reduceLoss(g.Abs(g.Sub(input, target)), input, r, "L1Loss")
}

// HuberLoss is torch.nn.functional.huber_loss: with d = input - target,
// ½d² where |d| < delta, else delta·(|d| - ½delta).
func HuberLoss(g *Graph, input, target Value, delta float64, r Reduction) Value {
	if !g.sameFloat("HuberLoss", input, target) {
		return Value{bad: true, rank: -1}
	}
	if !(delta > 0) {
		return g.errorf("HuberLoss: delta %g, want > 0", delta)
	}
	d := g.Sub(input, target)
	a := g.Abs(d)
	quad := g.Scale(g.Mul(d, d), 0.5)
	lin := g.Scale(g.AddScalar(a, -0.5*delta), delta)
	return g.reduceLoss(g.Where(g.Less(a, g.scalarOf(a, delta)), quad, lin), input, r, "HuberLoss")
}

// SmoothL1Loss is torch.nn.functional.smooth_l1_loss: with d = input -
// target, ½d²/beta where |d| < beta, else |d| - ½beta; beta 0 is the L1
// loss.
func SmoothL1Loss(g *Graph, input, target Value, beta float64, r Reduction) Value {
	if !g.sameFloat("SmoothL1Loss", input, target) {
		return Value{bad: true, rank: -1}
	}
	if beta < 0 || math.IsNaN(beta) {
		return g.errorf("SmoothL1Loss: beta %g, want >= 0", beta)
	}
	if beta == 0 {
		return L1Loss(g, input, target, r)
	}
	d := g.Sub(input, target)
	a := g.Abs(d)
	quad := g.Scale(g.Mul(d, d), 0.5/beta)
	lin := g.AddScalar(a, -0.5*beta)
	return g.reduceLoss(g.Where(g.Less(a, g.scalarOf(a, beta)), quad, lin), input, r, "SmoothL1Loss")
}

// BCELoss is torch.nn.functional.binary_cross_entropy of probabilities
// input and targets in [0, 1]: -w·(y·log p + (1-y)·log(1-p)), each log
// clamped at -100 as in PyTorch. weight (broadcast to input) may be a
// zero Value.
func BCELoss(g *Graph, input, target, weight Value, r Reduction) Value {
	if !g.sameFloat("BCELoss", input, target, weight) {
		return Value{bad: true, rank: -1}
	}
	floor := g.scalarOf(input, -100)
	lp := g.Max(g.Log(input), floor)
	lq := g.Max(g.Log(g.Sub(g.scalarOf(input, 1), input)), floor)
	l := g.Neg(g.Add(g.Mul(target, lp), g.Mul(g.Sub(g.scalarOf(input, 1), target), lq)))
	if weight.name != "" {
		l = g.Mul(l, weight)
	}
	return g.reduceLoss(l, input, r, "BCELoss")
}

// BCEWithLogitsLoss is torch.nn.functional.binary_cross_entropy_with_logits,
// computed as PyTorch does, stably for logits of any size:
// (1-y)·x + (1 + (pw-1)·y)·(m + log(e⁻ᵐ + e⁻ˣ⁻ᵐ)) with m = max(-x, 0).
// weight (broadcast to input) and posWeight (per class, broadcast along
// the last dim) may be zero Values.
func BCEWithLogitsLoss(g *Graph, input, target, weight, posWeight Value, r Reduction) Value {
	if !g.sameFloat("BCEWithLogitsLoss", input, target, weight, posWeight) {
		return Value{bad: true, rank: -1}
	}
	m := g.unary("Relu", g.Neg(input), nil)
	sp := g.Add(m, g.Log(g.Add(g.Exp(g.Neg(m)), g.Exp(g.Sub(g.Neg(input), m)))))
	if posWeight.name != "" {
		lw := g.AddScalar(g.Mul(g.AddScalar(posWeight, -1), target), 1)
		sp = g.Mul(lw, sp)
	}
	l := g.Add(g.Mul(g.Sub(g.scalarOf(input, 1), target), input), sp)
	if weight.name != "" {
		l = g.Mul(l, weight)
	}
	return g.reduceLoss(l, input, r, "BCEWithLogitsLoss")
}

// ClassOptions configure the class-index losses NLLLoss and
// CrossEntropyLoss.
type ClassOptions struct {
	Reduction Reduction // Mean, Sum or NoReduction
	// Weight rescales each class's loss; a weighted mean divides by the
	// sum of the weights of the targets that are not ignored.
	Weight []float64
	// IgnoreIndex is the target value that contributes nothing (nor to
	// a mean's divisor); nil means PyTorch's default, -100.
	IgnoreIndex *int
	// LabelSmoothing (CrossEntropyLoss) mixes the target with the
	// uniform distribution: (1-ε)·nll + ε/C·(-Σ_c w_c·log p_c), where the
	// second term, zero at ignored targets, is reduced like the first: a
	// mean divides its sum by the number of targets not ignored, or by
	// the sum of their class weights.
	LabelSmoothing float64
}

func (o ClassOptions) ignore() int64 {
	if o.IgnoreIndex == nil {
		return -100
	}
	return int64(*o.IgnoreIndex)
}

// NLLLoss is torch.nn.functional.nll_loss of log-probabilities input [N,
// C] or [N, C, d1, ...] and int64 class targets [N] or [N, d1, ...]: an
// ONNX NegativeLogLikelihoodLoss node.
func NLLLoss(g *Graph, input, target Value, opts ClassOptions) Value {
	return g.nll(input, target, opts, "NLLLoss")
}

func (g *Graph) nll(input, target Value, opts ClassOptions, what string) Value {
	if !g.sameFloat(what, input) || !g.check(target) {
		return Value{bad: true, rank: -1}
	}
	if target.dtype != rt.I64 {
		return g.errorf("%s: targets have dtype %s, want i64 class indices", what, target.dtype)
	}
	red := opts.Reduction.String()
	if opts.Reduction == BatchMean || red == "Reduction(?)" {
		return g.errorf("%s: reduction %s", what, red)
	}
	ins := []Value{input, target}
	if opts.Weight != nil {
		ins = append(ins, g.Const("class_weight", []int{len(opts.Weight)}, opts.Weight))
	}
	rank := 0
	if opts.Reduction == NoReduction {
		rank = target.Rank()
	}
	return g.op("NegativeLogLikelihoodLoss", ins,
		model.Attrs{"reduction": red, "ignore_index": opts.ignore()}, rank)
}

// CrossEntropyLoss is torch.nn.functional.cross_entropy of logits [N, C]
// or [N, C, d1, ...] and int64 class targets: LogSoftmax over dim 1, then
// NLLLoss, with class weights, ignore_index and label smoothing exactly as
// PyTorch computes them.
func CrossEntropyLoss(g *Graph, logits, target Value, opts ClassOptions) Value {
	if !g.sameFloat("CrossEntropyLoss", logits) {
		return Value{bad: true, rank: -1}
	}
	eps := opts.LabelSmoothing
	if eps < 0 || eps > 1 || math.IsNaN(eps) {
		return g.errorf("CrossEntropyLoss: label smoothing %g outside [0, 1]", eps)
	}
	logp := LogSoftmax{Dim: 1}.Forward(g, logits)
	nll := g.nll(logp, target, opts, "CrossEntropyLoss")
	if eps == 0 {
		return nll
	}
	// smooth = -Σ_c w_c·logp_c per element, zero where ignored.
	lw := logp
	var wc Value
	if opts.Weight != nil {
		r := logits.Rank()
		if r < 2 {
			return g.errorf("CrossEntropyLoss: class weights need logits of known rank")
		}
		sh := []int{len(opts.Weight)}
		for range r - 2 {
			sh = append(sh, 1)
		}
		wc = g.Const("class_weight", sh, opts.Weight)
		lw = g.Mul(logp, wc)
	}
	smooth := g.Neg(g.Sum(lw, false, 1))
	ii := g.ConstInt64("", nil, []int64{opts.ignore()})
	ignored := g.Equal(target, ii)
	kept := g.Cast(g.Not(ignored), logits.dtype)
	smooth = g.Mul(smooth, kept)
	var ret Value
	switch opts.Reduction {
	case Mean:
		if opts.Weight != nil {
			safe := g.Where(ignored, g.ConstInt64("", nil, []int64{0}), target)
			wt := g.Gather(g.Reshape(wc, -1), safe, 0)
			ret = g.Div(g.Sum(smooth, false), g.Sum(g.Mul(wt, kept), false))
		} else {
			// PyTorch divides by the number of targets not ignored.
			ret = g.Div(g.Sum(smooth, false), g.Sum(kept, false))
		}
	case Sum:
		ret = g.Sum(smooth, false)
	default:
		ret = smooth
	}
	c := g.dimSize(logits, 1)
	return g.Add(g.Scale(nll, 1-eps), g.Mul(ret, g.Div(g.scalarOf(logits, eps), c)))
}

// KLDivLoss is torch.nn.functional.kl_div of log-probabilities input and
// probabilities target (log-probabilities with logTarget): pointwise
// t·(log t - x) with 0·log 0 = 0, or eᵗ·(t - x); Mean averages over every
// element, BatchMean divides the sum by the batch size (the true KL
// divergence per sample).
func KLDivLoss(g *Graph, input, target Value, r Reduction, logTarget bool) Value {
	if !g.sameFloat("KLDivLoss", input, target) {
		return Value{bad: true, rank: -1}
	}
	var l Value
	if logTarget {
		l = g.Mul(g.Exp(target), g.Sub(target, input))
	} else {
		// xlogy(t, t): log of t where t > 0, of 1 elsewhere.
		safe := g.Where(g.Greater(target, g.scalarOf(target, 0)), target, g.scalarOf(target, 1))
		l = g.Sub(g.Mul(target, g.Log(safe)), g.Mul(target, input))
	}
	return g.reduceLoss(l, input, r, "KLDiv")
}
