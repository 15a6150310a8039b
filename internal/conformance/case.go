package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Kind says how an operand of a case is fed to the model.
type Kind string

// Operand kinds.
const (
	KindInput  Kind = "input"  // a graph input, fed at run time
	KindWeight Kind = "weight" // a constant stored in the model
	KindAbsent Kind = "absent" // an omitted optional input
)

// Case is one entry of the conformance table: a single node and its
// expected outputs.
type Case struct {
	Name   string
	Op     string // ONNX op name, or a vrun extension when Domain is "vrun"
	Domain string // "" for ONNX, "vrun" for vrun's own ops
	DType  rt.DType
	Attrs  []Attr
	// Inputs are the node's inputs in order; Outputs its outputs, with
	// Tensor holding the expected values.
	Inputs  []Operand
	Outputs []Operand
	Tol     Tolerance
	Note    string
	Dir     string // the case's directory
	// Grads lists the inputs that have an expected gradient (grad_<i>.npy
	// beside case.json). Only the gradient table (testdata/grad, see
	// internal/gradconf) sets it; conformance cases leave it empty.
	Grads []int
}

// Attr is a typed node attribute. Value is int64, float64, string,
// []int64, []float64 or []string for Type "int", "float", "string",
// "ints", "floats", "strings".
type Attr struct {
	Name  string
	Type  string
	Value any
}

// Operand is one input or output of a case.
type Operand struct {
	Name   string
	Kind   Kind // inputs only; "" for outputs
	DType  rt.DType
	Shape  []int
	Tensor *rt.Tensor // nil when Kind is KindAbsent
}

// Tolerance is the accepted error: |got-want| <= ATol + RTol*|want|.
type Tolerance struct {
	RTol, ATol float64
	Class      string // "exact", "elem", "reduce" or "matmul" (see gen.py)
}

// Allowed returns the accepted absolute error for an expected value.
func (t Tolerance) Allowed(want float64) float64 {
	if want < 0 {
		want = -want
	}
	return t.ATol + t.RTol*want
}

