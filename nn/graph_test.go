package nn_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

func trainer(t *testing.T, g *nn.Graph, loss nn.Value, outs []nn.Value, edit func(*engine.TrainOptions)) *engine.Trainer {
	t.Helper()
	m, err := g.Model(append(outs, loss)...)
	if err != nil {
		t.Fatal(err)
	}
	opts := g.TrainOptions(m, loss)
	if edit != nil {
		edit(&opts)
	}
	dev := cpu.NewDevice()
	t.Cleanup(func() { dev.Close() })
	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func fill(n int, f func(i int) float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	return v
}

// TestDropout checks the training mask (the fraction dropped, the
// 1/(1-p) scale, the gradient through the same mask, a new mask each
// step, the same masks for the same Trainer seed) and the identity in
// inference.
func TestDropout(t *testing.T) {
	const p, rows, cols = 0.3, 100, 50
	run := func(seed uint64) ([][]float64, [][]float64, *engine.Trainer) {
		g := nn.NewGraph(rt.F64, 1)
		x := g.Input("x", rows, cols)
		w := g.Param("w", []int{1}, nn.Constant(1))
		y := nn.Dropout{P: p}.Forward(g, g.Mul(x, w))
		loss := g.Sum(y, false)
		tr := trainer(t, g, loss, []nn.Value{y}, func(o *engine.TrainOptions) {
			o.Seed = seed
			o.InputGrads = []string{"x"}
		})
		in := map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F64, fill(rows*cols, func(int) float64 { return 1 }), rows, cols)}
		var outs, grads [][]float64
		for range 2 {
			r, err := tr.Step(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			gr, err := tr.Grads()
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, r.Outputs[y.Name()].Float64s())
			grads = append(grads, gr["x"].Float64s())
		}
		return outs, grads, tr
	}
	outs, grads, tr := run(5)
	for s, o := range outs {
		zeros := 0
		for i, v := range o {
			switch {
			case v == 0:
				zeros++
			case math.Abs(v-1/(1-p)) > 1e-12:
				t.Fatalf("step %d: kept value %g, want 1/(1-p) = %g", s, v, 1/(1-p))
			}
			if grads[s][i] != v { // d sum(x*m)/dx = m
				t.Fatalf("step %d: gradient %g where the output is %g", s, grads[s][i], v)
			}
		}
		// Binomial(5000, 0.3): std 32.4; allow 5 std.
		if f := float64(zeros); math.Abs(f-p*rows*cols) > 5*math.Sqrt(rows*cols*p*(1-p)) {
			t.Errorf("step %d: %d of %d dropped, want about %g", s, zeros, rows*cols, p*rows*cols)
		}
	}
	if slices.Equal(outs[0], outs[1]) {
		t.Error("the same mask in two steps")
	}
	again, _, _ := run(5)
	if !slices.Equal(outs[0], again[0]) || !slices.Equal(outs[1], again[1]) {
		t.Error("the same Trainer seed gave other masks")
	}
	other, _, _ := run(6)
	if slices.Equal(outs[0], other[0]) {
		t.Error("another Trainer seed gave the same mask")
	}
	ev, err := tr.Eval(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F64, fill(rows*cols, func(i int) float64 { return float64(i) }), rows, cols)})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range ev[outs2name(t, ev)].Float64s() {
		if v != float64(i) {
			t.Fatalf("inference: out[%d] = %g, want the input %d", i, v, i)
		}
	}
}

// outs2name returns the one non-loss output of an Eval result.
func outs2name(t *testing.T, m map[string]*rt.Tensor) string {
	for k, v := range m {
		if v.Len() > 1 {
			return k
		}
	}
	t.Fatal("no output")
	return ""
}

