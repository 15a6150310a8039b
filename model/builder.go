package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/vrun-go/vrun/rt"
)

// Attrs are node attributes for [Builder.Op], by name. Accepted value
// types and the kind they become:
//
//	int, int32, int64, bool (0 or 1)        AttrInt
//	float32, float64                        AttrFloat
//	string                                  AttrString
//	[]int, []int32, []int64                 AttrInts
//	[]float32, []float64                    AttrFloats
//	[]string                                AttrStrings
//	Attr                                    as given (its Name is replaced)
//
// Attributes are stored sorted by name.
type Attrs map[string]any

// Builder assembles a [Model] in code: inputs, weights, operator nodes in
// topological order, and graph outputs. Methods never panic; the first
// errors are collected and returned by [Builder.Build]. Names returned by
// one method are the tensor names that later methods take.
//
//	b := model.NewBuilder()
//	x := b.Input("x", rt.F32, -1, 784)
//	w := b.Weight("fc.w", rt.F32, []int64{10, 784}, weights)
//	y := b.Op("Gemm", []string{x, w}, model.Attrs{"transB": 1})
//	b.Output(y)
//	m, err := b.Build()
type Builder struct {
	m     Model
	index map[string]int // tensor name -> index
	errs  []error
	auto  int // counter for generated names
}

// NewBuilder returns an empty Builder. The zero Builder is also ready to
// use.
func NewBuilder() *Builder {
	return &Builder{index: make(map[string]int)}
}

func (b *Builder) errorf(format string, args ...any) {
	if len(b.errs) < 10 {
		b.errs = append(b.errs, fmt.Errorf("model: builder: "+format, args...))
	}
}

// Meta sets a metadata key/value pair; setting a key again replaces its
// value in place.
func (b *Builder) Meta(key, value string) {
	for i := range b.m.Meta {
		if b.m.Meta[i][0] == key {
			b.m.Meta[i][1] = value
			return
		}
	}
	b.m.Meta = append(b.m.Meta, [2]string{key, value})
}

func (b *Builder) addTensor(t Tensor) string {
	if _, dup := b.index[t.Name]; dup {
		b.errorf("tensor name %q used twice", t.Name)
		return t.Name
	}
	if t.Name == "" {
		b.errorf("empty tensor name")
		return t.Name
	}
	if b.index == nil { // a zero Builder
		b.index = make(map[string]int)
	}
	b.index[t.Name] = len(b.m.Tensors)
	b.m.Tensors = append(b.m.Tensors, t)
	return t.Name
}

// Input declares a graph input of the given dtype and shape (-1 for a
// dynamic dim) and returns its name.
func (b *Builder) Input(name string, dt rt.DType, shape ...int64) string {
	return b.addTensor(Tensor{Name: name, DType: dt, Shape: slices.Clone(shape), Role: Input})
}

// DimNames names the dims of a tensor already declared (typically the
// dynamic dims of an input: "batch"); "" leaves a dim unnamed.
func (b *Builder) DimNames(tensor string, names ...string) {
	i, ok := b.index[tensor]
	if !ok {
		b.errorf("DimNames: unknown tensor %q", tensor)
		return
	}
	b.m.Tensors[i].DimNames = slices.Clone(names)
}

// Weight declares a constant tensor and returns its name. data holds its
// elements in row-major order, as one of:
//
//	[]byte                raw little-endian bytes, for any dtype
//	[]float32             for F32, or F16 (converted, rounding to nearest even)
//	[]float64             for F64
//	[]uint16              for F16, as IEEE 754 binary16 bits
//	[]int32, []int64      for I32, I64
//	[]int8, []bool        for I8, Bool
//
// The data is copied; its length must match the shape.
func (b *Builder) Weight(name string, dt rt.DType, shape []int64, data any) string {
	raw, err := weightBytes(dt, data)
	if err != nil {
		b.errorf("weight %q: %v", name, err)
	}
	return b.addTensor(Tensor{Name: name, DType: dt, Shape: slices.Clone(shape), Role: Weight, Data: raw})
}

