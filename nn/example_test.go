package nn_test

import (
	"context"
	"fmt"
	"log"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/nn"
	"github.com/vrun-go/vrun/rt"
)

// Build an MLP classifier, train it with SGD on the CPU and read back
// the trained weights.
func Example() {
	g := nn.NewGraph(rt.F32, 1)
	x := g.Input("x", 4, 2)
	y := g.InputOf("y", rt.I64, 4)
	net := nn.NewSequential(nn.NewLinear(2, 16), nn.Tanh{}, nn.NewLinear(16, 2))
	logits := net.Forward(g, x)
	loss := nn.CrossEntropyLoss(g, logits, y, nn.ClassOptions{})
	m, err := g.Model(logits, loss)
	if err != nil {
		log.Fatal(err)
	}
	opts := g.TrainOptions(m, loss)
	opts.Optimizer = &engine.Optimizer{Kind: engine.SGD, LR: 0.5, Momentum: 0.9}
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	// XOR.
	batch := map[string]*rt.Tensor{
		"x": rt.FromFloat32([]float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2),
		"y": rt.FromFloat64(rt.I64, []float64{0, 1, 1, 0}, 4),
	}
	var first, last float64
	for step := range 100 {
		r, err := tr.Step(context.Background(), batch)
		if err != nil {
			log.Fatal(err)
		}
		if step == 0 {
			first = r.Loss
		}
		last = r.Loss
	}
	w, err := tr.Weights()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(opts.Params)
	fmt.Println(w["0.weight"].Shape, last < first/10)
	// Output:
	// [0.weight 0.bias 2.weight 2.bias]
	// [16 2] true
}

// Load weights exported from PyTorch: the parameter names are PyTorch's
// state_dict keys, and recurrent layers keep PyTorch's gate order.
func ExampleGraph_SetParam() {
	g := nn.NewGraph(rt.F32, 1)
	lstm := nn.NewLSTM(3, 2)
	lstm.Name = "rnn"
	lstm.Forward(g, g.Input("x", 5, 1, 3))
	fmt.Println(g.Params())
	w := rt.FromFloat32(make([]float32, 8*3), 8, 3) // state_dict["rnn.weight_ih_l0"]
	if err := g.SetParam("rnn.weight_ih_l0", w); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [rnn.weight_ih_l0 rnn.weight_hh_l0 rnn.bias_ih_l0 rnn.bias_hh_l0]
}

// Nodes added inside NoGrad pass no gradient, as under torch.no_grad():
// a frozen feature extractor.
func ExampleGraph_NoGrad() {
	g := nn.NewGraph(rt.F64, 1)
	x := g.Input("x", 8, 4)
	target := g.Input("t", 8, 1)
	features := &nn.Linear{In: 4, Out: 6, Name: "features"}
	head := &nn.Linear{In: 6, Out: 1, Name: "head"}
	var h nn.Value
	g.NoGrad(func() { h = nn.ReLU{}.Forward(g, features.Forward(g, x)) })
	loss := nn.MSELoss(g, head.Forward(g, h), target, nn.Mean)
	m, err := g.Model(loss)
	if err != nil {
		log.Fatal(err)
	}
	opts := g.TrainOptions(m, loss)
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	in := map[string]*rt.Tensor{
		"x": rt.FromFloat64(rt.F64, fill(32, func(i int) float64 { return float64(i%5) - 2 }), 8, 4),
		"t": rt.FromFloat64(rt.F64, fill(8, func(i int) float64 { return float64(i) }), 8, 1),
	}
	if _, err := tr.Step(context.Background(), in); err != nil {
		log.Fatal(err)
	}
	grads, err := tr.Grads()
	if err != nil {
		log.Fatal(err)
	}
	norm := func(name string) bool {
		for _, v := range grads[name].Float64s() {
			if v != 0 {
				return true
			}
		}
		return false
	}
	fmt.Println(len(opts.NoGrad), norm("features.weight"), norm("head.weight"))
	// Output:
	// 2 false true
}

// Losses follow torch.nn.functional: here cross entropy with class
// weights, an ignored target and label smoothing.
func ExampleCrossEntropyLoss() {
	g := nn.NewGraph(rt.F64, 1)
	logits := g.Input("logits", 3, 4)
	target := g.InputOf("target", rt.I64, 3)
	ignore := 3
	loss := nn.CrossEntropyLoss(g, logits, target, nn.ClassOptions{
		Weight: []float64{1, 2, 1, 1}, IgnoreIndex: &ignore, LabelSmoothing: 0.1})
	m, err := g.Model(loss)
	if err != nil {
		log.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	s, err := engine.New(m, dev, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{
		"logits": rt.FromFloat64(rt.F64, []float64{1, 2, 0, 0, 0, 0, 3, 0, 1, 1, 1, 1}, 3, 4),
		"target": rt.FromFloat64(rt.I64, []float64{1, 2, 3}, 3),
	})
	if err != nil {
		log.Fatal(err)
	}
	// torch.nn.functional.cross_entropy(..., weight=..., ignore_index=3,
	// label_smoothing=0.1) gives 0.506091 too.
	fmt.Printf("%.6f\n", out[loss.Name()].Float64(0))
	// Output:
	// 0.506091
}
