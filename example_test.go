package vrun_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Build a tiny model in code, plan it on the CPU and run it.
func Example() {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1, 3)
	w := b.Weight("w", rt.F32, []int64{3, 2}, []float32{1, 0, 0, 1, 1, 1})
	y := b.Op("Relu", []string{b.Op("MatMul", []string{x, w}, nil)}, nil)
	b.Output(y)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	m, err := vrun.New(g, vrun.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	out, err := m.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32([]float32{1, -2, 3}, 1, 3)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out[y].Shape, out[y].Float32s())
	// Output: [1 2] [4 1]
}

// A model with a dynamic batch loads without shapes (dynamic dims plan as
// 1, or as Options.Dims names them); Inputs and Outputs describe it, and
// Run takes any batch.
func ExampleModel_Outputs() {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 3)
	b.DimNames(x, "batch", "")
	w := b.Weight("w", rt.F32, []int64{3, 2}, []float32{1, 0, 0, 1, 1, 1})
	b.Node("mm", "MatMul", []string{x, w}, []string{"y"}, nil)
	b.Output("y")
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	m, err := vrun.New(g, vrun.Options{Device: "cpu", Dims: map[string]int{"batch": 2}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, t := range m.Inputs() {
		fmt.Println("input ", t.Name, t.DType, t.Shape, t.DimNames)
	}
	for _, t := range m.Outputs() {
		fmt.Println("output", t.Name, t.DType, t.Shape, t.DimNames)
	}
	out, err := m.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)})
	if err != nil {
		log.Fatal(err)
	}
	y, err := rt.As[float32](out["y"])
	fmt.Println(out["y"].Shape, y, err)
	// Output:
	// input  x f32 [-1 3] [batch ]
	// output y f32 [-1 2] [batch ]
	// [2 2] [4 5 10 11] <nil>
}

// Input errors match errors.Is (ErrShape, ErrDType, ErrMissingInput,
// ErrUnknownInput) and errors.As (*InputError, which names the input).
func ExampleInputError() {
	b := model.NewBuilder()
	b.Output(b.Op("Relu", []string{b.Input("x", rt.F32, -1, 3)}, nil))
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	m, err := vrun.New(g, vrun.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	_, err = m.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromSlice([]int64{1, 2, 3}, 1, 3)})
	var ie *vrun.InputError
	fmt.Println(errors.Is(err, vrun.ErrDType), errors.As(err, &ie) && ie.Input == "x")
	fmt.Println(err)
	_, err = m.Run(context.Background(), map[string]*rt.Tensor{})
	fmt.Println(errors.Is(err, vrun.ErrMissingInput))
	// Output:
	// true true
	// engine: input "x" has dtype i64, model wants f32
	// true
}

// Chain two runs through device memory: ToDevice uploads once, RunDevice
// takes and returns device tensors (the second run reads the first's
// output where it lies), ToHost downloads the result. Each device tensor
// is the caller's to Free; the model's pool keeps the memory for reuse.
func ExampleModel_RunDevice() {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1, 3)
	w := b.Weight("w", rt.F32, []int64{3, 3}, []float32{1, 0, 0, 0, 2, 0, 0, 0, 3})
	b.Node("mm", "MatMul", []string{x, w}, []string{"y"}, nil)
	b.Output("y")
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	m, err := vrun.New(g, vrun.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	dx, err := m.ToDevice(rt.FromFloat32([]float32{1, 1, 1}, 1, 3))
	if err != nil {
		log.Fatal(err)
	}
	defer dx.Free()
	first, err := m.RunDevice(ctx, map[string]*vrun.DeviceTensor{"x": dx})
	if err != nil {
		log.Fatal(err)
	}
	defer first["y"].Free()
	second, err := m.RunDevice(ctx, map[string]*vrun.DeviceTensor{"x": first["y"]})
	if err != nil {
		log.Fatal(err)
	}
	defer second["y"].Free()
	y, err := vrun.ToHost(second["y"])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(y.Float32s())
	st := m.Pool().Stats()
	fmt.Println(st.Blocks, "device tensors in use")
	// Output:
	// [1 4 9]
	// 3 device tensors in use
}
