package export_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/internal/onnxrt"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/rt"
)

// classifier is a training graph: x [batch, 6] → Gemm → BatchNorm → Relu
// → Dropout → MatMul = logits; loss = mean cross-entropy against one-hot
// t. Outputs: loss and logits.
func classifier(t testing.TB) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	b := model.NewBuilder()
	b.Input("x", rt.F32, -1, 6)
	b.DimNames("x", "batch", "")
	b.Input("t", rt.F32, -1, 3)
	b.DimNames("t", "batch", "")
	weight := func(name string, shape []int64, v []float64) string {
		return b.Weight(name, rt.F32, shape, rt.FromFloat64(rt.F32, v, len(v)).Data)
	}
	w := func(name string, shape ...int64) string {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.5
		}
		return weight(name, shape, v)
	}
	ones := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	h := b.Op("Gemm", []string{"x", w("w1", 10, 6), w("b1", 10)}, model.Attrs{"transB": 1})
	h = b.Op("BatchNormalization", []string{h, w("g", 10), w("beta", 10), weight("rm", []int64{10}, make([]float64, 10)), weight("rv", []int64{10}, ones)}, nil)
	h = b.Op("Relu", []string{h}, nil)
	h = b.Op("Dropout", []string{h, weight("ratio", []int64{}, []float64{0.3})}, nil)
	b.Node("fc2", "MatMul", []string{h, w("w2", 10, 3)}, []string{"logits"}, nil)
	ls := b.Op("LogSoftmax", []string{"logits"}, model.Attrs{"axis": 1})
	b.Node("loss", "Neg", []string{b.Op("ReduceMean", []string{b.Op("Mul", []string{ls, "t"}, nil)}, model.Attrs{"keepdims": 0})}, []string{"loss"}, nil)
	b.Output("loss", "logits")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func batch(rng *rand.Rand, n int) map[string]*rt.Tensor {
	x := make([]float64, n*6)
	y := make([]float64, n*3)
	for i := range n {
		c := rng.IntN(3)
		y[i*3+c] = 1
		for k := range 6 {
			x[i*6+k] = rng.NormFloat64() + float64(c*(k%2))
		}
	}
	return map[string]*rt.Tensor{"x": rt.FromFloat64(rt.F32, x, n, 6), "t": rt.FromFloat64(rt.F32, y, n, 3)}
}

// trained trains the classifier for 30 Adam steps.
func trained(t *testing.T) (*engine.Trainer, *model.Model) {
	m := classifier(t)
	dev := cpu.NewDevice()
	t.Cleanup(func() { dev.Close() })
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Params: []string{"w1", "b1", "g", "beta", "w2"},
		Shapes: map[string][]int{"x": {16, 6}, "t": {16, 3}}, Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.05}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	rng := rand.New(rand.NewPCG(1, 1))
	var first, last float64
	for i := range 30 {
		r, err := tr.Step(context.Background(), batch(rng, 16))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Loss
		}
		last = r.Loss
	}
	if !(last < first) {
		t.Fatalf("loss %v → %v: not training", first, last)
	}
	return tr, m
}

func close(t *testing.T, what string, got, want *rt.Tensor, rtol float64) {
	t.Helper()
	if got == nil || got.DType != want.DType || len(got.Shape) != len(want.Shape) || got.Len() != want.Len() {
		t.Fatalf("%s: got %v, want %s%v", what, got, want.DType, want.Shape)
	}
	for i := range want.Len() {
		if g, w := got.Float64(i), want.Float64(i); math.Abs(g-w) > rtol*math.Max(1, math.Abs(w)) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g, w)
		}
	}
}

