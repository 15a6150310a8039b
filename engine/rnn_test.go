package engine_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// rnnCase is one RNN, GRU or LSTM configuration, checked against
// refRecurrent (a float64 transcription of the ONNX definitions).
type rnnCase struct {
	name              string
	op                string // RNN, GRU, LSTM
	seq, batch, in, h int
	dir               string // "" = forward
	layout            int
	bias, h0, c0, p   bool
	lens              []int32 // sequence_lens; nil: absent
	lensInput         bool    // sequence_lens as a run-time input
	weightsInput      bool    // W, R, B, P as run-time inputs
	noY               bool    // request only Y_h (and Y_c)
	lbr, inputForget  bool
	clip              float64
	acts              []string
	alphas, betas     []float64
}

func TestRecurrent(t *testing.T) {
	cases := []rnnCase{
		{name: "rnn", op: "RNN", seq: 4, batch: 3, in: 5, h: 6},
		{name: "rnn_bias_h0_bidi", op: "RNN", seq: 3, batch: 2, in: 4, h: 5, dir: "bidirectional", bias: true, h0: true},
		{name: "rnn_layout1_reverse", op: "RNN", seq: 5, batch: 2, in: 3, h: 4, dir: "reverse", layout: 1, bias: true, h0: true},
		{name: "rnn_relu_clip", op: "RNN", seq: 3, batch: 2, in: 3, h: 4, bias: true, acts: []string{"Relu"}, clip: 0.5},
		{name: "rnn_scaledtanh", op: "RNN", seq: 3, batch: 2, in: 3, h: 4, bias: true, acts: []string{"ScaledTanh"}, alphas: []float64{1.5}, betas: []float64{0.7}},
		{name: "rnn_lens_const", op: "RNN", seq: 4, batch: 3, in: 3, h: 4, dir: "bidirectional", bias: true, lens: []int32{4, 2, 0}},
		{name: "gru", op: "GRU", seq: 4, batch: 3, in: 5, h: 6},
		{name: "gru_bias_bidi_inputs", op: "GRU", seq: 3, batch: 2, in: 4, h: 5, dir: "bidirectional", bias: true, h0: true, weightsInput: true},
		{name: "gru_lbr", op: "GRU", seq: 4, batch: 2, in: 3, h: 4, bias: true, h0: true, lbr: true},
		{name: "gru_lbr_layout1_bidi", op: "GRU", seq: 3, batch: 2, in: 3, h: 4, dir: "bidirectional", layout: 1, bias: true, h0: true, lbr: true, noY: true},
		{name: "gru_acts_clip", op: "GRU", seq: 3, batch: 2, in: 3, h: 4, bias: true, clip: 0.8,
			acts: []string{"HardSigmoid", "Softsign"}, alphas: []float64{0.3}, betas: []float64{0.4}},
		{name: "gru_lens_input", op: "GRU", seq: 4, batch: 3, in: 3, h: 4, dir: "reverse", bias: true, h0: true, lens: []int32{1, 4, 3}, lensInput: true},
		{name: "lstm", op: "LSTM", seq: 4, batch: 3, in: 5, h: 6},
		{name: "lstm_full_bidi", op: "LSTM", seq: 3, batch: 2, in: 4, h: 5, dir: "bidirectional", bias: true, h0: true, c0: true, p: true},
		{name: "lstm_layout1_inputs", op: "LSTM", seq: 4, batch: 2, in: 3, h: 4, layout: 1, bias: true, h0: true, c0: true, p: true, weightsInput: true},
		{name: "lstm_input_forget_clip", op: "LSTM", seq: 3, batch: 2, in: 3, h: 4, bias: true, inputForget: true, clip: 0.6},
		{name: "lstm_input_forget_peep", op: "LSTM", seq: 3, batch: 2, in: 3, h: 4, bias: true, p: true, inputForget: true},
		{name: "lstm_acts", op: "LSTM", seq: 3, batch: 2, in: 3, h: 4, bias: true,
			acts: []string{"LeakyRelu", "Elu", "Softplus"}, alphas: []float64{0.2, 0.9}},
		{name: "lstm_lens_bidi", op: "LSTM", seq: 4, batch: 3, in: 3, h: 4, dir: "bidirectional", layout: 1, bias: true, h0: true, c0: true, p: true,
			lens: []int32{2, 4, 1}, lensInput: true},
		{name: "lstm_lens_full", op: "LSTM", seq: 3, batch: 2, in: 3, h: 4, lens: []int32{3, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runRecurrent(t, tc) })
	}
}

