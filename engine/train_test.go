package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// f64 returns random float64 values away from zero: |v| in [0.1, 1.1).
func f64(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = (0.1 + rng.Float64()) * float64(1-2*rng.IntN(2))
	}
	return v
}

func shape64(s ...int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// gradCase is a small f64 model whose output "loss" is a scalar.
type gradCase struct {
	name   string
	inputs map[string][]int
	build  func(b *model.Builder, w func(name string, shape ...int) string) string // returns the loss tensor
}

var gradCases = []gradCase{
	{"mlp", map[string][]int{"x": {4, 5}}, func(b *model.Builder, w func(string, ...int) string) string {
		h := b.Op("Relu", []string{b.Op("Gemm", []string{"x", w("w1", 7, 5), w("b1", 7)}, model.Attrs{"transB": 1})}, nil)
		y := b.Op("MatMul", []string{h, w("w2", 7, 3)}, nil)
		ls := b.Op("LogSoftmax", []string{y}, model.Attrs{"axis": 1})
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{ls, w("t", 4, 3)}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"cnn", map[string][]int{"x": {2, 3, 9, 8}}, func(b *model.Builder, w func(string, ...int) string) string {
		c := b.Op("Conv", []string{"x", w("cw", 4, 3, 3, 3), w("cb", 4)}, model.Attrs{"pads": []int64{1, 0, 2, 1}, "strides": []int64{1, 2}})
		c = b.Op("Tanh", []string{c}, nil)
		p := b.Op("MaxPool", []string{c}, model.Attrs{"kernel_shape": []int64{2, 2}, "strides": []int64{2, 1}})
		d := b.Op("Conv", []string{p, w("dw", 4, 2, 2, 2)}, model.Attrs{"group": 2, "dilations": []int64{1, 1}})
		a := b.Op("AveragePool", []string{d}, model.Attrs{"kernel_shape": []int64{2, 2}, "pads": []int64{1, 1, 0, 0}})
		f := b.Op("Flatten", []string{a}, nil)
		return b.Op("ReduceSumSquare", []string{b.Op("Sigmoid", []string{f}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"exp", map[string][]int{"x": {5}}, func(b *model.Builder, w func(string, ...int) string) string {
		// Exp's rule reads its saved output directly: the output must stay
		// alive until the backward step, not be reused by the loss seed.
		e := b.Op("Exp", []string{b.Op("Mul", []string{"x", w("s", 5)}, nil)}, nil)
		return b.Op("ReduceSum", []string{e}, model.Attrs{"keepdims": 0})
	}},
	{"convtranspose", map[string][]int{"x": {2, 4, 3, 4}}, func(b *model.Builder, w func(string, ...int) string) string {
		y := b.Op("ConvTranspose", []string{"x", w("w", 4, 3, 3, 2), w("b", 6)},
			model.Attrs{"group": 2, "strides": []int64{2, 1}, "pads": []int64{1, 0, 0, 1}, "output_padding": []int64{1, 0}})
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{b.Op("Sin", []string{y}, nil), w("t", 2, 6, 7, 4)}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"layernorm", map[string][]int{"x": {3, 6}}, func(b *model.Builder, w func(string, ...int) string) string {
		n := b.Op("LayerNormalization", []string{"x", w("g", 6), w("bb", 6)}, nil)
		n = b.Op("Gelu", []string{n}, nil)
		s := b.Op("Softmax", []string{b.Op("Mul", []string{n, w("s", 1, 6)}, nil)}, model.Attrs{"axis": 0})
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{s, w("t", 3, 6)}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"lstm", map[string][]int{"x": {4, 2, 3}}, func(b *model.Builder, w func(string, ...int) string) string {
		ys := b.OpN("LSTM", []string{"x", w("W", 2, 20, 3), w("R", 2, 20, 5), w("B", 2, 40), "", w("h0", 2, 2, 5), w("c0", 2, 2, 5)}, 3,
			model.Attrs{"hidden_size": 5, "direction": "bidirectional"})
		s := b.Op("Add", []string{b.Op("ReduceSum", []string{b.Op("Mul", []string{ys[0], w("t", 4, 2, 2, 5)}, nil)}, model.Attrs{"keepdims": 0}),
			b.Op("ReduceSum", []string{b.Op("Mul", []string{ys[2], w("u", 2, 2, 5)}, nil)}, model.Attrs{"keepdims": 0})}, nil)
		return s
	}},
	{"gru", map[string][]int{"x": {3, 2, 4}}, func(b *model.Builder, w func(string, ...int) string) string {
		ys := b.OpN("GRU", []string{"x", w("W", 1, 9, 4), w("R", 1, 9, 3), w("B", 1, 18)}, 2,
			model.Attrs{"hidden_size": 3, "linear_before_reset": 1})
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{ys[0], w("t", 3, 1, 2, 3)}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"attention", map[string][]int{"x": {2, 5, 4}}, func(b *model.Builder, w func(string, ...int) string) string {
		q := b.Op("MatMul", []string{"x", w("wq", 4, 4)}, nil)
		k := b.Op("MatMul", []string{"x", w("wk", 4, 4)}, nil)
		v := b.Op("MatMul", []string{"x", w("wv", 4, 4)}, nil)
		s := b.Op("MatMul", []string{q, b.Op("Transpose", []string{k}, model.Attrs{"perm": []int64{0, 2, 1}})}, nil)
		s = b.Op("Add", []string{b.Op("Mul", []string{s, w("scale", 1)}, nil), w("mask", 5, 5)}, nil)
		a := b.Op("MatMul", []string{b.Op("Softmax", []string{s}, model.Attrs{"axis": -1}), v}, nil)
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{a, w("t", 2, 5, 4)}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"shapes", map[string][]int{"x": {2, 3, 4}}, func(b *model.Builder, w func(string, ...int) string) string {
		parts := b.OpN("Split", []string{"x", b.Weight("sp", rt.I64, []int64{2}, []int64{1, 3})}, 2, model.Attrs{"axis": 2})
		c := b.Op("Concat", []string{parts[1], b.Op("Exp", []string{parts[0]}, nil), w("e", 2, 3, 2)}, model.Attrs{"axis": 2})
		sl := b.Op("Slice", []string{c, b.Weight("st", rt.I64, []int64{1}, []int64{5}), b.Weight("en", rt.I64, []int64{1}, []int64{0}),
			b.Weight("ax", rt.I64, []int64{1}, []int64{2}), b.Weight("sd", rt.I64, []int64{1}, []int64{-2})}, nil)
		p := b.Op("Pad", []string{sl, b.Weight("pd", rt.I64, []int64{6}, []int64{0, 1, 0, 0, 0, 2})}, nil)
		tt := b.Op("Transpose", []string{p}, model.Attrs{"perm": []int64{2, 0, 1}})
		r := b.Op("Reshape", []string{tt, b.Weight("rs", rt.I64, []int64{2}, []int64{-1, 4})}, nil)
		e := b.Op("Expand", []string{b.Op("Tanh", []string{w("ex", 1, 4)}, nil), b.Weight("es", rt.I64, []int64{2}, []int64{5, 4})}, nil)
		g := b.Op("Gather", []string{w("emb", 6, 4), b.Weight("gi", rt.I64, []int64{5}, []int64{1, 3, 1, 0, 5})}, model.Attrs{"axis": 0})
		y := b.Op("Mul", []string{b.Op("Add", []string{r, b.Op("Tile", []string{b.Op("Add", []string{e, g}, nil), b.Weight("tl", rt.I64, []int64{2}, []int64{2, 1})}, nil)}, nil), w("t", 10, 4)}, nil)
		return b.Op("ReduceMean", []string{b.Op("Mul", []string{y, y}, nil)}, model.Attrs{"keepdims": 0})
	}},
	{"batchnorm", map[string][]int{"x": {4, 3, 2, 3}}, func(b *model.Builder, w func(string, ...int) string) string {
		y := b.Op("BatchNormalization", []string{"x", w("g", 3), w("bb", 3), b.Weight("rm", rt.F64, []int64{3}, []float64{0, 0, 0}),
			b.Weight("rv", rt.F64, []int64{3}, []float64{1, 1, 1})}, nil)
		y = b.Op("Softplus", []string{y}, nil)
		return b.Op("ReduceSum", []string{b.Op("Mul", []string{y, w("t", 4, 3, 2, 3)}, nil)}, model.Attrs{"keepdims": 0})
	}},
}

// TestGradientsFiniteDifference checks every gradient of small f64
// models against central finite differences of the loss.
func TestGradientsFiniteDifference(t *testing.T) {
	for _, tc := range gradCases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 11))
			b := model.NewBuilder()
			var inNames []string
			for name, sh := range tc.inputs {
				b.Input(name, rt.F64, shape64(sh...)...)
				inNames = append(inNames, name)
			}
			var params []string
			wf := func(name string, shape ...int) string {
				params = append(params, name)
				return b.Weight(name, rt.F64, shape64(shape...), f64(rng, int(rt.NumElements(shape))))
			}
			loss := tc.build(b, wf)
			b.Node("loss", "Identity", []string{loss}, []string{"loss"}, nil)
			b.Output("loss")
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			dev := cpu.NewDevice()
			defer dev.Close()
			tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", InputGrads: inNames})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			inputs := map[string]*rt.Tensor{}
			for name, sh := range tc.inputs {
				inputs[name] = rt.FromFloat64(rt.F64, f64(rng, int(rt.NumElements(sh))), sh...)
			}
			ctx := context.Background()
			if _, err := tr.Step(ctx, inputs); err != nil {
				t.Fatal(err)
			}
			grads, err := tr.Grads()
			if err != nil {
				t.Fatal(err)
			}
			weights, err := tr.Weights()
			if err != nil {
				t.Fatal(err)
			}
			lossAt := func() float64 {
				r, err := tr.Step(ctx, inputs)
				if err != nil {
					t.Fatal(err)
				}
				return r.Loss
			}
			const h = 1e-6
			check := func(name string, get func() []float64, set func([]float64)) {
				g := grads[name].Float64s()
				v := get()
				// At most 10 elements per tensor, spread over it.
				for i := 0; i < len(v); i += max(1, len(v)/10) {
					orig := v[i]
					v[i] = orig + h
					set(v)
					lp := lossAt()
					v[i] = orig - h
					set(v)
					lm := lossAt()
					v[i] = orig
					set(v)
					fd := (lp - lm) / (2 * h)
					if math.Abs(fd-g[i]) > 1e-6+1e-5*math.Abs(fd) {
						t.Errorf("d loss/d %s[%d] = %.9g, finite difference %.9g", name, i, g[i], fd)
						return
					}
				}
			}
			for _, name := range params {
				name := name
				check(name, func() []float64 { return weights[name].Float64s() }, func(v []float64) {
					w := rt.FromFloat64(rt.F64, v, weights[name].Shape...)
					if err := tr.SetWeights(map[string]*rt.Tensor{name: w}); err != nil {
						t.Fatal(err)
					}
				})
			}
			for _, name := range inNames {
				name := name
				check(name, func() []float64 { return inputs[name].Float64s() }, func(v []float64) {
					inputs[name] = rt.FromFloat64(rt.F64, v, inputs[name].Shape...)
				})
			}
		})
	}
}

// linearModel is y = x @ w + b (w frozen or not), loss = sum((y-t)^2).
func linearModel(t *testing.T, dt rt.DType) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	b.Input("x", dt, 3, 4)
	b.Input("t", dt, 3, 2)
	w := b.Weight("w", dt, []int64{4, 2}, []float64{0.5, -0.25, 1, 0.75, -1, 0.5, 0.25, -0.5})
	bias := b.Weight("b", dt, []int64{2}, []float64{0.1, -0.2})
	h := b.Op("MatMul", []string{"x", w}, nil)
	b.Node("act", "Tanh", []string{h}, []string{"h2"}, nil)
	y := b.Op("Add", []string{"h2", bias}, nil)
	d := b.Op("Sub", []string{y, "t"}, nil)
	l := b.Op("ReduceSum", []string{b.Op("Mul", []string{d, d}, nil)}, model.Attrs{"keepdims": 0})
	b.Node("loss", "Identity", []string{l}, []string{"loss"}, nil)
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func linearInputs(dt rt.DType) map[string]*rt.Tensor {
	return map[string]*rt.Tensor{
		"x": rt.FromFloat64(dt, []float64{1, 2, -1, 0.5, -0.3, 0.2, 0.9, -1.1, 0.4, 0.6, -0.7, 1.3}, 3, 4),
		"t": rt.FromFloat64(dt, []float64{0.3, -0.1, 0.2, 0.5, -0.6, 0.1}, 3, 2),
	}
}

// TestNoGradAndFrozen checks that frozen weights and NoGrad nodes get no
// gradient, are not updated, and cost no gradient work.
func TestNoGradAndFrozen(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m := linearModel(t, rt.F64)
	ctx := context.Background()
	sgd := &engine.Optimizer{Kind: engine.SGD, LR: 0.1}
	full, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	frozen, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Frozen: []string{"w"}, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	// NoGrad on the Tanh cuts the path to w: w gets a zero gradient.
	nograd, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", NoGrad: []string{"act"}, Optimizer: sgd})
	if err != nil {
		t.Fatal(err)
	}
	defer nograd.Close()
	for _, tr := range []*engine.Trainer{full, frozen, nograd} {
		if _, err := tr.Step(ctx, linearInputs(rt.F64)); err != nil {
			t.Fatal(err)
		}
	}
	wf, _ := full.Weights()
	wz, _ := frozen.Weights()
	wn, _ := nograd.Weights()
	w0 := []float64{0.5, -0.25, 1, 0.75, -1, 0.5, 0.25, -0.5}
	changed := func(v []float64) bool {
		for i := range v {
			if v[i] != w0[i] {
				return true
			}
		}
		return false
	}
	if !changed(wf["w"].Float64s()) {
		t.Errorf("trained w did not change")
	}
	if _, ok := wz["w"]; ok {
		t.Errorf("frozen w is listed as trained")
	}
	if changed(wn["w"].Float64s()) {
		t.Errorf("w behind a NoGrad node changed: %v", wn["w"].Float64s())
	}
	gn, _ := nograd.Grads()
	for _, v := range gn["w"].Float64s() {
		if v != 0 {
			t.Fatalf("w behind a NoGrad node has gradient %v", gn["w"].Float64s())
		}
	}
	// Both biases moved the same way: the bias gradient does not depend
	// on w.
	if a, b := wf["b"].Float64s(), wn["b"].Float64s(); a[0] != b[0] || a[1] != b[1] {
		t.Errorf("bias after one step: %v (full) vs %v (NoGrad)", a, b)
	}
	if nf, nz := full.Info().Ops, frozen.Info().Ops; nz >= nf {
		t.Errorf("frozen w costs gradient work: %d ops, %d with w trained", nz, nf)
	}
	if nf, nn := full.Info().Ops, nograd.Info().Ops; nn >= nf {
		t.Errorf("NoGrad node costs gradient work: %d ops, %d without", nn, nf)
	}
}

// TestSGDStep checks one plain SGD step, w -= lr * dL/dw, against the
// gradient of the same step computed without an optimizer.
func TestSGDStep(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m := linearModel(t, rt.F64)
	ctx := context.Background()
	plain, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Step(ctx, linearInputs(rt.F64)); err != nil {
		t.Fatal(err)
	}
	g, _ := plain.Grads()
	w0, _ := plain.Weights()
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r1, err := tr.Step(ctx, linearInputs(rt.F64))
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := tr.Weights()
	for _, name := range []string{"w", "b"} {
		a, gv, b := w0[name].Float64s(), g[name].Float64s(), w1[name].Float64s()
		for i := range a {
			if want := a[i] - 0.05*gv[i]; math.Abs(b[i]-want) > 1e-15 {
				t.Errorf("%s[%d] = %v after one step, want %v", name, i, b[i], want)
			}
		}
	}
	r2, err := tr.Step(ctx, linearInputs(rt.F64))
	if err != nil {
		t.Fatal(err)
	}
	if !(r2.Loss < r1.Loss) {
		t.Errorf("loss did not decrease: %v then %v", r1.Loss, r2.Loss)
	}
	// Eval sees the trained weights.
	out, err := tr.Eval(ctx, linearInputs(rt.F64))
	if err != nil {
		t.Fatal(err)
	}
	r3, _ := tr.Step(ctx, linearInputs(rt.F64))
	if got := out["loss"].Float64(0); got != r3.Loss {
		t.Errorf("Eval loss %v, training step loss on the same weights %v", got, r3.Loss)
	}
}

// TestDropoutTraining checks the training-mode mask (zeros at about the
// drop rate, survivors scaled by 1/(1-p), the gradient masked alike) and
// the identity in Eval.
func TestDropoutTraining(t *testing.T) {
	b := model.NewBuilder()
	b.Input("x", rt.F32, 64, 32)
	w := b.Weight("w", rt.F32, []int64{1}, []float32{1})
	y := b.Op("Dropout", []string{b.Op("Mul", []string{"x", w}, nil), b.Weight("ratio", rt.F32, []int64{}, []float32{0.25})}, nil)
	b.Node("loss", "ReduceSum", []string{y}, []string{"loss"}, model.Attrs{"keepdims": 0})
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: []string{"w"}, InputGrads: []string{"x"}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ones := make([]float32, 64*32)
	for i := range ones {
		ones[i] = 1
	}
	in := map[string]*rt.Tensor{"x": rt.FromFloat32(ones, 64, 32)}
	ctx := context.Background()
	r, err := tr.Step(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := tr.Grads()
	zeros := 0
	for _, v := range g["x"].Float64s() {
		switch {
		case v == 0:
			zeros++
		case math.Abs(v-1/0.75) > 1e-6:
			t.Fatalf("gradient of a kept element %v, want %v", v, 1/0.75)
		}
	}
	if frac := float64(zeros) / float64(len(ones)); frac < 0.2 || frac > 0.3 {
		t.Errorf("dropped fraction %.3f, want about 0.25", frac)
	}
	if want := float64(len(ones)-zeros) / 0.75; math.Abs(r.Loss-want) > 1e-2 {
		t.Errorf("loss %v, want %v (kept elements scaled by 1/(1-p))", r.Loss, want)
	}
	r2, _ := tr.Step(ctx, in)
	if r2.Loss == r.Loss {
		t.Errorf("two steps drew the same mask")
	}
	out, err := tr.Eval(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := out["loss"].Float64(0); got != float64(len(ones)) {
		t.Errorf("Eval loss %v, want %d (Dropout is the identity)", got, len(ones))
	}
}

// TestTrainerErrors checks that bad training setups fail with errors.
func TestTrainerErrors(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m := linearModel(t, rt.F64)
	for _, tc := range []struct {
		opts engine.TrainOptions
		want string
	}{
		{engine.TrainOptions{Loss: "nope"}, "not a model output"},
		{engine.TrainOptions{Loss: "loss", Params: []string{"x"}}, "not a weight"},
		{engine.TrainOptions{Loss: "loss", Frozen: []string{"w", "b"}}, "nothing to differentiate"},
		{engine.TrainOptions{Loss: "loss", InputGrads: []string{"w"}}, "not a model input"},
		{engine.TrainOptions{Loss: "loss", NoGrad: []string{"zz"}}, "not found"},
		{engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: "lbfgs"}}, "unknown kind"},
		{engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.SGD, Nesterov: true}}, "Nesterov"},
	} {
		tr, err := engine.NewTrainer(m, dev, tc.opts)
		if err == nil {
			tr.Close()
			t.Errorf("%+v: no error", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %q, want it to mention %q", tc.opts, err, tc.want)
		}
	}
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Grads(); err == nil {
		t.Errorf("Grads before Step: no error")
	}
	if _, err := tr.Step(context.Background(), map[string]*rt.Tensor{"x": linearInputs(rt.F64)["x"]}); err == nil || !strings.Contains(err.Error(), "missing input") {
		t.Errorf("missing input: %v", err)
	}
}

// TestNoGradView: a NoGrad node that only views its input (Reshape,
// Identity, Flatten) must still stop the gradient, although a view
// shares its input's storage, where gradients live.
func TestNoGradView(t *testing.T) {
	for _, op := range []string{"Reshape", "Identity", "Flatten"} {
		t.Run(op, func(t *testing.T) {
			b := model.NewBuilder()
			b.Input("x", rt.F64, 2, 3)
			w := b.Weight("w", rt.F64, shape64(2, 3), []float64{1, 1, 1, 1, 1, 1})
			shape := b.Weight("shape", rt.I64, shape64(2), []int64{2, 3})
			in := []string{w}
			if op == "Reshape" {
				in = append(in, shape)
			}
			b.Node("stop", op, in, []string{"v"}, nil)
			if op == "Flatten" {
				b.Node("back", "Reshape", []string{"v", shape}, []string{"v2"}, nil)
			} else {
				b.Node("back", "Identity", []string{"v"}, []string{"v2"}, nil)
			}
			s := b.Op("Add", []string{"v2", w}, nil)
			l := b.Op("ReduceSum", []string{b.Op("Mul", []string{s, "x"}, nil)}, model.Attrs{"keepdims": 0})
			b.Node("loss", "Identity", []string{l}, []string{"loss"}, nil)
			b.Output("loss")
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			dev := cpu.NewDevice()
			defer dev.Close()
			tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: []string{"w"}, NoGrad: []string{"stop"}})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			x := []float64{1, 2, 3, 4, 5, 6}
			r, err := tr.Step(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F64, x, 2, 3)})
			if err != nil {
				t.Fatal(err)
			}
			if r.Loss != 42 {
				t.Errorf("loss %g, want 42", r.Loss)
			}
			g, err := tr.Grads()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range g["w"].Float64s() {
				if v != x[i] {
					t.Fatalf("d loss/d w = %v, want x = %v (the no-grad view passed its gradient)", g["w"].Float64s(), x)
				}
			}
		})
	}
}
