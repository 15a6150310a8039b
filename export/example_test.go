package export_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Train a linear model, then write it for inference without its loss:
// model.bin for vrun, ONNX for other runtimes.
func Example() {
	b := model.NewBuilder()
	b.Input("x", rt.F32, -1, 2)
	b.DimNames("x", "batch", "")
	b.Input("y", rt.F32, -1, 1)
	b.DimNames("y", "batch", "")
	w := b.Weight("w", rt.F32, []int64{2, 1}, []float32{0, 0})
	b.Node("predict", "MatMul", []string{"x", w}, []string{"pred"}, nil)
	d := b.Op("Sub", []string{"pred", "y"}, nil)
	b.Node("mse", "ReduceMean", []string{b.Op("Mul", []string{d, d}, nil)}, []string{"loss"}, map[string]any{"keepdims": 0})
	b.Output("loss", "pred")
	m, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	tr, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: "loss", Shapes: map[string][]int{"x": {4, 2}, "y": {4, 1}},
		Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.1}})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	batch := map[string]*rt.Tensor{ // y = 2·x0 - x1
		"x": rt.FromFloat32([]float32{1, 0, 0, 1, 1, 1, 2, 1}, 4, 2),
		"y": rt.FromFloat32([]float32{2, -1, 1, 3}, 4, 1),
	}
	for range 200 {
		if _, err := tr.Step(context.Background(), batch); err != nil {
			log.Fatal(err)
		}
	}

	inf, err := export.Trained(tr, m, "pred") // trained weights, no loss, no y
	if err != nil {
		log.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "export")
	defer os.RemoveAll(dir)
	if err := model.WriteFile(filepath.Join(dir, "model.bin"), inf); err != nil {
		log.Fatal(err)
	}
	if err := export.ONNX(filepath.Join(dir, "model.onnx"), inf); err != nil {
		log.Fatal(err)
	}
	for _, i := range inf.Inputs() {
		fmt.Println("input", inf.Tensors[i].Name, inf.Tensors[i].Shape)
	}
	wt := inf.Tensors[inf.TensorIndex("w")]
	v := (&rt.Tensor{DType: wt.DType, Shape: []int{2, 1}, Data: wt.Data}).Float32s()
	fmt.Printf("w = [%.2f %.2f]\n", v[0], v[1])
	// Output:
	// input x [-1 2]
	// w = [2.00 -1.00]
}
