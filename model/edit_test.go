package model

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func TestWithWeights(t *testing.T) {
	m := mlpModel(t)
	orig := slices.Clone(m.Tensors[m.TensorIndex("fc1.b")].Data)
	nb := rt.FromFloat32([]float32{9, 8, 7, 6}, 4)
	m2, err := m.WithWeights(map[string]*rt.Tensor{"fc1.b": nb})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m2.Tensors[m2.TensorIndex("fc1.b")].Data, nb.Data) {
		t.Error("weight not replaced")
	}
	if !bytes.Equal(m.Tensors[m.TensorIndex("fc1.b")].Data, orig) {
		t.Error("the original model changed")
	}
	// The copy is independent: editing its tables leaves m alone.
	m2.Nodes[0].Inputs[0] = 99
	m2.Tensors[0].Shape[1] = 99
	if m.Nodes[0].Inputs[0] == 99 || m.Tensors[0].Shape[1] == 99 {
		t.Error("the copy shares tables with the original")
	}
	for _, tc := range []struct {
		w    map[string]*rt.Tensor
		want string
	}{
		{map[string]*rt.Tensor{"x": nb}, "not a weight"},
		{map[string]*rt.Tensor{"nope": nb}, "not a weight"},
		{map[string]*rt.Tensor{"fc1.b": rt.FromFloat32([]float32{1, 2, 3}, 3)}, "the weight is f32[4]"},
		{map[string]*rt.Tensor{"fc1.b": rt.FromFloat64(rt.F64, []float64{1, 2, 3, 4}, 4)}, "is f64[4]"},
		{map[string]*rt.Tensor{"fc1.b": {DType: rt.F32, Shape: []int{4}, Data: []byte{1}}}, "data bytes"},
	} {
		if _, err := m.WithWeights(tc.w); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

func TestPrune(t *testing.T) {
	b := NewBuilder()
	b.Input("x", rt.F32, 2, 3)
	b.Input("target", rt.F32, 2, 4)
	b.Input("unused", rt.F32, 1)
	w := b.Weight("w", rt.F32, []int64{3, 4}, seqF32(12))
	b.Weight("lonely", rt.F32, []int64{1}, seqF32(1))
	parts := b.OpN("Split", []string{b.Op("MatMul", []string{"x", w}, nil)}, 2, Attrs{"axis": 1, "num_outputs": 2})
	b.Node("cat", "Concat", []string{parts[1], parts[0]}, []string{"logits"}, Attrs{"axis": 1})
	d := b.Op("Sub", []string{"logits", "target"}, nil)
	b.Node("loss", "ReduceSum", []string{b.Op("Mul", []string{d, d}, nil)}, []string{"loss"}, Attrs{"keepdims": 0})
	b.Output("loss", "logits")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Prune("logits")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tt := range p.Tensors {
		names = append(names, tt.Name+":"+tt.Role.String())
	}
	if got := strings.Join(names, " "); !strings.HasPrefix(got, "x:input logits:output ") || strings.Contains(got, "target") ||
		strings.Contains(got, "unused") || strings.Contains(got, "lonely") || strings.Contains(got, "loss") {
		t.Errorf("tensors %s", got)
	}
	var ops []string
	for _, n := range p.Nodes {
		ops = append(ops, n.Op)
	}
	if strings.Join(ops, ",") != "MatMul,Split,Concat" {
		t.Errorf("nodes %v", ops)
	}
	// The loss and the logits, in that order.
	if p2, err := m.Prune("loss", "logits"); err != nil || len(p2.Outputs()) != 2 || p2.Tensors[p2.Outputs()[0]].Name != "loss" || len(p2.Nodes) != len(m.Nodes) {
		t.Errorf("pruning to every output: %v", err)
	}
	for _, tc := range []struct {
		out  []string
		want string
	}{
		{nil, "no outputs"},
		{[]string{"x"}, "is an input"},
		{[]string{"w"}, "is a weight"},
		{[]string{"nope"}, "no tensor"},
		{[]string{"logits", "logits"}, "named twice"},
	} {
		if _, err := m.Prune(tc.out...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Prune(%q): err = %v, want %q", tc.out, err, tc.want)
		}
	}
}
