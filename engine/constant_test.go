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

// convTrainModel is a 3×3 convolution with bias and ReLU and a squared
// loss against t: y = relu(conv(x, w) + b), loss = sum((y-t)²).
func convTrainModel(t *testing.T) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Float64() - 0.5)
		}
		return v
	}
	b := model.NewBuilder()
	b.Input("x", rt.F32, 1, 8, 10, 9)
	b.Input("t", rt.F32, 1, 16, 10, 9)
	w := b.Weight("w", rt.F32, []int64{16, 8, 3, 3}, rnd(16*8*9))
	bias := b.Weight("b", rt.F32, []int64{16}, rnd(16))
	h := b.Op("Conv", []string{"x", w, bias}, model.Attrs{"pads": []int64{1, 1, 1, 1}})
	b.Node("act", "Relu", []string{h}, []string{"y"}, nil)
	d := b.Op("Sub", []string{"y", "t"}, nil)
	l := b.Op("ReduceSum", []string{b.Op("Mul", []string{d, d}, nil)}, model.Attrs{"keepdims": 0})
	b.Node("loss", "Identity", []string{l}, []string{"loss"}, nil)
	b.Output("loss")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConstantWeights checks which sessions mark their weight buffer
// constant (rt.ConstantBuffer): inference sessions do, training sessions
// (whose optimizer writes the weights) do not, and a training session's
// evaluation after steps sees the trained weights through the CPU
// backend's weight caches.
func TestConstantWeights(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	m := convTrainModel(t)
	rng := rand.New(rand.NewPCG(5, 6))
	in := map[string]*rt.Tensor{}
	for name, shape := range map[string][]int{"x": {1, 8, 10, 9}, "t": {1, 16, 10, 9}} {
		v := make([]float64, shape[1]*shape[2]*shape[3])
		for i := range v {
			v[i] = rng.Float64() - 0.5
		}
		in[name] = rt.FromFloat64(rt.F32, v, shape...)
	}
	ctx := context.Background()
	s, err := engine.New(m, dev, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Run(ctx, in); err != nil {
		t.Fatal(err)
	}
	if !engine.WeightsConstant(s) {
		t.Error("an inference session's weights are not marked constant")
	}
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var losses []float64
	for step := 0; step < 3; step++ {
		out, err := tr.Eval(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.Step(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		// The step's forward pass runs on the weights Eval saw.
		if e, l := out["loss"].Float64(0), r.Loss; math.Abs(e-l) > 1e-4*math.Abs(l) {
			t.Fatalf("step %d: Eval loss %v, step loss %v on the same weights", step, e, l)
		}
		losses = append(losses, r.Loss)
		if engine.WeightsConstant(engine.TrainerSession(tr)) {
			t.Fatal("a training session's weights are marked constant")
		}
	}
	if !(losses[2] < losses[0]) {
		t.Errorf("loss did not decrease: %v", losses)
	}
}