func weightBytes(dt rt.DType, data any) ([]byte, error) {
	mismatch := func() ([]byte, error) {
		return nil, fmt.Errorf("%T data does not fit dtype %s", data, dt)
	}
	var out []byte
	switch v := data.(type) {
	case nil:
		return []byte{}, nil
	case []byte:
		return slices.Clone(v), nil
	case []float32:
		switch dt {
		case rt.F32:
			for _, x := range v {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
			}
		case rt.F16:
			for _, x := range v {
				out = binary.LittleEndian.AppendUint16(out, rt.F16Bits(x))
			}
		default:
			return mismatch()
		}
	case []float64:
		if dt != rt.F64 {
			return mismatch()
		}
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
		}
	case []uint16:
		if dt != rt.F16 {
			return mismatch()
		}
		for _, x := range v {
			out = binary.LittleEndian.AppendUint16(out, x)
		}
	case []int32:
		if dt != rt.I32 {
			return mismatch()
		}
		for _, x := range v {
			out = binary.LittleEndian.AppendUint32(out, uint32(x))
		}
	case []int64:
		if dt != rt.I64 {
			return mismatch()
		}
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, uint64(x))
		}
	case []int8:
		if dt != rt.I8 {
			return mismatch()
		}
		for _, x := range v {
			out = append(out, byte(x))
		}
	case []bool:
		if dt != rt.Bool {
			return mismatch()
		}
		for _, x := range v {
			var c byte
			if x {
				c = 1
			}
			out = append(out, c)
		}
	default:
		return mismatch()
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// Op adds a node with one output and returns the output's name. inputs
// are tensor names; "" marks an absent optional input. The node is named
// "<op>_<n>" and its output gets the same name (made unique if needed).
func (b *Builder) Op(op string, inputs []string, attrs Attrs) string {
	outs := b.OpN(op, inputs, 1, attrs)
	if len(outs) == 0 {
		return ""
	}
	return outs[0]
}

// OpN is like [Builder.Op] for a node with n outputs, named
// "<op>_<k>:0", "<op>_<k>:1", ...
func (b *Builder) OpN(op string, inputs []string, n int, attrs Attrs) []string {
	if n < 1 || n > MaxCount {
		b.errorf("%s: %d outputs", op, n)
		return nil
	}
	node := b.nodeName(op)
	outs := make([]string, n)
	for i := range outs {
		base := node
		if n > 1 {
			base = node + ":" + strconv.Itoa(i)
		}
		outs[i] = b.uniqueName(base)
	}
	b.Node(node, op, inputs, outs, attrs)
	return outs
}

// Node adds a node with explicit node and output tensor names; an output
// name of "" marks an absent optional output. New output tensors are
// Intermediate, of unknown dtype and shape (the runtime infers them)
// unless set with [Builder.SetType]; use [Builder.Output] to make one a
// graph output. Every output name must be new.
func (b *Builder) Node(name, op string, inputs, outputs []string, attrs Attrs) {
	n := Node{Name: name, Op: op}
	var err error
	if n.Attrs, err = convertAttrs(attrs); err != nil {
		b.errorf("node %q (%s): %v", name, op, err)
	}
	for _, in := range inputs {
		if in == "" {
			n.Inputs = append(n.Inputs, -1)
			continue
		}
		i, ok := b.index[in]
		if !ok {
			b.errorf("node %q (%s): unknown input tensor %q", name, op, in)
			i = -1
		}
		n.Inputs = append(n.Inputs, i)
	}
	for _, out := range outputs {
		if out == "" {
			n.Outputs = append(n.Outputs, -1)
			continue
		}
		if _, dup := b.index[out]; dup {
			b.errorf("node %q (%s): output tensor name %q used twice", name, op, out)
			continue
		}
		n.Outputs = append(n.Outputs, len(b.m.Tensors))
		b.addTensor(Tensor{Name: out, Role: Intermediate})
	}
	b.m.Nodes = append(b.m.Nodes, n)
}

// SetType records the dtype and shape of a node output (by default they
// are unknown and inferred by the runtime).
func (b *Builder) SetType(tensor string, dt rt.DType, shape ...int64) {
	if t := b.nodeOutput("SetType", tensor); t != nil {
		t.DType, t.Shape = dt, slices.Clone(shape)
	}
}

