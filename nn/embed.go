package nn

import (
	"math"
	"math/rand/v2"

	"github.com/vrun-go/vrun/rt"
)

// Embedding is torch.nn.Embedding: rows of weight [Num, Dim] (N(0, 1))
// picked by int64 indices, any shape; the output has one more dim, Dim.
// The gradient scatter-adds into the picked rows (repeated indices
// accumulate).
type Embedding struct {
	Num, Dim int
	// PaddingIdx, when set, is an index whose row starts at zero and
	// receives no gradient (padding_idx).
	PaddingIdx *int
	Name       string
	// Weight is set by the first Forward.
	Weight Value
	binding
}

// NewEmbedding returns an unnamed Embedding of num rows of size dim.
func NewEmbedding(num, dim int) *Embedding { return &Embedding{Num: num, Dim: dim} }

// Forward looks up the rows of the int64 indices idx.
func (e *Embedding) Forward(g *Graph, idx Value) Value {
	if e.Num <= 0 || e.Dim <= 0 {
		return g.errorf("Embedding: Num %d, Dim %d", e.Num, e.Dim)
	}
	if idx.Valid() && idx.dtype != rt.I64 {
		return g.errorf("Embedding: indices have dtype %s, want i64", idx.dtype)
	}
	pad := -1
	if e.PaddingIdx != nil {
		pad = *e.PaddingIdx
		if pad < 0 {
			pad += e.Num
		}
		if pad < 0 || pad >= e.Num {
			return g.errorf("Embedding: PaddingIdx %d outside [-%d, %d)", *e.PaddingIdx, e.Num, e.Num)
		}
	}
	if e.bind(g, e.Name, "embedding") {
		init := Normal(0, 1)
		if pad >= 0 {
			init = func(r *rand.Rand, v []float64) {
				Normal(0, 1)(r, v)
				for j := range e.Dim {
					v[pad*e.Dim+j] = 0
				}
			}
		}
		e.Weight = e.param("weight", []int{e.Num, e.Dim}, init)
	}
	y := g.Gather(e.Weight, idx, 0)
	if pad < 0 {
		return y
	}
	// The padding row's value, with no gradient, where idx == pad.
	var frozen Value
	g.NoGrad(func() { frozen = g.Gather(e.Weight, idx, 0) })
	isPad := g.Unsqueeze(g.Equal(idx, g.ConstInt64("", nil, []int64{int64(pad)})), -1)
	return g.Where(isPad, frozen, y)
}

// PositionalEncoding adds the sinusoidal encoding of "Attention Is All
// You Need" (as in PyTorch's transformer tutorial) to x [N, L, Dim]
// (BatchFirst) or [L, N, Dim]: pe[p, 2i] = sin(p·10000^(-2i/Dim)),
// pe[p, 2i+1] = cos(p·10000^(-2i/Dim)), for p < L ≤ MaxLen, then
// applies dropout with probability Dropout. The table is a constant.
type PositionalEncoding struct {
	Dim        int
	MaxLen     int // 0 means 5000
	BatchFirst bool
	Dropout    float64
}

// Table returns the encoding table [maxLen, dim] in float64.
func (p PositionalEncoding) Table() []float64 {
	n := p.maxLen()
	pe := make([]float64, n*p.Dim)
	for pos := range n {
		for i := 0; i < p.Dim; i += 2 {
			a := float64(pos) * math.Exp(float64(i)*(-math.Log(10000)/float64(p.Dim)))
			pe[pos*p.Dim+i] = math.Sin(a)
			if i+1 < p.Dim {
				pe[pos*p.Dim+i+1] = math.Cos(a)
			}
		}
	}
	return pe
}

func (p PositionalEncoding) maxLen() int {
	if p.MaxLen <= 0 {
		return 5000
	}
	return p.MaxLen
}

// Forward adds the encoding of the first L positions to x.
func (p PositionalEncoding) Forward(g *Graph, x Value) Value {
	if p.Dim <= 0 {
		return g.errorf("PositionalEncoding: Dim %d", p.Dim)
	}
	n := p.maxLen()
	seqAxis := 0
	shape := []int{n, 1, p.Dim}
	if p.BatchFirst {
		seqAxis, shape = 1, []int{n, p.Dim}
	}
	pe := g.Const("pe", shape, p.Table())
	// L from x's shape: a shape subgraph the planner folds.
	l := g.Gather(withDType(g.op("Shape", []Value{x}, nil, 1), rt.I64), g.ints(int64(seqAxis)), 0)
	pe = g.op("Slice", []Value{pe, g.ints(0), l, g.ints(0)}, nil, len(shape))
	return Dropout{P: p.Dropout}.Forward(g, g.Add(x, pe))
}
