package model

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// Role says what a tensor is in the graph.
type Role uint8

// Tensor roles. The numeric values are part of the model.bin format.
const (
	Intermediate Role = 0 // produced and consumed by nodes
	Input        Role = 1 // fed by the caller at run time
	Output       Role = 2 // returned to the caller
	Weight       Role = 3 // constant data stored in the file
)

func (r Role) String() string {
	switch r {
	case Intermediate:
		return "intermediate"
	case Input:
		return "input"
	case Output:
		return "output"
	case Weight:
		return "weight"
	}
	return fmt.Sprintf("role(%d)", r)
}

// Tensor is one entry of the tensor table.
type Tensor struct {
	Name  string
	DType rt.DType
	// Shape holds the dims; a negative dim is dynamic (bound at run time),
	// named by DimNames[i] when DimNames is non-nil ("batch").
	Shape    []int64
	DimNames []string
	Role     Role
	// Data is the raw little-endian contents of a Weight: len(Data) ==
	// elements * DType.Size(). It may alias a read-only memory map: never
	// write to it.
	Data []byte
}

// AttrKind is the type of a node attribute.
type AttrKind uint8

// Attribute kinds. The numeric values are part of the model.bin format.
const (
	AttrInt     AttrKind = 1
	AttrFloat   AttrKind = 2
	AttrString  AttrKind = 3
	AttrInts    AttrKind = 4
	AttrFloats  AttrKind = 5
	AttrStrings AttrKind = 6
)

// Attr is a named node attribute; the field that Kind names holds its value.
type Attr struct {
	Name    string
	Kind    AttrKind
	Int     int64
	Float   float64
	Str     string
	Ints    []int64
	Floats  []float64
	Strings []string
}

// Node is one operator application. Op names and attribute semantics
// follow ONNX (latest opset; the importer normalises older ones), and are
// listed in docs/ops.md.
type Node struct {
	Name    string
	Op      string
	Attrs   []Attr
	Inputs  []int // tensor indices; -1 marks an absent optional input
	Outputs []int // tensor indices
}

// Attr returns the attribute with the given name.
func (n *Node) Attr(name string) (*Attr, bool) {
	for i := range n.Attrs {
		if n.Attrs[i].Name == name {
			return &n.Attrs[i], true
		}
	}
	return nil, false
}

// Model is a loaded or built model graph. Nodes are stored in a valid
// topological order.
type Model struct {
	// Meta holds metadata key/value pairs in file order ("producer",
	// "description", "labels", ...).
	Meta    [][2]string
	Tensors []Tensor
	Nodes   []Node

	closer func() error // releases a memory map, if any
}

// MetaValue returns the metadata value for key.
func (m *Model) MetaValue(key string) (string, bool) {
	for _, kv := range m.Meta {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

// TensorIndex returns the index of the tensor with the given name, or -1.
func (m *Model) TensorIndex(name string) int {
	for i := range m.Tensors {
		if m.Tensors[i].Name == name {
			return i
		}
	}
	return -1
}

// Inputs returns the indices of the Input tensors, in table order.
func (m *Model) Inputs() []int { return m.byRole(Input) }

// Outputs returns the indices of the Output tensors, in table order.
func (m *Model) Outputs() []int { return m.byRole(Output) }

func (m *Model) byRole(r Role) []int {
	var out []int
	for i := range m.Tensors {
		if m.Tensors[i].Role == r {
			out = append(out, i)
		}
	}
	return out
}

// Close releases the memory map behind the weights, if any. Weight Data
// must not be used afterwards. It is safe to call more than once.
func (m *Model) Close() error {
	if m.closer == nil {
		return nil
	}
	c := m.closer
	m.closer = nil
	return c()
}
