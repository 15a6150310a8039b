package nn

import (
	"cmp"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// MultiHeadAttention is torch.nn.MultiheadAttention, built from MatMul,
// Softmax, Reshape and Transpose nodes, so that its backward pass is the
// engine's differentiation of those ops. Parameters have PyTorch's names:
// in_proj_weight [3·Embed, Embed] (XavierUniform) and in_proj_bias
// (zeros), or q_proj_weight, k_proj_weight and v_proj_weight when KDim or
// VDim differ from Embed; out_proj.weight (Linear's init) and
// out_proj.bias (zeros). Inputs are [L, N, E] (or [N, L, E] with
// BatchFirst).
type MultiHeadAttention struct {
	Embed, Heads int
	KDim, VDim   int // key and value feature sizes; 0 means Embed
	NoBias       bool
	BatchFirst   bool
	Dropout      float64 // on the attention weights, while training
	Name         string
	// Set by the first call; in-projection weights are absent when the
	// other form is used.
	InProjWeight, QProjWeight, KProjWeight, VProjWeight Value
	InProjBias, OutProjWeight, OutProjBias              Value
	binding
}

// NewMultiHeadAttention returns an unnamed self-attention layer.
func NewMultiHeadAttention(embed, heads int) *MultiHeadAttention {
	return &MultiHeadAttention{Embed: embed, Heads: heads}
}

// AttentionOptions are the optional inputs of [MultiHeadAttention.Attend].
type AttentionOptions struct {
	// Mask is attn_mask: [L, S] or [N·Heads, L, S]; Bool (true: the key
	// is not attended to) or float (added to the scores).
	Mask Value
	// KeyPadding is key_padding_mask: [N, S]; Bool (true: ignore the
	// key) or float (added).
	KeyPadding Value
	// Causal masks every key after the query's position (L = S).
	Causal bool
	// Weights also returns the attention weights averaged over the heads,
	// [N, L, S].
	Weights bool
}

// Forward is self-attention of x with no mask.
func (a *MultiHeadAttention) Forward(g *Graph, x Value) Value {
	y, _ := a.Attend(g, x, x, x, AttentionOptions{})
	return y
}

func (a *MultiHeadAttention) kdim() int { return cmp.Or(a.KDim, a.Embed) }

func (a *MultiHeadAttention) vdim() int { return cmp.Or(a.VDim, a.Embed) }

// Attend computes attention of query over key and value and returns the
// output (shaped like query) and, with opts.Weights, the head-averaged
// attention weights.
func (a *MultiHeadAttention) Attend(g *Graph, query, key, value Value, opts AttentionOptions) (out, weights Value) {
	bad := Value{bad: true, rank: -1}
	E, H := a.Embed, a.Heads
	if E <= 0 || H <= 0 || E%H != 0 || a.Dropout < 0 || a.Dropout >= 1 {
		g.errorf("MultiHeadAttention: Embed %d, Heads %d, Dropout %g", E, H, a.Dropout)
		return bad, bad
	}
	if !g.check(query, key, value, opts.Mask, opts.KeyPadding) {
		return bad, bad
	}
	separate := a.kdim() != E || a.vdim() != E
	if a.bind(g, a.Name, "attention") {
		if separate {
			a.InProjWeight = Value{}
			a.QProjWeight = a.param("q_proj_weight", []int{E, E}, XavierUniform(E, E, 1))
			a.KProjWeight = a.param("k_proj_weight", []int{E, a.kdim()}, XavierUniform(a.kdim(), E, 1))
			a.VProjWeight = a.param("v_proj_weight", []int{E, a.vdim()}, XavierUniform(a.vdim(), E, 1))
		} else {
			a.QProjWeight, a.KProjWeight, a.VProjWeight = Value{}, Value{}, Value{}
			a.InProjWeight = a.param("in_proj_weight", []int{3 * E, E}, XavierUniform(E, 3*E, 1))
		}
		a.InProjBias, a.OutProjBias = Value{}, Value{}
		if !a.NoBias {
			a.InProjBias = a.param("in_proj_bias", []int{3 * E}, Constant(0))
		}
		a.OutProjWeight = a.param("out_proj.weight", []int{E, E}, KaimingUniform(E, math.Sqrt(5)))
		if !a.NoBias {
			a.OutProjBias = a.param("out_proj.bias", []int{E}, Constant(0))
		}
	}
	wq, wk, wv := a.QProjWeight, a.KProjWeight, a.VProjWeight
	if !separate {
		w := g.Split(a.InProjWeight, 0, E, E, E)
		wq, wk, wv = w[0], w[1], w[2]
	}
	var bq, bk, bv Value
	if !a.NoBias {
		b := g.Split(a.InProjBias, 0, E, E, E)
		bq, bk, bv = b[0], b[1], b[2]
	}
	if !a.BatchFirst { // [L, N, E] -> [N, L, E], once per distinct input
		done := map[string]Value{}
		tr := func(x Value) Value {
			if y, ok := done[x.name]; ok {
				return y
			}
			done[x.name] = g.Transpose(x, 1, 0, 2)
			return done[x.name]
		}
		query, key, value = tr(query), tr(key), tr(value)
	}
	proj := func(x, w, b Value) Value {
		y := g.MatMul(x, g.Transpose(w, 1, 0))
		if b.name != "" {
			y = g.Add(y, b)
		}
		return y
	}
	hd := E / H
	// [N, L, E] -> [N, H, L, hd], scaled by 1/√hd as PyTorch does.
	q := g.Transpose(g.Reshape(g.Scale(proj(query, wq, bq), 1/math.Sqrt(float64(hd))), 0, 0, H, hd), 0, 2, 1, 3)
	kT := g.Transpose(g.Reshape(proj(key, wk, bk), 0, 0, H, hd), 0, 2, 3, 1)  // [N, H, hd, S]
	v := g.Transpose(g.Reshape(proj(value, wv, bv), 0, 0, H, hd), 0, 2, 1, 3) // [N, H, S, hd]
	scores := g.MatMul(q, kT)                                                 // [N, H, L, S]
	additive := func(m Value) Value {
		if m.dtype == rt.Bool {
			return g.Where(m, g.scalar(math.Inf(-1)), g.scalar(0))
		}
		return m
	}
	if opts.Mask.name != "" {
		m := additive(opts.Mask)
		if opts.Mask.Rank() == 3 { // [N·H, L, S] -> [N, H, L, S]
			ls := g.Slice(withDType(g.op("Shape", []Value{m}, nil, 1), rt.I64), 0, 1, 3)
			m = g.op("Reshape", []Value{m, g.Concat(0, g.ints(-1, int64(H)), ls)}, nil, 4)
		}
		scores = g.Add(scores, m)
	}
	if opts.KeyPadding.name != "" {
		scores = g.Add(scores, g.Unsqueeze(additive(opts.KeyPadding), 1, 2))
	}
	if opts.Causal {
		// Key position j > query position i, from the scores' shape (a
		// shape subgraph the planner folds).
		sh := withDType(g.op("Shape", []Value{scores}, nil, 1), rt.I64)
		dim := func(i int64) Value {
			n := g.Gather(sh, g.ConstInt64("", nil, []int64{i}), 0)
			return withDType(g.op("Range", []Value{g.ConstInt64("", nil, []int64{0}), n, g.ConstInt64("", nil, []int64{1})}, nil, 1), rt.I64)
		}
		later := g.Greater(g.Unsqueeze(dim(3), 0), g.Unsqueeze(dim(2), 1))
		scores = g.Add(scores, additive(later))
	}
	attn := Softmax{Dim: -1}.Forward(g, scores)
	if a.Dropout > 0 {
		attn = Dropout{P: a.Dropout}.Forward(g, attn)
	}
	o := g.Reshape(g.Transpose(g.MatMul(attn, v), 0, 2, 1, 3), 0, 0, E) // [N, L, E]
	out = proj(o, a.OutProjWeight, a.OutProjBias)
	if !a.BatchFirst {
		out = g.Transpose(out, 1, 0, 2)
	}
	if opts.Weights {
		weights = g.Mean(attn, false, 1)
	}
	return out, weights
}