type jsonCase struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Op      string `json:"op"`
	Domain  string `json:"domain"`
	DType   string `json:"dtype"`
	Attrs   []struct {
		Name  string          `json:"name"`
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"attrs"`
	Inputs    []jsonOperand `json:"inputs"`
	Outputs   []jsonOperand `json:"outputs"`
	Tolerance *struct {
		RTol  *float64 `json:"rtol"`
		ATol  *float64 `json:"atol"`
		Class string   `json:"class"`
	} `json:"tolerance"`
	Note  string `json:"note"`
	Grads []int  `json:"grads"`
}

type jsonOperand struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	File  string `json:"file"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// DefaultDir returns the directory of the conformance cases in this
// checkout: $VRUN_CONFORMANCE_DIR if set, else testdata/conformance/cases
// at the repository root, found from this source file's location or, failing
// that (a -trimpath build), by walking up from the working directory to the
// directory holding go.mod.
func DefaultDir() (string, error) {
	if d := os.Getenv("VRUN_CONFORMANCE_DIR"); d != "" {
		return d, nil
	}
	return repo.Path("testdata/conformance/cases")
}

// Cases loads every case under dir (one subdirectory per case), sorted by
// name, with all tensors read.
func Cases(dir string) ([]Case, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var out []Case
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		c, err := LoadCase(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("conformance: no cases in %s", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// LoadCase loads the case in directory dir.
func LoadCase(dir string) (*Case, error) {
	c, err := loadCase(dir)
	if err != nil {
		return nil, fmt.Errorf("conformance: case %s: %w", filepath.Base(dir), err)
	}
	return c, nil
}

func loadCase(dir string) (*Case, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		return nil, err
	}
	var j jsonCase
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("case.json: %w", err)
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("case.json version %d, want 1", j.Version)
	}
	if j.Name != filepath.Base(dir) {
		return nil, fmt.Errorf("case.json names %q, directory is %q", j.Name, filepath.Base(dir))
	}
	if j.Op == "" {
		return nil, errors.New("no op")
	}
	if j.Domain != "" && j.Domain != "vrun" {
		return nil, fmt.Errorf("unknown domain %q", j.Domain)
	}
	c := &Case{Name: j.Name, Op: j.Op, Domain: j.Domain, Note: j.Note, Dir: dir}
	if c.DType, err = rt.ParseDType(j.DType); err != nil {
		return nil, err
	}
	if j.Tolerance == nil || j.Tolerance.RTol == nil || j.Tolerance.ATol == nil {
		return nil, errors.New("tolerance must state rtol and atol")
	}
	c.Tol = Tolerance{RTol: *j.Tolerance.RTol, ATol: *j.Tolerance.ATol, Class: j.Tolerance.Class}
	if c.Tol.RTol < 0 || c.Tol.ATol < 0 {
		return nil, fmt.Errorf("negative tolerance %+v", c.Tol)
	}
	for _, a := range j.Attrs {
		v, err := attrValue(a.Type, a.Value)
		if err != nil {
			return nil, fmt.Errorf("attr %q: %w", a.Name, err)
		}
		if slices.ContainsFunc(c.Attrs, func(x Attr) bool { return x.Name == a.Name }) {
			return nil, fmt.Errorf("attr %q given twice", a.Name)
		}
		c.Attrs = append(c.Attrs, Attr{Name: a.Name, Type: a.Type, Value: v})
	}
	seen := map[string]bool{}
	for i, in := range j.Inputs {
		op, err := loadOperand(dir, in, true)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if op.Kind != KindAbsent {
			if seen[op.Name] {
				return nil, fmt.Errorf("operand name %q used twice", op.Name)
			}
			seen[op.Name] = true
		}
		c.Inputs = append(c.Inputs, op)
	}
	if len(j.Outputs) == 0 {
		return nil, errors.New("no outputs")
	}
	for i, o := range j.Outputs {
		op, err := loadOperand(dir, o, false)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		if seen[op.Name] {
			return nil, fmt.Errorf("operand name %q used twice", op.Name)
		}
		seen[op.Name] = true
		c.Outputs = append(c.Outputs, op)
	}
	for _, i := range j.Grads {
		if i < 0 || i >= len(c.Inputs) || c.Inputs[i].Kind == KindAbsent || !c.Inputs[i].DType.IsFloat() {
			return nil, fmt.Errorf("grads lists input %d, which is not a present float input", i)
		}
		if slices.Contains(c.Grads, i) {
			return nil, fmt.Errorf("grads lists input %d twice", i)
		}
		c.Grads = append(c.Grads, i)
	}
	return c, nil
}

func loadOperand(dir string, j jsonOperand, input bool) (Operand, error) {
	op := Operand{Name: j.Name, Kind: Kind(j.Kind)}
	if input {
		switch op.Kind {
		case KindInput, KindWeight:
		case KindAbsent:
			if j.File != "" {
				return op, errors.New("absent input has a file")
			}
			return op, nil
		default:
			return op, fmt.Errorf("unknown kind %q", j.Kind)
		}
	} else if j.Kind != "" {
		return op, fmt.Errorf("output has kind %q", j.Kind)
	}
	if op.Name == "" {
		return op, errors.New("no name")
	}
	if j.File == "" || filepath.Base(j.File) != j.File {
		return op, fmt.Errorf("bad file name %q", j.File)
	}
	var err error
	if op.DType, err = rt.ParseDType(j.DType); err != nil {
		return op, err
	}
	op.Shape = j.Shape
	if op.Shape == nil {
		op.Shape = []int{}
	}
	t, err := npy.ReadFile(filepath.Join(dir, j.File))
	if err != nil {
		return op, err
	}
	if t.DType != op.DType || !slices.Equal(t.Shape, op.Shape) {
		return op, fmt.Errorf("%s holds %s%v, case.json says %s%v", j.File, t.DType, t.Shape, op.DType, op.Shape)
	}
	op.Tensor = t
	return op, nil
}

func attrValue(typ string, raw json.RawMessage) (any, error) {
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		return d.Decode(v)
	}
	switch typ {
	case "int":
		var n json.Number
		if err := dec(&n); err != nil {
			return nil, err
		}
		return n.Int64()
	case "float":
		var f float64
		err := dec(&f)
		return f, err
	case "string":
		var s string
		err := dec(&s)
		return s, err
	case "ints":
		var ns []json.Number
		if err := dec(&ns); err != nil {
			return nil, err
		}
		out := make([]int64, len(ns))
		for i, n := range ns {
			v, err := n.Int64()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case "floats":
		var fs []float64
		if err := dec(&fs); err != nil {
			return nil, err
		}
		if fs == nil {
			fs = []float64{}
		}
		return fs, nil
	case "strings":
		var ss []string
		if err := dec(&ss); err != nil {
			return nil, err
		}
		if ss == nil {
			ss = []string{}
		}
		return ss, nil
	}
	return nil, fmt.Errorf("unknown attribute type %q", typ)
}
