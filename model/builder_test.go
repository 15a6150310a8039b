package model

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func TestBuilderNames(t *testing.T) {
	b := NewBuilder()
	x := b.Input("x", rt.F32, 4)
	if x != "x" {
		t.Fatalf("Input returned %q", x)
	}
	b.Input("Relu_1", rt.F32, 4) // clashes with a generated node name
	r := b.Op("Relu", []string{x}, nil)
	r2 := b.Op("Relu", []string{r}, nil)
	parts := b.OpN("Split", []string{r2}, 2, Attrs{"axis": 0})
	c := b.Op("Concat", []string{parts[1], "", parts[0]}, Attrs{"axis": int64(0)})
	b.Output(c, parts[0])
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if r != "Relu_0" || r2 != "Relu_2" || parts[0] != "Split_3:0" || parts[1] != "Split_3:1" || c != "Concat_4" {
		t.Errorf("names %q %q %q %q", r, r2, parts, c)
	}
	if got := m.Outputs(); len(got) != 2 || m.Tensors[got[0]].Name != "Split_3:0" || m.Tensors[got[1]].Name != "Concat_4" {
		t.Errorf("outputs %v", got)
	}
	n := m.Nodes[3]
	if n.Name != "Concat_4" || n.Inputs[1] != -1 || len(n.Inputs) != 3 {
		t.Errorf("concat node %+v", n)
	}
	// The built model is independent of the builder.
	b.Meta("later", "x")
	b.Op("Relu", []string{c}, nil)
	if len(m.Nodes) != 4 || len(m.Meta) != 0 {
		t.Error("Build result changed by later builder calls")
	}
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderMeta(t *testing.T) {
	b := NewBuilder()
	b.Meta("a", "1")
	b.Meta("b", "2")
	b.Meta("a", "3")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Meta) != 2 || m.Meta[0] != [2]string{"a", "3"} {
		t.Errorf("meta %q", m.Meta)
	}
}

func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"unknown input", func(b *Builder) { b.Op("Relu", []string{"nope"}, nil) }, `unknown input tensor "nope"`},
		{"duplicate", func(b *Builder) { b.Input("x", rt.F32); b.Input("x", rt.F32) }, `tensor name "x" used twice`},
		{"empty name", func(b *Builder) { b.Input("", rt.F32) }, "empty tensor name"},
		{"attr type", func(b *Builder) {
			b.Op("Relu", []string{b.Input("x", rt.F32)}, Attrs{"m": map[int]int{}})
		}, `attribute "m": unsupported value type map[int]int`},
		{"weight type", func(b *Builder) { b.Weight("w", rt.I32, []int64{1}, []float32{1}) }, `weight "w": []float32 data does not fit dtype i32`},
		{"weight length", func(b *Builder) { b.Weight("w", rt.F32, []int64{3}, []float32{1}) }, `data is 4 bytes, want 12`},
		{"output of input", func(b *Builder) { b.Output(b.Input("x", rt.F32)) }, `Output: tensor "x" is an input`},
		{"unknown output", func(b *Builder) { b.Output("y") }, `Output: unknown tensor "y"`},
		{"zero outputs", func(b *Builder) { b.OpN("Split", []string{b.Input("x", rt.F32)}, 0, nil) }, "Split: 0 outputs"},
		{"settype weight", func(b *Builder) { b.SetType(b.Weight("w", rt.U8, nil, []byte{1}), rt.F32) }, `SetType: tensor "w" is a weight`},
		{"bad dim", func(b *Builder) { b.Input("x", rt.F32, -2) }, `tensor 0 "x": dim 0 is -2`},
		{"dim names", func(b *Builder) { b.DimNames(b.Input("x", rt.F32, 1, 2), "n") }, "has 1 dim names for rank 2"},
		{"rank", func(b *Builder) { b.Input("x", rt.F32, 1, 1, 1, 1, 1, 1, 1, 1, 1) }, "rank 9 exceeds the limit of 8"},
		{"dtype", func(b *Builder) { b.Input("x", rt.DType(42)) }, "bad dtype code 42"},
		{"duplicate output", func(b *Builder) {
			x := b.Input("x", rt.F32)
			b.Node("n", "Split", []string{x}, []string{"a", "a"}, nil)
		}, `output tensor name "a" used twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder()
			c.build(b)
			m, err := b.Build()
			if err == nil || m != nil {
				t.Fatalf("Build succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
	// Validation errors are FormatErrors without an offset.
	b := NewBuilder()
	b.Input("x", rt.F32, -2)
	_, err := b.Build()
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Offset != -1 || fe.Section != "tensor table" {
		t.Fatalf("%#v", err)
	}
}

func TestBuilderWeightConversions(t *testing.T) {
	b := NewBuilder()
	b.Weight("f16", rt.F16, []int64{2}, []float32{1, -2})
	b.Weight("raw", rt.F32, []int64{1}, []byte{0, 0, 0x80, 0x3f})
	b.Weight("nil", rt.F32, []int64{0}, nil)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Tensors[0].Data; rt.F16Float(le.Uint16(d)) != 1 || rt.F16Float(le.Uint16(d[2:])) != -2 {
		t.Errorf("f16 data % x", d)
	}
	if d := m.Tensors[1].Data; d[3] != 0x3f {
		t.Errorf("raw data % x", d)
	}
}

func TestZeroBuilder(t *testing.T) {
	var b Builder
	x := b.Input("x", rt.F32, 1)
	b.Output(b.Op("Relu", []string{x}, nil))
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
}
