package model_test

import (
	"bytes"
	"fmt"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// ExampleBuilder builds a one-layer model, writes it in the model.bin
// format to a buffer and decodes it again.
func ExampleBuilder() {
	b := model.NewBuilder()
	b.Meta("description", "linear layer")
	x := b.Input("x", rt.F32, -1, 3) // dynamic batch dim
	b.DimNames(x, "batch", "")
	w := b.Weight("fc.w", rt.F32, []int64{2, 3}, []float32{1, 0, 0, 0, 1, 0})
	bias := b.Weight("fc.b", rt.F32, []int64{2}, []float32{0.5, -0.5})
	y := b.Op("Gemm", []string{x, w, bias}, model.Attrs{"transB": 1, "alpha": 1.0})
	b.SetType(y, rt.F32, -1, 2) // optional: otherwise inferred at load
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		fmt.Println(err)
		return
	}
	m2, err := model.Decode(buf.Bytes())
	if err != nil {
		fmt.Println(err)
		return
	}
	desc, _ := m2.MetaValue("description")
	fmt.Println(desc, "-", buf.Len(), "bytes")
	for _, t := range m2.Tensors {
		fmt.Printf("%-7s %-12s %s%v %d data bytes\n", t.Name, t.Role, t.DType, t.Shape, len(t.Data))
	}
	for _, n := range m2.Nodes {
		fmt.Println(n.Name, n.Op, n.Inputs, "->", n.Outputs, len(n.Attrs), "attrs")
	}
	// Output:
	// linear layer - 456 bytes
	// x       input        f32[-1 3] 0 data bytes
	// fc.w    weight       f32[2 3] 24 data bytes
	// fc.b    weight       f32[2] 8 data bytes
	// Gemm_0  output       f32[-1 2] 0 data bytes
	// Gemm_0 Gemm [0 1 2] -> [3] 2 attrs
}