// TestNoGrad: parameters used only inside NoGrad get a zero gradient and
// are not updated, also when the NoGrad region only views them; the
// region's nodes are listed in TrainOptions.NoGrad.
func TestNoGrad(t *testing.T) {
	for _, view := range []bool{false, true} {
		g := nn.NewGraph(rt.F64, 1)
		x := g.Input("x", 2, 3)
		frozen := g.Param("frozen", []int{6}, nn.Constant(0.5))
		w := g.Param("w", []int{2, 3}, nn.Constant(1))
		var h nn.Value
		g.NoGrad(func() {
			if view {
				h = g.Reshape(w, 2, 3) // w itself, seen through a view
			} else {
				h = g.Reshape(g.Scale(frozen, 2), 2, 3)
			}
		})
		loss := g.Sum(g.Mul(g.Add(h, w), x), false)
		tr := trainer(t, g, loss, nil, func(o *engine.TrainOptions) {
			o.Optimizer = &engine.Optimizer{Kind: engine.SGD, LR: 0.5}
			if len(o.NoGrad) == 0 || !strings.Contains(o.NoGrad[len(o.NoGrad)-1], "Reshape") {
				t.Errorf("NoGrad nodes %v", o.NoGrad)
			}
		})
		xs := []float64{1, 2, 3, 4, 5, 6}
		in := map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F64, xs, 2, 3)}
		for range 3 {
			if _, err := tr.Step(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		}
		gr, err := tr.Grads()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gr["w"].Float64s(), xs) {
			t.Errorf("view %v: d loss/d w = %v, want x = %v", view, gr["w"].Float64s(), xs)
		}
		wts, err := tr.Weights()
		if err != nil {
			t.Fatal(err)
		}
		if !view {
			for _, v := range gr["frozen"].Float64s() {
				if v != 0 {
					t.Errorf("d loss/d frozen = %v, want 0", gr["frozen"].Float64s())
					break
				}
			}
			for i, v := range wts["frozen"].Float64s() {
				if v != 0.5 {
					t.Errorf("frozen[%d] = %g after 3 steps, want 0.5", i, v)
				}
			}
		}
		for i, v := range wts["w"].Float64s() {
			if want := 1 - 3*0.5*xs[i]; v != want {
				t.Errorf("view %v: w[%d] = %g after 3 steps, want %g", view, i, v, want)
			}
		}
	}
}

// TestModelPrunes: a model keeps only what its outputs need, so one
// graph gives a training model and an inference model without the loss
// and its target.
func TestModelPrunes(t *testing.T) {
	g := nn.NewGraph(rt.F32, 1)
	x := g.Input("x", 4, 3)
	y := g.InputOf("y", rt.I64, 4)
	logits := nn.NewSequential(nn.NewLinear(3, 5), nn.ReLU{}, nn.NewLinear(5, 2)).Forward(g, x)
	loss := nn.CrossEntropyLoss(g, logits, y, nn.ClassOptions{Weight: []float64{1, 2}})
	train, err := g.Model(logits, loss)
	if err != nil {
		t.Fatal(err)
	}
	infer, err := g.Model(logits)
	if err != nil {
		t.Fatal(err)
	}
	if train.TensorIndex("y") < 0 || infer.TensorIndex("y") >= 0 || infer.TensorIndex("class_weight") >= 0 {
		t.Error("the inference model keeps the target or the loss")
	}
	if len(infer.Nodes) >= len(train.Nodes) {
		t.Errorf("inference model has %d nodes, training model %d", len(infer.Nodes), len(train.Nodes))
	}
	want := []string{"0.weight", "0.bias", "2.weight", "2.bias"}
	if got := g.TrainOptions(infer, logits).Params; !slices.Equal(got, want) {
		t.Errorf("params %v, want %v", got, want)
	}
}

// TestNaming: parameter names follow PyTorch's state_dict keys through
// Sequential, named layers, scopes and nesting; a layer called twice
// shares its parameters.
func TestNaming(t *testing.T) {
	g := nn.NewGraph(rt.F32, 1)
	x := g.Input("x", 2, 4)
	inner := &nn.Sequential{Layers: []nn.Layer{nn.NewLinear(4, 4), nn.Tanh{}}}
	block := &nn.Sequential{Name: "block", Layers: []nn.Layer{nn.Tanh{}, nn.NewLinear(4, 4)}}
	shared := &nn.Linear{In: 4, Out: 4, Name: "shared"}
	net := &nn.Sequential{Name: "net", Layers: []nn.Layer{nn.NewLinear(4, 4), inner, shared, shared, block}}
	h := net.Forward(g, x)
	g.Scope("head", func() { h = nn.NewLinear(4, 2).Forward(g, h) })
	nn.NewLinear(2, 2).Forward(g, h)
	nn.NewLinear(2, 2).Forward(g, h)
	want := []string{"net.0.weight", "net.0.bias", "net.1.0.weight", "net.1.0.bias", "net.shared.weight",
		"net.shared.bias", "net.block.1.weight", "net.block.1.bias", "head.linear0.weight", "head.linear0.bias", "linear0.weight", "linear0.bias",
		"linear1.weight", "linear1.bias"}
	if got := g.Params(); !slices.Equal(got, want) {
		t.Errorf("params\n%v, want\n%v", got, want)
	}
}

