package vrun_test

import (
	"context"
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
