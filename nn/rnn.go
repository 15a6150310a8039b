package nn

import (
	"math"
	"strconv"

	"github.com/vrun-go/vrun/model"
)

// Recurrent is the configuration LSTM and GRU share, with torch.nn's
// meaning: input and hidden sizes, the number of stacked layers,
// bidirectional layers, batch-first input and output, no biases, and
// dropout on the outputs of every layer but the last while training.
type Recurrent struct {
	Input, Hidden int
	Layers        int // 0 means 1
	Bidirectional bool
	BatchFirst    bool
	NoBias        bool
	Dropout       float64
	Name          string
	binding
	ps []rnnParams // per layer and direction: layer*dirs + dir
}

type rnnParams struct{ wih, whh, bih, bhh Value }

// LSTM is torch.nn.LSTM: a stack of (bidirectional) LSTM layers, each an
// ONNX LSTM node, unrolled over time by the engine. The parameters have
// PyTorch's names, shapes and gate order (weight_ih_l0 [4·Hidden, Input]
// with blocks i, f, g, o; weight_hh_l0, bias_ih_l0, bias_hh_l0;
// "_reverse" for the backward direction), so a state_dict loads as is;
// the nodes see them reordered to ONNX's i, o, f, c. All start in
// U(-1/√Hidden, 1/√Hidden). Input is [L, N, Input], or [N, L, Input] with
// BatchFirst; the output is [L, N, dirs·Hidden] (or batch first).
type LSTM struct{ Recurrent }

// GRU is torch.nn.GRU, as [LSTM] with three gate blocks: PyTorch's r, z,
// n become ONNX's z, r, h, and the nodes use linear_before_reset = 1, as
// PyTorch computes n = tanh(W_in x + b_in + r·(W_hn h + b_hn)).
type GRU struct{ Recurrent }

// NewLSTM returns an unnamed one-layer, one-direction LSTM.
func NewLSTM(input, hidden int) *LSTM {
	return &LSTM{Recurrent{Input: input, Hidden: hidden}}
}

// NewGRU returns an unnamed one-layer, one-direction GRU.
func NewGRU(input, hidden int) *GRU {
	return &GRU{Recurrent{Input: input, Hidden: hidden}}
}

// Forward runs the LSTM from zero states and returns its output.
func (l *LSTM) Forward(g *Graph, x Value) Value {
	y, _, _ := l.Run(g, x, Value{}, Value{})
	return y
}

// Run runs the LSTM from the states h0 and c0 ([layers·dirs, N, Hidden];
// zero Values for zero states) and returns the output and the final
// states h_n and c_n, shaped like h0.
func (l *LSTM) Run(g *Graph, x, h0, c0 Value) (y, hn, cn Value) {
	return l.run(g, x, h0, c0, true)
}

// Forward runs the GRU from a zero state and returns its output.
func (r *GRU) Forward(g *Graph, x Value) Value {
	y, _ := r.Run(g, x, Value{})
	return y
}

// Run runs the GRU from the state h0 ([layers·dirs, N, Hidden]; a zero
// Value for a zero state) and returns the output and the final state.
func (r *GRU) Run(g *Graph, x, h0 Value) (y, hn Value) {
	y, hn, _ = r.run(g, x, h0, Value{}, false)
	return y, hn
}

func (r *Recurrent) dirs() int {
	if r.Bidirectional {
		return 2
	}
	return 1
}

func (r *Recurrent) layers() int { return max(r.Layers, 1) }