func (tc rnnCase) gates() int { return map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[tc.op] }

func (tc rnnCase) dirs() int {
	if tc.dir == "bidirectional" {
		return 2
	}
	return 1
}

func runRecurrent(t *testing.T, tc rnnCase) {
	rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
	rnd := func(shape ...int) *rt.Tensor {
		v := make([]float32, rt.NumElements(shape))
		for i := range v {
			v[i] = float32(rng.Float64()*2 - 1)
		}
		return rt.FromFloat32(v, shape...)
	}
	nd, g := tc.dirs(), tc.gates()
	xs := []int{tc.seq, tc.batch, tc.in}
	ss := []int{nd, tc.batch, tc.h}
	if tc.layout == 1 {
		xs = []int{tc.batch, tc.seq, tc.in}
		ss = []int{tc.batch, nd, tc.h}
	}
	vals := map[string]*rt.Tensor{
		"X": rnd(xs...), "W": rnd(nd, g*tc.h, tc.in), "R": rnd(nd, g*tc.h, tc.h),
		"B": rnd(nd, 2*g*tc.h), "initial_h": rnd(ss...), "initial_c": rnd(ss...), "P": rnd(nd, 3*tc.h),
	}
	b := model.NewBuilder()
	feeds := map[string]*rt.Tensor{}
	add := func(name string, input bool) string {
		v := vals[name]
		if input {
			feeds[name] = v
			return b.Input(name, v.DType, toI64(v.Shape)...)
		}
		return b.Weight(name, v.DType, toI64(v.Shape), v.Data)
	}
	ins := []string{add("X", true), add("W", tc.weightsInput), add("R", tc.weightsInput), "", "", "", "", ""}
	if tc.bias {
		ins[3] = add("B", tc.weightsInput)
	}
	if tc.lens != nil {
		vals["sequence_lens"] = rt.FromFloat64(rt.I32, i32f(tc.lens), len(tc.lens))
		ins[4] = add("sequence_lens", tc.lensInput)
	}
	if tc.h0 {
		ins[5] = add("initial_h", true)
	}
	if tc.c0 {
		ins[6] = add("initial_c", true)
	}
	if tc.p {
		ins[7] = add("P", tc.weightsInput)
	}
	nOut := 2
	if tc.op == "LSTM" {
		nOut = 3
	} else {
		ins = ins[:6]
	}
	for len(ins) > 3 && ins[len(ins)-1] == "" {
		ins = ins[:len(ins)-1]
	}
	attrs := model.Attrs{"hidden_size": tc.h, "layout": tc.layout}
	if tc.dir != "" {
		attrs["direction"] = tc.dir
	}
	if tc.clip > 0 {
		attrs["clip"] = tc.clip
	}
	if tc.lbr {
		attrs["linear_before_reset"] = 1
	}
	if tc.inputForget {
		attrs["input_forget"] = 1
	}
	if tc.acts != nil {
		acts := tc.acts
		if nd == 2 {
			acts = append(append([]string{}, acts...), acts...)
		}
		attrs["activations"] = acts
	}
	if tc.alphas != nil {
		attrs["activation_alpha"] = tc.alphas
	}
	if tc.betas != nil {
		attrs["activation_beta"] = tc.betas
	}
	outs := []string{"Y", "Y_h", "Y_c"}[:nOut]
	if tc.noY {
		outs[0] = ""
	}
	b.Node("cell", tc.op, ins, outs, attrs)
	for _, o := range outs {
		if o != "" {
			b.Output(o)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Fused (the CPU runs LSTM gates as one rt.Fused op per step) and
	// unfused runs each agree with the float64 reference, and with each
	// other, within 1e-5 (f32).
	want := refRecurrent(tc, vals)
	var runs [2]map[string]*rt.Tensor
	for k, noFusion := range []bool{false, true} {
		s := session(t, m, engine.Options{NoFusion: noFusion})
		got, err := s.Run(context.Background(), feeds)
		if err != nil {
			t.Fatal(err)
		}
		runs[k] = got
		for _, o := range outs {
			if o == "" {
				continue
			}
			gv, wv := got[o].Float64s(), want[o]
			if len(gv) != len(wv) {
				t.Fatalf("%s: %d elements, want %d", o, len(gv), len(wv))
			}
			for i := range gv {
				if math.Abs(gv[i]-wv[i]) > 1e-5 {
					t.Fatalf("NoFusion %v: %s[%d] = %v, want %v", noFusion, o, i, gv[i], wv[i])
				}
			}
		}
	}
	for _, o := range outs {
		if o == "" {
			continue
		}
		fv, uv := runs[0][o].Float64s(), runs[1][o].Float64s()
		for i := range fv {
			if math.Abs(fv[i]-uv[i]) > 1e-5 {
				t.Fatalf("%s[%d]: fused %v, unfused %v", o, i, fv[i], uv[i])
			}
		}
	}
}

func toI64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

func i32f(v []int32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// refAct returns the ONNX recurrent activation name with its parameters
// taken from the front of alphas and betas.
func refAct(name string, alphas, betas *[]float64) func(float64) float64 {
	pop := func(l *[]float64, def float64) float64 {
		if len(*l) == 0 {
			return def
		}
		v := (*l)[0]
		*l = (*l)[1:]
		return v
	}
	switch name {
	case "Tanh":
		return math.Tanh
	case "Sigmoid":
		return func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	case "Relu":
		return func(x float64) float64 { return math.Max(x, 0) }
	case "Softsign":
		return func(x float64) float64 { return x / (1 + math.Abs(x)) }
	case "Softplus":
		return func(x float64) float64 { return math.Log(1 + math.Exp(x)) }
	case "LeakyRelu":
		a := pop(alphas, 0.01)
		return func(x float64) float64 { return map[bool]float64{true: x, false: a * x}[x >= 0] }
	case "Elu":
		a := pop(alphas, 1)
		return func(x float64) float64 { return map[bool]float64{true: x, false: a * (math.Exp(x) - 1)}[x >= 0] }
	case "HardSigmoid":
		a, b := pop(alphas, 0.2), pop(betas, 0.5)
		return func(x float64) float64 { return math.Max(0, math.Min(1, a*x+b)) }
	case "ScaledTanh":
		a, b := pop(alphas, 1), pop(betas, 1)
		return func(x float64) float64 { return a * math.Tanh(b*x) }
	}
	panic("unknown activation " + name)
}

// refRecurrent computes the ONNX RNN/GRU/LSTM outputs in float64 and in
// the case's layout.
func refRecurrent(tc rnnCase, vals map[string]*rt.Tensor) map[string][]float64 {
	nd, g, H := tc.dirs(), tc.gates(), tc.h
	X, W, R, B := vals["X"].Float64s(), vals["W"].Float64s(), vals["R"].Float64s(), vals["B"].Float64s()
	P := vals["P"].Float64s()
	acts := tc.acts
	if acts == nil {
		acts = map[string][]string{"RNN": {"Tanh"}, "GRU": {"Sigmoid", "Tanh"}, "LSTM": {"Sigmoid", "Tanh", "Tanh"}}[tc.op]
	}
	alphas, betas := append([]float64{}, tc.alphas...), append([]float64{}, tc.betas...)
	fns := make([][]func(float64) float64, nd)
	for d := range nd {
		for _, a := range acts {
			fns[d] = append(fns[d], refAct(a, &alphas, &betas))
		}
	}
	clip := func(v float64) float64 {
		if tc.clip > 0 {
			return math.Max(-tc.clip, math.Min(tc.clip, v))
		}
		return v
	}
	xAt := func(t, b, k int) float64 {
		if tc.layout == 1 {
			return X[(b*tc.seq+t)*tc.in+k]
		}
		return X[(t*tc.batch+b)*tc.in+k]
	}
	stIdx := func(d, b, j int) int {
		if tc.layout == 1 {
			return (b*nd+d)*H + j
		}
		return (d*tc.batch+b)*H + j
	}
	yIdx := func(t, d, b, j int) int {
		if tc.layout == 1 {
			return ((b*tc.seq+t)*nd+d)*H + j
		}
		return ((t*nd+d)*tc.batch+b)*H + j
	}
	Y := make([]float64, tc.seq*nd*tc.batch*H)
	Yh := make([]float64, nd*tc.batch*H)
	Yc := make([]float64, nd*tc.batch*H)
	for d := range nd {
		// Pre-activation of gate q, unit j: x W^T + Wb (+ Rb when withRb),
		// and the recurrent part hv R^T (+ Rb).
		xpart := func(t, b, q, j int) float64 {
			row := d*g*H + q*H + j
			s := 0.0
			for k := range tc.in {
				s += xAt(t, b, k) * W[row*tc.in+k]
			}
			if tc.bias {
				s += B[d*2*g*H+q*H+j]
			}
			return s
		}
		hpart := func(hv []float64, q, j int) float64 {
			row := d*g*H + q*H + j
			s := 0.0
			for k := range H {
				s += hv[k] * R[row*H+k]
			}
			if tc.bias {
				s += B[d*2*g*H+g*H+q*H+j]
			}
			return s
		}
		f := fns[d]
		for b := range tc.batch {
			n := tc.seq
			if tc.lens != nil {
				n = int(tc.lens[b])
			}
			h, c := make([]float64, H), make([]float64, H)
			for j := range H {
				if tc.h0 {
					h[j] = vals["initial_h"].Float64(stIdx(d, b, j))
				}
				if tc.c0 {
					c[j] = vals["initial_c"].Float64(stIdx(d, b, j))
				}
			}
			for k := range n {
				t := k
				if tc.dir == "reverse" || d == 1 {
					t = n - 1 - k
				}
				nh, nc := make([]float64, H), make([]float64, H)
				for j := range H {
					switch tc.op {
					case "RNN":
						nh[j] = f[0](clip(xpart(t, b, 0, j) + hpart(h, 0, j)))
					case "GRU":
						z := f[0](clip(xpart(t, b, 0, j) + hpart(h, 0, j)))
						r := func(i int) float64 { return f[0](clip(xpart(t, b, 1, i) + hpart(h, 1, i))) }
						var cand float64
						if tc.lbr {
							cand = f[1](clip(xpart(t, b, 2, j) + r(j)*hpart(h, 2, j)))
						} else {
							rh := make([]float64, H)
							for i := range H {
								rh[i] = r(i) * h[i]
							}
							cand = f[1](clip(xpart(t, b, 2, j) + hpart(rh, 2, j)))
						}
						nh[j] = (1-z)*cand + z*h[j]
					case "LSTM":
						pre := func(q int) float64 { return xpart(t, b, q, j) + hpart(h, q, j) }
						var pi, po, pf float64
						if tc.p {
							pi, po, pf = P[d*3*H+j], P[d*3*H+H+j], P[d*3*H+2*H+j]
						}
						i := f[0](clip(pre(0) + pi*c[j]))
						fg := f[0](clip(pre(2) + pf*c[j]))
						if tc.inputForget {
							fg = 1 - i
						}
						nc[j] = fg*c[j] + i*f[1](clip(pre(3)))
						o := f[0](clip(pre(1) + po*nc[j]))
						nh[j] = o * f[2](nc[j])
					}
				}
				h = nh
				if tc.op == "LSTM" {
					c = nc
				}
				for j := range H {
					Y[yIdx(t, d, b, j)] = h[j]
				}
			}
			for j := range H {
				Yh[stIdx(d, b, j)] = h[j]
				Yc[stIdx(d, b, j)] = c[j]
			}
		}
	}
	return map[string][]float64{"Y": Y, "Y_h": Yh, "Y_c": Yc}
}

// An activation with no unary function is an unsupported feature, not a
// malformed model.
func TestRecurrentUnsupportedActivation(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("X", rt.F32, 2, 1, 3)
	w := b.Weight("W", rt.F32, []int64{1, 4, 3}, make([]float32, 12))
	r := b.Weight("R", rt.F32, []int64{1, 4, 4}, make([]float32, 16))
	y := b.Op("RNN", []string{x, w, r}, model.Attrs{"hidden_size": 4, "activations": []string{"ThresholdedRelu"}})
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	_, err = engine.New(m, dev, engine.Options{})
	if !errors.Is(err, engine.ErrUnsupportedFeature) {
		t.Fatalf("got %v, want ErrUnsupportedFeature", err)
	}
}

// Unrolling stays cheap: a fixed number of primitive ops per time step
// (one MatMul and the gate arithmetic), plus the input projection, the
// initial state fills and the Y_h copy. A Y that no node reads is not
// written. On the CPU the gate arithmetic of an LSTM step (of a GRU step
// after its last MatMul) is one rt.Fused op;
// with NoFusion it is the primitive ops that other backends run.
func TestRecurrentOpCount(t *testing.T) {
	const seq = 5
	for _, tc := range []struct {
		name    string
		op      string
		attrs   model.Attrs
		yOutput bool // Y is a graph output (else dangling)
		want    int  // with NoFusion
		fused   int  // with rt.Fused (the CPU)
	}{
		{"rnn", "RNN", nil, true, seq + 3, seq + 3},
		{"rnn_layout1_dangling_y", "RNN", model.Attrs{"layout": 1}, false, seq + 3, seq + 3},
		{"rnn_layout1", "RNN", model.Attrs{"layout": 1}, true, 2*seq + 3, 2*seq + 3},
		{"gru", "GRU", nil, true, 6*seq + 3, 4*seq + 3},
		{"gru_lbr", "GRU", model.Attrs{"linear_before_reset": 1}, true, 9*seq + 3, 2*seq + 3},
		{"lstm", "LSTM", nil, true, 8*seq + 4, 2*seq + 4},
		{"lstm_bidi", "LSTM", model.Attrs{"direction": "bidirectional"}, true, 2 * (8*seq + 4), 2 * (2*seq + 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := rnnCase{op: tc.op, h: 4, dir: "forward"}
			if d, ok := tc.attrs["direction"]; ok {
				rc.dir = d.(string)
			}
			nd, g := rc.dirs(), rc.gates()
			b := model.NewBuilder()
			xs := []int64{seq, 2, 3}
			if tc.attrs["layout"] == 1 {
				xs = []int64{2, seq, 3}
			}
			x := b.Input("X", rt.F32, xs...)
			w := b.Weight("W", rt.F32, []int64{int64(nd), int64(g * 4), 3}, make([]float32, nd*g*4*3))
			r := b.Weight("R", rt.F32, []int64{int64(nd), int64(g * 4), 4}, make([]float32, nd*g*4*4))
			bias := b.Weight("B", rt.F32, []int64{int64(nd), int64(2 * g * 4)}, make([]float32, nd*2*g*4))
			attrs := model.Attrs{"hidden_size": 4}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			b.Node("cell", tc.op, []string{x, w, r, bias}, []string{"Y", "Y_h"}, attrs)
			b.Output("Y_h")
			if tc.yOutput {
				b.Output("Y")
			}
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if got := session(t, m, engine.Options{NoFusion: true}).Info().Ops; got != tc.want {
				t.Errorf("NoFusion: %d primitive ops, want %d", got, tc.want)
			}
			if got := session(t, m, engine.Options{}).Info().Ops; got != tc.fused {
				t.Errorf("fused: %d primitive ops, want %d", got, tc.fused)
			}
		})
	}
}