// TestErrors: bad arguments are errors from Model, never panics.
func TestErrors(t *testing.T) {
	cases := map[string]func(g *nn.Graph, x nn.Value){
		"linear": func(g *nn.Graph, x nn.Value) { nn.NewLinear(0, 3).Forward(g, x) },
		"conv": func(g *nn.Graph, x nn.Value) {
			(&nn.Conv2D{In: 3, Out: 4, Kernel: [2]int{3, 3}, Groups: 2}).Forward(g, x)
		},
		"same": func(g *nn.Graph, x nn.Value) {
			(&nn.Conv2D{In: 1, Out: 1, Kernel: [2]int{3, 3}, Same: true, Stride: [2]int{2, 2}}).Forward(g, x)
		},
		"dropout":   func(g *nn.Graph, x nn.Value) { nn.Dropout{P: 1}.Forward(g, x) },
		"embedding": func(g *nn.Graph, x nn.Value) { nn.NewEmbedding(4, 2).Forward(g, x) },
		"padding": func(g *nn.Graph, x nn.Value) {
			(&nn.Embedding{Num: 4, Dim: 2, PaddingIdx: intp(4)}).Forward(g, g.InputOf("i", rt.I64, 2))
		},
		"attention": func(g *nn.Graph, x nn.Value) { nn.NewMultiHeadAttention(6, 4).Forward(g, x) },
		"lstm":      func(g *nn.Graph, x nn.Value) { nn.NewLSTM(0, 3).Forward(g, x) },
		"ce target": func(g *nn.Graph, x nn.Value) { nn.CrossEntropyLoss(g, x, x, nn.ClassOptions{}) },
		"batchmean": func(g *nn.Graph, x nn.Value) { nn.MSELoss(g, x, x, nn.BatchMean) },
		"huber":     func(g *nn.Graph, x nn.Value) { nn.HuberLoss(g, x, x, 0, nn.Mean) },
		"dup param": func(g *nn.Graph, x nn.Value) { g.Param("p", []int{1}, nil); g.Param("p", []int{1}, nil) },
		"foreign":   func(g *nn.Graph, x nn.Value) { nn.ReLU{}.Forward(g, nn.NewGraph(rt.F32, 1).Input("other", 1)) },
		"chained":   func(g *nn.Graph, x nn.Value) { nn.ReLU{}.Forward(g, nn.NewLinear(0, 1).Forward(g, x)) },
		"set param": func(g *nn.Graph, x nn.Value) { g.SetParam("nope", rt.FromFloat32([]float32{1}, 1)) },
	}
	for name, f := range cases {
		g := nn.NewGraph(rt.F32, 1)
		x := g.Input("x", 2, 3)
		f(g, x)
		if _, err := g.Model(nn.ReLU{}.Forward(g, x)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := nn.NewGraph(rt.I32, 1).Model(); err == nil {
		t.Error("i32 graph: no error")
	}
	g := nn.NewGraph(rt.F32, 1)
	l := nn.NewLinear(2, 2)
	l.Forward(g, g.Input("x", 1, 2))
	if err := g.SetParam("linear0.weight", rt.FromFloat32([]float32{1, 2, 3}, 3)); err == nil {
		t.Error("SetParam with the wrong shape: no error")
	}
}

// TestDynamicShapes: a small transformer block over inputs with dynamic
// batch and sequence dims (positional encoding, causal attention and the
// loss divisors read their sizes from shape subgraphs), trained on two
// sequence lengths with one Trainer; dropout inside LSTM and attention
// is active while training and absent in inference.
func TestDynamicShapes(t *testing.T) {
	g := nn.NewGraph(rt.F32, 3)
	tok := g.InputOf("tok", rt.I64, -1, -1)
	tgt := g.InputOf("tgt", rt.I64, -1, -1)
	h := (&nn.Embedding{Num: 11, Dim: 8, Name: "emb"}).Forward(g, tok)
	h = nn.PositionalEncoding{Dim: 8, MaxLen: 32, BatchFirst: true}.Forward(g, h)
	attn := &nn.MultiHeadAttention{Embed: 8, Heads: 2, BatchFirst: true, Dropout: 0.2, Name: "attn"}
	a, _ := attn.Attend(g, h, h, h, nn.AttentionOptions{Causal: true})
	h = (&nn.LayerNorm{Shape: []int{8}, Name: "ln"}).Forward(g, g.Add(h, a))
	lstm := nn.NewLSTM(8, 6)
	lstm.Name, lstm.Layers, lstm.BatchFirst, lstm.Dropout = "lstm", 2, true, 0.3
	h = lstm.Forward(g, h)
	logits := g.Transpose((&nn.Linear{In: 6, Out: 11, Name: "out"}).Forward(g, h), 0, 2, 1) // [N, C, L]
	loss := nn.CrossEntropyLoss(g, logits, tgt, nn.ClassOptions{LabelSmoothing: 0.1})
	tr := trainer(t, g, loss, []nn.Value{logits}, func(o *engine.TrainOptions) {
		o.Shapes = map[string][]int{"tok": {2, 5}, "tgt": {2, 5}}
		o.Optimizer = &engine.Optimizer{Kind: engine.Adam, LR: 0.01}
	})
	batch := func(n, l int) map[string]*rt.Tensor {
		v := fill(n*l, func(i int) float64 { return float64((i*7 + 3) % 11) })
		w := fill(n*l, func(i int) float64 { return float64((i*7 + 4) % 11) })
		return map[string]*rt.Tensor{"tok": rt.FromFloat64(rt.I64, v, n, l), "tgt": rt.FromFloat64(rt.I64, w, n, l)}
	}
	ctx := context.Background()
	var first, last float64
	for s := range 40 {
		in := batch(2, 5)
		if s%2 == 1 {
			in = batch(3, 7)
		}
		r, err := tr.Step(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if s == 0 {
			first = r.Loss
		}
		last = r.Loss
	}
	if !(last < first) {
		t.Errorf("loss %g after 40 steps, %g at the first", last, first)
	}
	// Inference is deterministic (no dropout) and agrees with the same
	// weights in a graph built without dropout.
	in := batch(3, 7)
	delete(in, "tgt")
	e1, err := tr.Eval(ctx, batch(3, 7))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := tr.Eval(ctx, batch(3, 7))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e1[logits.Name()].Float64s(), e2[logits.Name()].Float64s()) {
		t.Error("inference is not deterministic")
	}
	w, err := tr.Weights()
	if err != nil {
		t.Fatal(err)
	}
	g2 := nn.NewGraph(rt.F32, 3)
	tok2 := g2.InputOf("tok", rt.I64, -1, -1)
	h2 := (&nn.Embedding{Num: 11, Dim: 8, Name: "emb"}).Forward(g2, tok2)
	h2 = nn.PositionalEncoding{Dim: 8, MaxLen: 32, BatchFirst: true}.Forward(g2, h2)
	a2, _ := (&nn.MultiHeadAttention{Embed: 8, Heads: 2, BatchFirst: true, Name: "attn"}).Attend(g2, h2, h2, h2, nn.AttentionOptions{Causal: true})
	h2 = (&nn.LayerNorm{Shape: []int{8}, Name: "ln"}).Forward(g2, g2.Add(h2, a2))
	l2 := nn.NewLSTM(8, 6)
	l2.Name, l2.Layers, l2.BatchFirst = "lstm", 2, true
	h2 = l2.Forward(g2, h2)
	lg2 := g2.Transpose((&nn.Linear{In: 6, Out: 11, Name: "out"}).Forward(g2, h2), 0, 2, 1)
	for _, name := range g2.Params() {
		if err := g2.SetParam(name, w[name]); err != nil {
			t.Fatal(err)
		}
	}
	m2, err := g2.Model(lg2)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	s2, err := engine.New(m2, dev, engine.Options{Shapes: map[string][]int{"tok": {3, 7}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	out, err := s2.Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, want := out[lg2.Name()].Float64s(), e1[logits.Name()].Float64s()
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-5*(1+math.Abs(want[i])) {
			t.Fatalf("logits[%d] = %g without dropout layers, %g from Trainer.Eval", i, got[i], want[i])
		}
	}
}

// TestConstantsNotTrained: float constants (class weights, dropout
// ratios, tables) are frozen, so a loss with no parameters differentiates
// its inputs only and an optimizer never changes a constant.
func TestConstantsNotTrained(t *testing.T) {
	g := nn.NewGraph(rt.F64, 1)
	x := g.Input("x", 3, 4)
	y := g.InputOf("y", rt.I64, 3)
	h := nn.Dropout{P: 0.1}.Forward(g, x)
	loss := nn.CrossEntropyLoss(g, h, y, nn.ClassOptions{Weight: []float64{1, 2, 3, 4}, LabelSmoothing: 0.1})
	tr := trainer(t, g, loss, nil, func(o *engine.TrainOptions) {
		if len(o.Params) != 0 || len(o.Frozen) == 0 {
			t.Errorf("params %v, frozen %v", o.Params, o.Frozen)
		}
		o.InputGrads = []string{"x"}
	})
	if _, err := tr.Step(context.Background(), map[string]*rt.Tensor{
		"x": rt.FromFloat64(rt.F64, fill(12, func(i int) float64 { return float64(i%5) - 2 }), 3, 4),
		"y": rt.FromFloat64(rt.I64, []float64{0, 3, 1}, 3)}); err != nil {
		t.Fatal(err)
	}
	gr, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	if len(gr) != 1 || gr["x"] == nil {
		t.Errorf("gradients of %d tensors, want x only", len(gr))
	}
}