// Output marks node outputs as graph outputs, in the order of the tensor
// table (the order in which they were created).
func (b *Builder) Output(tensors ...string) {
	for _, name := range tensors {
		if t := b.nodeOutput("Output", name); t != nil {
			t.Role = Output
		}
	}
}

// nodeOutput returns the named tensor when it is a node output, and
// otherwise records an error for the method verb and returns nil.
func (b *Builder) nodeOutput(verb, name string) *Tensor {
	i, ok := b.index[name]
	if !ok {
		b.errorf("%s: unknown tensor %q", verb, name)
		return nil
	}
	t := &b.m.Tensors[i]
	if t.Role != Intermediate && t.Role != Output {
		b.errorf("%s: tensor %q is %s, not a node output", verb, name, roleArticle(t.Role))
		return nil
	}
	return t
}

// convertSlice converts each element of v to U.
func convertSlice[U, T int | int32 | int64 | float32 | float64](v []T) []U {
	out := make([]U, len(v))
	for i, x := range v {
		out[i] = U(x)
	}
	return out
}

func (b *Builder) nodeName(op string) string {
	for {
		name := op + "_" + strconv.Itoa(b.auto)
		b.auto++
		if _, used := b.index[name]; !used {
			return name
		}
	}
}

func (b *Builder) uniqueName(base string) string {
	name := base
	for k := 1; ; k++ {
		if _, used := b.index[name]; !used {
			return name
		}
		name = base + "_" + strconv.Itoa(k)
	}
}

func convertAttrs(attrs Attrs) ([]Attr, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]Attr, 0, len(names))
	for _, k := range names {
		a, err := toAttr(k, attrs[k])
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func toAttr(name string, v any) (Attr, error) {
	a := Attr{Name: name}
	switch v := v.(type) {
	case int:
		a.Kind, a.Int = AttrInt, int64(v)
	case int32:
		a.Kind, a.Int = AttrInt, int64(v)
	case int64:
		a.Kind, a.Int = AttrInt, v
	case bool:
		a.Kind = AttrInt
		if v {
			a.Int = 1
		}
	case float32:
		a.Kind, a.Float = AttrFloat, float64(v)
	case float64:
		a.Kind, a.Float = AttrFloat, v
	case string:
		a.Kind, a.Str = AttrString, v
	case []int:
		a.Kind, a.Ints = AttrInts, convertSlice[int64](v)
	case []int32:
		a.Kind, a.Ints = AttrInts, convertSlice[int64](v)
	case []int64:
		a.Kind, a.Ints = AttrInts, slices.Clone(v)
	case []float32:
		a.Kind, a.Floats = AttrFloats, convertSlice[float64](v)
	case []float64:
		a.Kind, a.Floats = AttrFloats, slices.Clone(v)
	case []string:
		a.Kind, a.Strings = AttrStrings, slices.Clone(v)
	case Attr:
		a = v
		a.Name = name
	default:
		return a, fmt.Errorf("attribute %q: unsupported value type %T", name, v)
	}
	// Normalise nil lists so that built and decoded models compare equal.
	switch a.Kind {
	case AttrInts:
		if a.Ints == nil {
			a.Ints = []int64{}
		}
	case AttrFloats:
		if a.Floats == nil {
			a.Floats = []float64{}
		}
	case AttrStrings:
		if a.Strings == nil {
			a.Strings = []string{}
		}
	}
	return a, nil
}

// Build validates the model with the same rules as the loader
// ([Model.Validate]) and returns it. It returns the errors collected by
// earlier calls, if any, joined. The Builder may be used further; the
// returned Model does not change when it is.
func (b *Builder) Build() (*Model, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	m := &Model{
		Meta:    slices.Clone(b.m.Meta),
		Tensors: slices.Clone(b.m.Tensors),
		Nodes:   slices.Clone(b.m.Nodes),
	}
	for i := range m.Tensors {
		t := &m.Tensors[i]
		t.Shape = slices.Clone(t.Shape)
		t.DimNames = slices.Clone(t.DimNames)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}
