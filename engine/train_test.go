package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
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