// TestModelBin writes the trained network as model.bin, pruned to its
// logits, loads it and runs it with the inference engine: the outputs
// match Trainer.Eval's, for another batch size than training's.
func TestModelBin(t *testing.T) {
	tr, m := trained(t)
	inf, err := export.Trained(tr, m, "logits")
	if err != nil {
		t.Fatal(err)
	}
	if len(inf.Inputs()) != 1 || len(inf.Outputs()) != 1 {
		t.Fatalf("pruned model has %d inputs and %d outputs", len(inf.Inputs()), len(inf.Outputs()))
	}
	p := filepath.Join(t.TempDir(), "model.bin")
	if err := model.WriteFile(p, inf); err != nil {
		t.Fatal(err)
	}
	loaded, err := model.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	in := batch(rand.New(rand.NewPCG(2, 2)), 5)
	want, err := tr.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	s, err := engine.New(loaded, dev, engine.Options{Shapes: map[string][]int{"x": {5, 6}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": in["x"]})
	if err != nil {
		t.Fatal(err)
	}
	close(t, "logits", got["logits"], want["logits"], 1e-6)
	// The trained weights, not the initial ones: the initial model differs.
	s0, _ := engine.New(m, dev, engine.Options{Shapes: map[string][]int{"x": {5, 6}, "t": {5, 3}}})
	defer s0.Close()
	init, _ := s0.Run(context.Background(), in)
	if math.Abs(init["logits"].Float64(0)-want["logits"].Float64(0)) < 1e-6 {
		t.Error("the exported model computes what the untrained one does")
	}
}

func TestOutputTypes(t *testing.T) {
	m := classifier(t)
	vt, err := export.OutputTypes(m)
	if err != nil {
		t.Fatal(err)
	}
	if l := vt["logits"]; l.DType != rt.F32 || len(l.Shape) != 2 || l.Shape[0] != -1 || l.Shape[1] != 3 || l.DimNames[0] != "batch" {
		t.Errorf("logits: %+v", l)
	}
	if l := vt["loss"]; l.DType != rt.F32 || len(l.Shape) != 0 {
		t.Errorf("loss: %+v", l)
	}
}

// TestONNX writes the trained network as ONNX opset 17 and checks it
// with our importer, the ONNX checker and onnxruntime (the last two when
// installed): the same logits as Trainer.Eval.
func TestONNX(t *testing.T) {
	tr, m := trained(t)
	inf, err := export.Trained(tr, m, "logits")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "model.onnx")
	if err := export.ONNX(p, inf); err != nil {
		t.Fatal(err)
	}
	in := batch(rand.New(rand.NewPCG(3, 3)), 7)
	want, err := tr.Eval(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	x := map[string]*rt.Tensor{"x": in["x"]}

	imp, err := onnx.ImportFile(p, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	s, err := engine.New(imp, dev, engine.Options{Shapes: map[string][]int{"x": {7, 6}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Run(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	close(t, "re-imported logits", got["logits"], want["logits"], 1e-6)

	t.Run("checker", func(t *testing.T) {
		t.Log(onnxrt.Check(t, onnx.ExportOpset, onnx.ExportIRVersion, p))
	})
	t.Run("onnxruntime", func(t *testing.T) {
		got := onnxrt.Run(t, p, x)
		close(t, "onnxruntime logits", got["logits"], want["logits"], 1e-5)
	})
}

// TestONNXNoPartialFile: a model that cannot be exported leaves no file.
func TestONNXNoPartialFile(t *testing.T) {
	b := model.NewBuilder()
	b.Input("x", rt.F32, 2, 4, 3)
	b.Node("gn", "GroupNormalization", []string{"x", b.Weight("s", rt.F32, []int64{4}, []float32{1, 1, 1, 1}),
		b.Weight("bb", rt.F32, []int64{4}, []float32{0, 0, 0, 0})}, []string{"y"}, model.Attrs{"num_groups": 2})
	b.Output("y")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = export.ONNX(filepath.Join(dir, "m.onnx"), m)
	if err == nil || !strings.Contains(err.Error(), "GroupNormalization is not in opset 17") {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left behind", len(ents))
	}
	if err := export.ONNX(filepath.Join(dir, "missing", "m.onnx"), classifier(t)); err == nil {
		t.Error("written into a missing folder")
	}
}
