package model

import (
	"fmt"
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// WithWeights returns a copy of m whose weights named in w hold w's
// values (a trained network's parameters, say); the other tensors share
// m's data. Each value must have its weight's dtype and shape.
func (m *Model) WithWeights(w map[string]*rt.Tensor) (*Model, error) {
	out := m.clone()
	for name, v := range w {
		i := out.TensorIndex(name)
		if i < 0 || out.Tensors[i].Role != Weight {
			return nil, fmt.Errorf("model: WithWeights: %q is not a weight", name)
		}
		t := &out.Tensors[i]
		if err := v.Check(); err != nil {
			return nil, fmt.Errorf("model: WithWeights: %q: %w", name, err)
		}
		if v.DType != t.DType || len(v.Shape) != len(t.Shape) {
			return nil, fmt.Errorf("model: WithWeights: %q is %s%v, the weight is %s%v", name, v.DType, v.Shape, t.DType, t.Shape)
		}
		for k, d := range v.Shape {
			if int64(d) != t.Shape[k] {
				return nil, fmt.Errorf("model: WithWeights: %q is %s%v, the weight is %s%v", name, v.DType, v.Shape, t.DType, t.Shape)
			}
		}
		t.Data = slices.Clone(v.Data)
	}
	return out, nil
}

// clone copies the tables of m (not the weight data, which is read-only).
func (m *Model) clone() *Model {
	out := &Model{Meta: slices.Clone(m.Meta), Tensors: slices.Clone(m.Tensors), Nodes: slices.Clone(m.Nodes)}
	for i := range out.Tensors {
		t := &out.Tensors[i]
		t.Shape, t.DimNames = slices.Clone(t.Shape), slices.Clone(t.DimNames)
	}
	for i := range out.Nodes {
		n := &out.Nodes[i]
		n.Inputs, n.Outputs = slices.Clone(n.Inputs), slices.Clone(n.Outputs)
		n.Attrs = slices.Clone(n.Attrs)
		for k := range n.Attrs {
			a := &n.Attrs[k]
			a.Ints, a.Floats, a.Strings = slices.Clone(a.Ints), slices.Clone(a.Floats), slices.Clone(a.Strings)
		}
	}
	return out
}

// Prune returns a copy of m that computes only the named outputs (a
// training graph's predictions without its loss, say): the nodes they
// need, and the inputs and weights those read. The named tensors become
// the outputs, in the order given; each must be a node's output.
func (m *Model) Prune(outputs ...string) (*Model, error) {
	if len(outputs) == 0 {
		return nil, fmt.Errorf("model: Prune: no outputs")
	}
	want := make([]int, len(outputs))
	for k, name := range outputs {
		i := m.TensorIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("model: Prune: no tensor %q", name)
		}
		if r := m.Tensors[i].Role; r == Input || r == Weight {
			return nil, fmt.Errorf("model: Prune: %q is %s, not computed by a node", name, roleArticle(r))
		}
		if slices.Contains(want[:k], i) {
			return nil, fmt.Errorf("model: Prune: output %q named twice", name)
		}
		want[k] = i
	}
	producer := map[int]int{}
	for ni, n := range m.Nodes {
		for _, o := range n.Outputs {
			if o >= 0 {
				producer[o] = ni
			}
		}
	}
	needT := map[int]bool{}
	needN := make([]bool, len(m.Nodes))
	stack := slices.Clone(want)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if needT[i] {
			continue
		}
		needT[i] = true
		ni, ok := producer[i]
		if !ok || needN[ni] {
			continue
		}
		needN[ni] = true
		for _, j := range m.Nodes[ni].Inputs {
			if j >= 0 {
				stack = append(stack, j)
			}
		}
		for _, j := range m.Nodes[ni].Outputs {
			if j >= 0 {
				needT[j] = true
			}
		}
	}
	src := m.clone()
	out := &Model{Meta: src.Meta}
	isOut := map[int]bool{}
	for _, i := range want {
		isOut[i] = true
	}
	index := map[int]int{}
	// Inputs first, then the outputs in the order given, then the rest.
	add := func(i int) {
		if _, done := index[i]; done {
			return
		}
		t := src.Tensors[i]
		switch {
		case isOut[i]:
			t.Role = Output
		case t.Role == Output:
			t.Role = Intermediate
		}
		index[i] = len(out.Tensors)
		out.Tensors = append(out.Tensors, t)
	}
	for i, t := range src.Tensors {
		if t.Role == Input && needT[i] {
			add(i)
		}
	}
	for _, i := range want {
		add(i)
	}
	for i := range src.Tensors {
		if needT[i] {
			add(i)
		}
	}
	for ni, n := range src.Nodes {
		if !needN[ni] {
			continue
		}
		for k, j := range n.Inputs {
			if j >= 0 {
				n.Inputs[k] = index[j]
			}
		}
		for k, j := range n.Outputs {
			if j >= 0 {
				n.Outputs[k] = index[j]
			}
		}
		out.Nodes = append(out.Nodes, n)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("model: Prune: %w", err)
	}
	return out, nil
}