func (r *Recurrent) run(g *Graph, x, h0, c0 Value, lstm bool) (y, hn, cn Value) {
	bad := Value{bad: true, rank: -1}
	kind, gates, order := "gru", 3, []int{1, 0, 2} // ONNX z, r, h from PyTorch r, z, n
	if lstm {
		kind, gates, order = "lstm", 4, []int{0, 3, 1, 2} // ONNX i, o, f, c from PyTorch i, f, g, o
	}
	if r.Input <= 0 || r.Hidden <= 0 || r.Dropout < 0 || r.Dropout >= 1 {
		g.errorf("%s: Input %d, Hidden %d, Dropout %g", kind, r.Input, r.Hidden, r.Dropout)
		return bad, bad, bad
	}
	if !g.check(x, h0, c0) {
		return bad, bad, bad
	}
	H, D, nl := r.Hidden, r.dirs(), r.layers()
	if r.bind(g, r.Name, kind) {
		r.ps = nil
		bound := 1 / math.Sqrt(float64(H))
		init := Uniform(-bound, bound)
		for l := range nl {
			in := r.Input
			if l > 0 {
				in = H * D
			}
			for d := range D {
				sfx := "_l" + strconv.Itoa(l)
				if d == 1 {
					sfx += "_reverse"
				}
				var p rnnParams
				p.wih = r.param("weight_ih"+sfx, []int{gates * H, in}, init)
				p.whh = r.param("weight_hh"+sfx, []int{gates * H, H}, init)
				if !r.NoBias {
					p.bih = r.param("bias_ih"+sfx, []int{gates * H}, init)
					p.bhh = r.param("bias_hh"+sfx, []int{gates * H}, init)
				}
				r.ps = append(r.ps, p)
			}
		}
	}
	// perm lists the rows of the stacked PyTorch blocks in ONNX order:
	// parts blocks of gates·H rows per direction.
	perm := func(parts int) Value {
		var idx []int64
		for d := range D {
			for p := range parts {
				for _, b := range order {
					for j := range H {
						idx = append(idx, int64(((d*parts+p)*gates+b)*H+j))
					}
				}
			}
		}
		return g.ints(idx...)
	}
	stack := func(vs []Value) Value {
		if len(vs) == 1 {
			return vs[0]
		}
		return g.Concat(0, vs...)
	}
	dir := "forward"
	if D == 2 {
		dir = "bidirectional"
	}
	if r.BatchFirst {
		x = g.Transpose(x, 1, 0, 2)
	}
	var hs, cs []Value
	for l := range nl {
		var wi, wh, bs []Value
		for d := range D {
			p := r.ps[l*D+d]
			wi, wh = append(wi, p.wih), append(wh, p.whh)
			bs = append(bs, p.bih, p.bhh)
		}
		in := r.Input
		if l > 0 {
			in = H * D
		}
		W := g.Reshape(g.Gather(stack(wi), perm(1), 0), D, gates*H, in)
		R := g.Reshape(g.Gather(stack(wh), perm(1), 0), D, gates*H, H)
		B := Value{}
		if !r.NoBias {
			B = g.Reshape(g.Gather(stack(bs), perm(2), 0), D, 2*gates*H)
		}
		ins := []Value{x, W, R, B, {}}
		state := func(s Value) Value {
			if !s.Valid() {
				return Value{}
			}
			if nl == 1 {
				return s
			}
			return g.Slice(s, 0, l*D, (l+1)*D)
		}
		ins = append(ins, state(h0))
		op := "GRU"
		attrs := model.Attrs{"hidden_size": H, "direction": dir}
		nOut := 2
		if lstm {
			op, nOut = "LSTM", 3
			ins = append(ins, state(c0))
		} else {
			attrs["linear_before_reset"] = 1
		}
		for len(ins) > 0 && !ins[len(ins)-1].Valid() {
			ins = ins[:len(ins)-1]
		}
		outs := g.opN(op, ins, attrs, nOut, []int{4, 3, 3})
		// Y [L, D, N, H] -> [L, N, D·H]
		x = g.Reshape(g.Transpose(outs[0], 0, 2, 1, 3), 0, 0, -1)
		if l < nl-1 && r.Dropout > 0 {
			x = Dropout{P: r.Dropout}.Forward(g, x)
		}
		hs = append(hs, outs[1])
		if lstm {
			cs = append(cs, outs[2])
		}
	}
	if r.BatchFirst {
		x = g.Transpose(x, 1, 0, 2)
	}
	hn = stack(hs)
	if lstm {
		cn = stack(cs)
	}
	return x, hn, cn
}
