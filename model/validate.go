package model

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/vrun-go/vrun/rt"
)

// positions records the file offsets of table entries, so that semantic
// errors found after parsing can point at the faulty bytes. A nil
// *positions (in-memory validation) yields Offset -1.
type positions struct {
	meta    []int64
	tensors []int64
	nodes   []int64
}

func (p *positions) at(list func(*positions) []int64, i int) int64 {
	if p == nil {
		return -1
	}
	l := list(p)
	if i < 0 || i >= len(l) {
		return -1
	}
	return l[i]
}

func metaPos(p *positions) []int64   { return p.meta }
func tensorPos(p *positions) []int64 { return p.tensors }
func nodePos(p *positions) []int64   { return p.nodes }

// Validate checks that m is a well-formed model: the same rules the loader
// applies to a file (see docs/format.md, "Validation"), so that a model that
// validates can be written and read back. The error is a *FormatError with
// Offset -1.
func (m *Model) Validate() error {
	return validate(m, nil)
}

func checkString(s string, max int, what string) string {
	if len(s) > max {
		return fmt.Sprintf("%s is %d bytes long (limit %d)", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Sprintf("%s %q is not valid UTF-8", what, s)
	}
	return ""
}

func checkName(s, what string) string {
	if s == "" {
		return what + " is empty"
	}
	return checkString(s, MaxNameLen, what)
}

// tensorLabel formats `tensor 3 "conv1.w"`.
func tensorLabel(i int, name string) string { return fmt.Sprintf("tensor %d %q", i, name) }

// nodeLabel formats `node 2 "fc1" (Gemm)`.
func nodeLabel(i int, n *Node) string { return fmt.Sprintf("node %d %q (%s)", i, n.Name, n.Op) }

// elements returns the element count of a static shape, or -1 if a dim is
// dynamic or the product (times elemSize) overflows int64.
func elements(shape []int64, elemSize int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	if elemSize > 0 && n > math.MaxInt64/int64(elemSize) {
		return -1
	}
	return n
}

func validate(m *Model, pos *positions) error {
	if len(m.Meta) > MaxCount || len(m.Tensors) > MaxCount || len(m.Nodes) > MaxCount {
		return ferr(-1, secFile, "more than %d entries in a table", MaxCount)
	}
	keys := make(map[string]int, len(m.Meta))
	for i, kv := range m.Meta {
		off := pos.at(metaPos, i)
		if msg := checkName(kv[0], "key"); msg != "" {
			return ferr(off, secMeta, "entry %d: %s", i, msg)
		}
		if msg := checkString(kv[1], MaxStringLen, "value"); msg != "" {
			return ferr(off, secMeta, "entry %d %q: %s", i, kv[0], msg)
		}
		if j, dup := keys[kv[0]]; dup {
			return ferr(off, secMeta, "entry %d: duplicate key %q (also entry %d)", i, kv[0], j)
		}
		keys[kv[0]] = i
	}

	names := make(map[string]int, len(m.Tensors))
	for i := range m.Tensors {
		t := &m.Tensors[i]
		off := pos.at(tensorPos, i)
		if msg := checkName(t.Name, "name"); msg != "" {
			return ferr(off, secTensors, "tensor %d: %s", i, msg)
		}
		label := func() string { return tensorLabel(i, t.Name) }
		if j, dup := names[t.Name]; dup {
			return ferr(off, secTensors, "%s: duplicate name (also tensor %d)", label(), j)
		}
		names[t.Name] = i
		if msg := validateTensor(t); msg != "" {
			return ferr(off, secTensors, "%s: %s", label(), msg)
		}
	}

	// producer[t] is the index of the node that writes tensor t, or -1.
	producer := make([]int32, len(m.Tensors))
	for i := range producer {
		producer[i] = -1
	}
	nt := len(m.Tensors)
	for i := range m.Nodes {
		n := &m.Nodes[i]
		off := pos.at(nodePos, i)
		if msg := checkString(n.Name, MaxNameLen, "name"); msg != "" {
			return ferr(off, secNodes, "node %d: %s", i, msg)
		}
		if msg := checkName(n.Op, "op"); msg != "" {
			return ferr(off, secNodes, "node %d %q: %s", i, n.Name, msg)
		}
		label := func() string { return nodeLabel(i, n) }
		if msg := validateAttrs(n.Attrs); msg != "" {
			return ferr(off, secNodes, "%s: %s", label(), msg)
		}
		if len(n.Inputs) > MaxCount || len(n.Outputs) > MaxCount {
			return ferr(off, secNodes, "%s: more than %d inputs or outputs", label(), MaxCount)
		}
		for k, ti := range n.Inputs {
			if ti == -1 {
				continue
			}
			if ti < 0 || ti >= nt {
				return ferr(off, secNodes, "%s: input %d is tensor index %d, out of range [0, %d)", label(), k, ti, nt)
			}
			t := &m.Tensors[ti]
			if (t.Role == Intermediate || t.Role == Output) && producer[ti] < 0 {
				return ferr(off, secNodes, "%s: input %d %s is used before it is produced (nodes out of topological order, a cycle, or no producer)", label(), k, tensorLabel(ti, t.Name))
			}
		}
		present := 0
		for k, ti := range n.Outputs {
			if ti == -1 {
				continue
			}
			if ti < 0 || ti >= nt {
				return ferr(off, secNodes, "%s: output %d is tensor index %d, out of range [0, %d)", label(), k, ti, nt)
			}
			present++
			t := &m.Tensors[ti]
			switch t.Role {
			case Input, Weight:
				return ferr(off, secNodes, "%s: output %d writes %s, which is %s", label(), k, tensorLabel(ti, t.Name), roleArticle(t.Role))
			}
			if p := producer[ti]; p >= 0 {
				return ferr(off, secNodes, "%s: output %d %s is already produced by node %d", label(), k, tensorLabel(ti, t.Name), p)
			}
			producer[ti] = int32(i)
		}
		if present == 0 {
			return ferr(off, secNodes, "%s: has no outputs", label())
		}
	}
	for i := range m.Tensors {
		if m.Tensors[i].Role == Output && producer[i] < 0 {
			return ferr(pos.at(tensorPos, i), secTensors, "%s: graph output is not produced by any node", tensorLabel(i, m.Tensors[i].Name))
		}
	}
	return nil
}

// roleArticle returns "an input", "a weight", ...
func roleArticle(r Role) string {
	if r == Weight {
		return "a weight"
	}
	return "an " + r.String()
}

// validateTensor checks one tensor entry apart from its name; it returns a
// message or "".
func validateTensor(t *Tensor) string {
	if t.Role > Weight {
		return fmt.Sprintf("bad role code %d", uint8(t.Role))
	}
	if t.DType != rt.InvalidDType && !t.DType.Valid() {
		return fmt.Sprintf("bad dtype code %d", uint8(t.DType))
	}
	if len(t.Shape) > MaxRank {
		return fmt.Sprintf("rank %d exceeds the limit of %d", len(t.Shape), MaxRank)
	}
	if t.DType == rt.InvalidDType {
		// Unknown type: only for tensors the runtime infers.
		if t.Role == Input || t.Role == Weight {
			return fmt.Sprintf("%s needs a dtype", roleArticle(t.Role))
		}
		if len(t.Shape) != 0 || len(t.DimNames) != 0 {
			return "a tensor of unknown dtype must have no shape"
		}
	}
	for k, d := range t.Shape {
		if d < -1 {
			return fmt.Sprintf("dim %d is %d", k, d)
		}
	}
	if len(t.DimNames) != 0 {
		if len(t.DimNames) != len(t.Shape) {
			return fmt.Sprintf("has %d dim names for rank %d", len(t.DimNames), len(t.Shape))
		}
		for k, s := range t.DimNames {
			if msg := checkString(s, MaxNameLen, "name"); msg != "" {
				return fmt.Sprintf("dim %d %s", k, msg)
			}
		}
	}
	// The product of the static dims must not overflow, whatever the role.
	var static [MaxRank]int64
	ns := 0
	for _, d := range t.Shape {
		if d >= 0 {
			static[ns] = d
			ns++
		}
	}
	if elements(static[:ns], t.DType.Size()) < 0 {
		return fmt.Sprintf("shape %v is too large (byte size overflows int64)", t.Shape)
	}
	if t.Role == Weight {
		n := elements(t.Shape, t.DType.Size())
		if n < 0 {
			return fmt.Sprintf("a weight must have a static shape, has %v", t.Shape)
		}
		if want := n * int64(t.DType.Size()); int64(len(t.Data)) != want {
			return fmt.Sprintf("data is %d bytes, want %d (%d elements of %s)", len(t.Data), want, n, t.DType)
		}
	} else if len(t.Data) != 0 {
		return fmt.Sprintf("%s tensor must not carry data", roleArticle(t.Role))
	}
	return ""
}

// validateAttrs checks a node's attributes; it returns a message or "".
func validateAttrs(attrs []Attr) string {
	if len(attrs) > MaxCount {
		return fmt.Sprintf("has %d attributes (limit %d)", len(attrs), MaxCount)
	}
	var seen map[string]bool
	if len(attrs) > 8 {
		seen = make(map[string]bool, len(attrs))
	}
	for k := range attrs {
		a := &attrs[k]
		if msg := checkName(a.Name, "name"); msg != "" {
			return fmt.Sprintf("attribute %d %s", k, msg)
		}
		dup := false
		if seen != nil {
			dup = seen[a.Name]
			seen[a.Name] = true
		} else {
			for j := range k {
				dup = dup || attrs[j].Name == a.Name
			}
		}
		if dup {
			return fmt.Sprintf("duplicate attribute %q", a.Name)
		}
		var n int
		switch a.Kind {
		case AttrInt, AttrFloat:
		case AttrString:
			if msg := checkString(a.Str, MaxStringLen, "value"); msg != "" {
				return fmt.Sprintf("attribute %q %s", a.Name, msg)
			}
		case AttrInts:
			n = len(a.Ints)
		case AttrFloats:
			n = len(a.Floats)
		case AttrStrings:
			n = len(a.Strings)
			for j, s := range a.Strings {
				if msg := checkString(s, MaxStringLen, "value"); msg != "" {
					return fmt.Sprintf("attribute %q element %d %s", a.Name, j, msg)
				}
			}
		default:
			return fmt.Sprintf("attribute %q has bad kind code %d", a.Name, uint8(a.Kind))
		}
		if n > MaxCount {
			return fmt.Sprintf("attribute %q has %d elements (limit %d)", a.Name, n, MaxCount)
		}
	}
	return ""
}
