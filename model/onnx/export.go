package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vrun-go/vrun/internal/atomicfile"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// ExportOpset is the opset of the default domain that Export writes.
const ExportOpset = 17

// ExportIRVersion is the ONNX IR version Export writes (the one of
// ONNX 1.12, which introduced opset 17).
const ExportIRVersion = 8

// ValueType is the element type and shape of a graph output.
type ValueType struct {
	DType rt.DType
	// Shape holds the dims; -1 is a dynamic dim, named by DimNames[i]
	// when that is non-empty.
	Shape    []int64
	DimNames []string
}

// maxProto is the protobuf size limit (2 GiB).
const maxProto = 1<<31 - 1

// ExportOptions controls [Export].
type ExportOptions struct {
	// Outputs gives the element type and shape of graph outputs, which
	// vrun's graph does not record (the engine infers them when it plans
	// a model; package export asks it). An output missing here takes its
	// type and shape from the model's tensor table, when set there
	// (model.Builder.SetType), and is an error otherwise: ONNX declares
	// the type and shape of every graph output.
	Outputs map[string]ValueType
	// ProducerVersion is written as the model's producer_version
	// (producer_name is "vrun").
	ProducerVersion string
}

// ExportFile writes m as an ONNX model file; see [Export]. It writes a
// temporary file in the same folder and renames it into place, so that
// no partial file is left behind.
func ExportFile(path string, m *model.Model, opts ExportOptions) error {
	b, err := ExportBytes(m, opts)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return fmt.Errorf("onnx: %w", err)
	}
	return nil
}

// ExportBytes is [Export], serialized.
func ExportBytes(m *model.Model, opts ExportOptions) ([]byte, error) {
	mp, err := Export(m, opts)
	if err != nil {
		return nil, err
	}
	if n := proto.Size(mp); n >= maxProto {
		return nil, fmt.Errorf("onnx: %w: the model is %d bytes; a protobuf file holds under 2 GiB, and Export writes no external data", ErrUnsupported, n)
	}
	b, err := proto.Marshal(mp)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	return b, nil
}

// Export converts a vrun model to an ONNX ModelProto of opset
// [ExportOpset] (IR version [ExportIRVersion]): weights become
// initializers (raw little-endian data), inputs and outputs the graph's
// inputs and outputs, nodes keep their names and attributes. Node
// semantics are converted from vrun's (the latest opset) to opset 17; see
// the package documentation for the table. Operators that opset 17 cannot
// express are reported together in an *UnsupportedError.
func Export(m *model.Model, opts ExportOptions) (*onnxpb.ModelProto, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("onnx: export: %w", err)
	}
	e := &exporter{m: m, opts: opts, used: map[string]bool{}, emit: map[int]bool{}}
	for _, t := range m.Tensors {
		e.used[t.Name] = true
	}
	e.inferTypes()
	for i := range m.Nodes {
		e.node(&m.Nodes[i])
	}
	g := &onnxpb.GraphProto{Name: "vrun", Node: e.nodes}
	if s, ok := m.MetaValue("onnx.graph"); ok && s != "" {
		g.Name = s
	}
	for _, i := range m.Inputs() {
		t := &m.Tensors[i]
		g.Input = append(g.Input, valueInfo(t.Name, t.DType, t.Shape, t.DimNames))
	}
	for _, i := range m.Outputs() {
		t := &m.Tensors[i]
		vt, ok := opts.Outputs[t.Name]
		if !ok && t.DType != rt.InvalidDType && t.Shape != nil {
			vt, ok = ValueType{DType: t.DType, Shape: t.Shape, DimNames: t.DimNames}, true
		}
		if !ok {
			e.problems = append(e.problems, Unsupported{Reason: fmt.Sprintf("the type and shape of graph output %q are unknown (give ExportOptions.Outputs)", t.Name)})
			continue
		}
		if vt.DType == rt.InvalidDType {
			vt.DType = e.types[i]
		}
		if e.types[i] != rt.InvalidDType && vt.DType != e.types[i] {
			e.problems = append(e.problems, Unsupported{Reason: fmt.Sprintf("graph output %q is declared %s but computes %s", t.Name, vt.DType, e.types[i])})
			continue
		}
		if ONNXType(vt.DType) == 0 {
			e.problems = append(e.problems, Unsupported{Reason: fmt.Sprintf("graph output %q has element type %s", t.Name, vt.DType)})
			continue
		}
		if vt.Shape == nil {
			vt.Shape = []int64{}
		}
		g.Output = append(g.Output, valueInfo(t.Name, vt.DType, vt.Shape, vt.DimNames))
	}
	for i := range m.Tensors {
		if e.emit[i] {
			t := &m.Tensors[i]
			g.Initializer = append(g.Initializer, tensorProto(t.Name, t.DType, t.Shape, t.Data))
		}
	}
	g.Initializer = append(g.Initializer, e.consts...)
	if len(e.problems) > 0 {
		return nil, &UnsupportedError{Items: e.problems}
	}
	mp := &onnxpb.ModelProto{
		IrVersion:       ExportIRVersion,
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: "", Version: ExportOpset}},
		ProducerName:    "vrun",
		ProducerVersion: opts.ProducerVersion,
		Graph:           g,
	}
	for _, kv := range m.Meta {
		switch {
		case kv[0] == "description":
			mp.DocString = kv[1]
		case kv[0] == "producer" || strings.HasPrefix(kv[0], "onnx."):
			// Describes the file this model was imported from.
		default:
			mp.MetadataProps = append(mp.MetadataProps, &onnxpb.StringStringEntryProto{Key: kv[0], Value: kv[1]})
		}
	}
	return mp, nil
}

type exporter struct {
	m        *model.Model
	opts     ExportOptions
	types    []rt.DType      // inferred element type of each tensor
	used     map[string]bool // tensor names taken
	emit     map[int]bool    // weights written as initializers
	nodes    []*onnxpb.NodeProto
	consts   []*onnxpb.TensorProto // generated initializers
	problems []Unsupported
}

func (e *exporter) problem(n *model.Node, format string, args ...any) {
	e.problems = append(e.problems, Unsupported{Node: n.Name, Op: n.Op, Opset: ExportOpset, Reason: fmt.Sprintf(format, args...)})
}

// fresh returns an unused tensor name based on base.
func (e *exporter) fresh(base string) string {
	name := base
	for i := 1; e.used[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	e.used[name] = true
	return name
}

// in returns the ONNX name of tensor index i ("" when absent), marking
// weights for output as initializers.
func (e *exporter) in(i int) string {
	if i < 0 {
		return ""
	}
	if e.m.Tensors[i].Role == model.Weight {
		e.emit[i] = true
	}
	return e.m.Tensors[i].Name
}

// names maps tensor indices to ONNX names, trimming trailing absent ones.
func (e *exporter) names(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = e.in(i)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// constant adds a generated initializer and returns its name.
func (e *exporter) constant(base string, t *rt.Tensor) string {
	name := e.fresh(base)
	shape := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	e.consts = append(e.consts, tensorProto(name, t.DType, shape, t.Data))
	return name
}

// scalar adds a scalar initializer of dtype dt.
func (e *exporter) scalar(base string, dt rt.DType, v float64) string {
	return e.constant(base, rt.FromFloat64(dt, []float64{v}))
}

// add appends a node.
func (e *exporter) add(name, op string, in, out []string, attrs ...*onnxpb.AttributeProto) {
	e.nodes = append(e.nodes, &onnxpb.NodeProto{Name: name, OpType: op, Input: in, Output: out, Attribute: attrs})
}

// weightInts returns the values of an integer weight.
func (e *exporter) weightInts(i int) ([]int64, bool) {
	if i < 0 || e.m.Tensors[i].Role != model.Weight {
		return nil, false
	}
	t := &e.m.Tensors[i]
	switch t.DType {
	case rt.I64:
		v := make([]int64, len(t.Data)/8)
		for k := range v {
			v[k] = int64(binary.LittleEndian.Uint64(t.Data[8*k:]))
		}
		return v, true
	case rt.I32:
		v := make([]int64, len(t.Data)/4)
		for k := range v {
			v[k] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*k:])))
		}
		return v, true
	}
	return nil, false
}

// rank returns the rank of tensor i when the model declares it (inputs
// and weights).
func (e *exporter) rank(i int) (int, bool) {
	t := &e.m.Tensors[i]
	if (t.Role == model.Input || t.Role == model.Weight) && t.Shape != nil {
		return len(t.Shape), true
	}
	return 0, false
}

func inputAt(n *model.Node, k int) int {
	if k < len(n.Inputs) {
		return n.Inputs[k]
	}
	return -1
}

// reduceAttrAxes lists the Reduce operators whose axes are an attribute
// in opset 17 (an input from opset 18).
var reduceAttrAxes = map[string]bool{
	"ReduceMean": true, "ReduceMax": true, "ReduceMin": true, "ReduceProd": true, "ReduceL1": true,
	"ReduceL2": true, "ReduceLogSum": true, "ReduceLogSumExp": true, "ReduceSumSquare": true,
}

// node converts one node to opset 17.
func (e *exporter) node(n *model.Node) {
	attrs := make([]model.Attr, 0, len(n.Attrs))
	attrs = append(attrs, n.Attrs...)
	get := func(name string) (model.Attr, bool) {
		for _, a := range attrs {
			if a.Name == name {
				return a, true
			}
		}
		return model.Attr{}, false
	}
	drop := func(name string) {
		attrs = slices.DeleteFunc(attrs, func(a model.Attr) bool { return a.Name == name })
	}
	in, out := e.names(n.Inputs), e.names(n.Outputs)
	op := n.Op
	var extra []*onnxpb.AttributeProto
	x := inputAt(n, 0)
	xdt := rt.InvalidDType
	if x >= 0 {
		xdt = e.types[x]
	}

	if (op == "ReduceMax" || op == "ReduceMin") && xdt == rt.Bool {
		// Opset 20 reduces bool. Any (max) is a count of trues above
		// zero, all (min) a count of falses equal to zero; ReduceSum takes
		// its axes as an input in opset 13 already, and counts an empty
		// set as zero.
		x := in[0]
		test := "Greater"
		if op == "ReduceMin" {
			test = "Equal"
			x = e.fresh(n.Name + "_not")
			e.add(n.Name+"_not", "Not", []string{in[0]}, []string{x})
		}
		in[0] = e.cast(n.Name+"_count", x, rt.I64)
		y := e.fresh(n.Name + "_sum")
		var sa []*onnxpb.AttributeProto
		for _, a := range attrs {
			sa = append(sa, attrProto(a))
		}
		e.add(n.Name, "ReduceSum", in, []string{y}, sa...)
		e.add(n.Name+"_test", test, []string{y, e.constant(n.Name+"_zero", i64Tensor([]int64{0}, true))}, out[:1])
		return
	}
	switch {
	case reduceAttrAxes[op]:
		noop, _ := get("noop_with_empty_axes")
		drop("noop_with_empty_axes")
		var axes []int64
		if a := inputAt(n, 1); a >= 0 {
			v, ok := e.weightInts(a)
			if !ok {
				e.problem(n, "axes computed at run time cannot be an attribute in opset %d", ExportOpset)
				return
			}
			axes = v
			in = in[:1]
			delete(e.emit, a)
			e.reEmit(n, a)
		}
		if len(axes) == 0 && noop.Int != 0 {
			e.add(n.Name, "Identity", in[:1], out[:1])
			return
		}
		if len(axes) > 0 {
			attrs = append(attrs, model.Attr{Name: "axes", Kind: model.AttrInts, Ints: axes})
		}
	case op == "Split":
		// Opset 18's num_outputs: chunks of ceil(d/n), the last one
		// smaller. In opset 13-17 a Split without sizes must split
		// evenly, so the sizes are given as an input.
		if _, ok := get("num_outputs"); ok {
			drop("num_outputs")
			if inputAt(n, 1) < 0 {
				axis := int64(0)
				if a, ok := get("axis"); ok {
					axis = a.Int
				}
				in = []string{in[0], e.splitSizes(n, in[0], axis, len(n.Outputs))}
			}
		}
	case op == "SpaceToDepth":
		if a, ok := get("mode"); ok {
			if a.Str != "DCR" {
				e.problem(n, "SpaceToDepth mode %q needs opset 28", a.Str)
				return
			}
			drop("mode")
		}
	case op == "IsInf" && xdt == rt.F16:
		in[0] = e.cast(n.Name+"_f32", in[0], rt.F32) // IsInf-10 takes float and double
	case op == "Celu" && xdt != rt.F32:
		e.activation(n, in[0], out[0], xdt, attrs) // Celu-12 takes float only
		return
	case op == "Range" && xdt == rt.F16:
		e.problem(n, "Range of float16 needs opset 21")
		return
	case op == "ConstantOfShape":
		if v := inputAt(n, 1); v >= 0 {
			t := &e.m.Tensors[v]
			if t.Role != model.Weight {
				e.problem(n, "a value computed at run time cannot be the value attribute")
				return
			}
			in = in[:1]
			delete(e.emit, v)
			e.reEmit(n, v)
			extra = append(extra, &onnxpb.AttributeProto{Name: "value", Type: onnxpb.AttributeProto_TENSOR,
				T: tensorProto("", t.DType, []int64{1}, t.Data)})
		}
	case op == "Pad":
		if a, ok := get("mode"); ok && a.Str == "wrap" {
			e.problem(n, "Pad mode \"wrap\" needs opset 19")
			return
		}
		if ax := inputAt(n, 3); ax >= 0 {
			axes, ok1 := e.weightInts(ax)
			pads, ok2 := e.weightInts(inputAt(n, 1))
			r, ok3 := e.rank(x)
			if !ok1 || !ok2 || !ok3 || len(pads) != 2*len(axes) {
				e.problem(n, "Pad with axes needs opset 18 (or constant pads and axes and an input of known rank)")
				return
			}
			full := make([]int64, 2*r)
			for k, a := range axes {
				if a < 0 {
					a += int64(r)
				}
				if a < 0 || a >= int64(r) {
					e.problem(n, "Pad axis %d out of range for rank %d", axes[k], r)
					return
				}
				full[a], full[int64(r)+a] = pads[k], pads[len(axes)+k]
			}
			delete(e.emit, ax)
			e.reEmit(n, ax)
			in = in[:3]
			in[1] = e.constant(n.Name+"_pads", i64Tensor(full, false))
			for len(in) > 0 && in[len(in)-1] == "" {
				in = in[:len(in)-1]
			}
		}
	case op == "Resize":
		if a, ok := get("antialias"); ok && a.Int != 0 {
			e.problem(n, "Resize antialias needs opset 18")
			return
		}
		if a, ok := get("keep_aspect_ratio_policy"); ok && a.Str != "stretch" {
			e.problem(n, "Resize keep_aspect_ratio_policy %q needs opset 18", a.Str)
			return
		}
		if _, ok := get("axes"); ok {
			e.problem(n, "Resize axes needs opset 18")
			return
		}
		if a, ok := get("coordinate_transformation_mode"); ok && a.Str == "half_pixel_symmetric" {
			e.problem(n, "Resize coordinate_transformation_mode \"half_pixel_symmetric\" needs opset 19")
			return
		}
		drop("antialias")
		drop("keep_aspect_ratio_policy")
	case op == "ScatterElements" || op == "ScatterND":
		if a, ok := get("reduction"); ok && (a.Str == "max" || a.Str == "min") {
			e.problem(n, "%s reduction %q needs opset 18", op, a.Str)
			return
		}
	case op == "AveragePool":
		if a, ok := get("dilations"); ok {
			if !allOnes(a.Ints) {
				e.problem(n, "AveragePool dilations need opset 19")
				return
			}
			drop("dilations")
		}
	case op == "LpPool":
		if a, ok := get("ceil_mode"); ok && a.Int != 0 {
			e.problem(n, "LpPool ceil_mode needs opset 18")
			return
		}
		drop("ceil_mode")
		if a, ok := get("dilations"); ok {
			if !allOnes(a.Ints) {
				e.problem(n, "LpPool dilations need opset 18")
				return
			}
			drop("dilations")
		}
	case op == "Cast" || op == "CastLike":
		drop("saturate") // opset 19, float8 only
	case op == "Gelu", op == "Mish", op == "Silu", op == "Swish":
		e.activation(n, in[0], out[0], xdt, attrs)
		return
	case op == "GroupNormalization", op == "RMSNormalization", op == "Attention":
		e.problem(n, "operator %s is not in opset %d", op, ExportOpset)
		return
	}
	for _, a := range attrs {
		extra = append(extra, attrProto(a))
	}
	e.add(n.Name, op, in, out, extra...)
}

// cast converts x to dt with a new Cast node and returns the result.
func (e *exporter) cast(base, x string, dt rt.DType) string {
	y := e.fresh(base)
	e.add(base, "Cast", []string{x}, []string{y}, attrProto(model.Attr{Name: "to", Kind: model.AttrInt, Int: int64(ONNXType(dt))}))
	return y
}

// splitSizes returns the name of the sizes of opset 18's Split into n
// chunks along axis: n-1 chunks of c = ceil(d/n) and a last one of
// d - (n-1)·c. They are constants when the input's dims are declared,
// else computed from its shape.
func (e *exporter) splitSizes(nd *model.Node, x string, axis int64, n int) string {
	xi := nd.Inputs[0]
	if r, ok := e.rank(xi); ok {
		a := axis
		if a < 0 {
			a += int64(r)
		}
		if a >= 0 && a < int64(r) && e.m.Tensors[xi].Shape[a] >= 0 {
			d := e.m.Tensors[xi].Shape[a]
			c := (d + int64(n) - 1) / int64(n)
			sizes := make([]int64, n)
			for k := range sizes {
				sizes[k] = c
			}
			sizes[n-1] = d - int64(n-1)*c
			return e.constant(nd.Name+"_split", i64Tensor(sizes, false))
		}
	}
	k := 0
	op := func(o string, in []string, attrs ...*onnxpb.AttributeProto) string {
		k++
		y := e.fresh(fmt.Sprintf("%s_split%d", nd.Name, k))
		e.add(fmt.Sprintf("%s_split_%s%d", nd.Name, strings.ToLower(o), k), o, in, []string{y}, attrs...)
		return y
	}
	start := attrProto(model.Attr{Name: "start", Kind: model.AttrInt, Int: axis})
	var d string
	if axis == -1 {
		d = op("Shape", []string{x}, start)
	} else {
		d = op("Shape", []string{x}, start, attrProto(model.Attr{Name: "end", Kind: model.AttrInt, Int: axis + 1}))
	}
	nn := e.constant(nd.Name+"_chunks", i64Tensor([]int64{int64(n)}, false))
	c := op("Div", []string{op("Add", []string{d, e.constant(nd.Name+"_chunks_1", i64Tensor([]int64{int64(n - 1)}, false))}), nn})
	last := op("Sub", []string{d, op("Mul", []string{c, e.constant(nd.Name+"_chunks_1b", i64Tensor([]int64{int64(n - 1)}, false))})})
	parts := make([]string, 0, n)
	for range n - 1 {
		parts = append(parts, c)
	}
	return op("Concat", append(parts, last), attrProto(model.Attr{Name: "axis", Kind: model.AttrInt, Int: 0}))
}

// reEmit keeps weight i an initializer when a node other than n reads it.
func (e *exporter) reEmit(n *model.Node, i int) {
	for k := range e.m.Nodes {
		o := &e.m.Nodes[k]
		if o == n {
			continue
		}
		if slices.Contains(o.Inputs, i) {
			e.emit[i] = true
			return
		}
	}
}

// activation writes the activations that opset 17 lacks as their
// definitions: Gelu (opset 20), Mish (18), Swish (24) and vrun's Silu.
func (e *exporter) activation(n *model.Node, x, y string, dt rt.DType, attrs []model.Attr) {
	if !dt.IsFloat() {
		e.problem(n, "%s of an input of unknown float type", n.Op)
		return
	}
	k := 0
	tmp := func() string { k++; return e.fresh(fmt.Sprintf("%s_%d", n.Name, k)) }
	node := func(op string, in ...string) string {
		out := tmp()
		e.add(fmt.Sprintf("%s_%s%d", n.Name, strings.ToLower(op), k), op, in, []string{out})
		return out
	}
	final := func(op string, in ...string) {
		e.add(n.Name, op, in, []string{y})
	}
	attr := func(name string) (model.Attr, bool) {
		for _, a := range attrs {
			if a.Name == name {
				return a, true
			}
		}
		return model.Attr{}, false
	}
	switch n.Op {
	case "Gelu":
		approx := "none"
		if a, ok := attr("approximate"); ok {
			approx = a.Str
		}
		half := e.scalar(n.Name+"_half", dt, 0.5)
		one := e.scalar(n.Name+"_one", dt, 1)
		var inner string
		switch approx {
		case "tanh":
			// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
			x3 := node("Mul", node("Mul", x, x), x)
			s := node("Add", x, node("Mul", x3, e.scalar(n.Name+"_c", dt, 0.044715)))
			inner = node("Tanh", node("Mul", s, e.scalar(n.Name+"_k", dt, math.Sqrt(2/math.Pi))))
		case "none":
			// 0.5·x·(1 + erf(x/√2))
			inner = node("Erf", node("Mul", x, e.scalar(n.Name+"_rsqrt2", dt, 1/math.Sqrt2)))
		default:
			e.problem(n, "Gelu approximate %q", approx)
			return
		}
		final("Mul", node("Mul", x, node("Add", inner, one)), half)
	case "Mish":
		final("Mul", x, node("Tanh", node("Softplus", x)))
	case "Celu":
		// max(0, x) + min(0, α·(exp(x/α) - 1))
		alpha := 1.0
		if a, ok := attr("alpha"); ok {
			alpha = a.Float
		}
		zero := e.scalar(n.Name+"_zero", dt, 0)
		al := e.scalar(n.Name+"_alpha", dt, alpha)
		ex := node("Exp", node("Div", x, al))
		neg := node("Min", zero, node("Mul", al, node("Sub", ex, e.scalar(n.Name+"_one", dt, 1))))
		final("Add", node("Max", zero, x), neg)
	case "Silu":
		final("Mul", x, node("Sigmoid", x))
	case "Swish":
		alpha := 1.0
		if a, ok := attr("alpha"); ok {
			alpha = a.Float
		}
		s := x
		if alpha != 1 {
			s = node("Mul", x, e.scalar(n.Name+"_alpha", dt, alpha))
		}
		final("Mul", x, node("Sigmoid", s))
	}
}

// attrProto converts an attribute. A zero int, float or empty string is
// written explicitly: onnx.proto is proto2, and its readers (the ONNX
// checker's shape inference, for one) test the value's presence, which
// the proto3 encoding of onnxpb leaves out for zero values: an absent
// value means "take the default", which is not always zero (Flatten's
// axis is 1).
func attrProto(a model.Attr) *onnxpb.AttributeProto {
	p := &onnxpb.AttributeProto{Name: a.Name}
	var present []byte
	switch a.Kind {
	case model.AttrInt:
		p.Type, p.I = onnxpb.AttributeProto_INT, a.Int
		if a.Int == 0 {
			present = protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 0)
		}
	case model.AttrFloat:
		p.Type, p.F = onnxpb.AttributeProto_FLOAT, float32(a.Float)
		if p.F == 0 && !math.Signbit(float64(p.F)) {
			present = protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 0)
		}
	case model.AttrString:
		p.Type, p.S = onnxpb.AttributeProto_STRING, []byte(a.Str)
		if a.Str == "" {
			present = protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), nil)
		}
	case model.AttrInts:
		p.Type, p.Ints = onnxpb.AttributeProto_INTS, append([]int64{}, a.Ints...)
	case model.AttrFloats:
		p.Type = onnxpb.AttributeProto_FLOATS
		for _, f := range a.Floats {
			p.Floats = append(p.Floats, float32(f))
		}
	case model.AttrStrings:
		p.Type = onnxpb.AttributeProto_STRINGS
		for _, s := range a.Strings {
			p.Strings = append(p.Strings, []byte(s))
		}
	}
	if present != nil {
		p.ProtoReflect().SetUnknown(present)
	}
	return p
}

func tensorProto(name string, dt rt.DType, shape []int64, data []byte) *onnxpb.TensorProto {
	raw := data
	if dt == rt.Bool {
		raw = make([]byte, len(data))
		for i, b := range data {
			if b != 0 {
				raw[i] = 1
			}
		}
	}
	return &onnxpb.TensorProto{Name: name, DataType: ONNXType(dt), Dims: append([]int64{}, shape...), RawData: slices.Clone(raw)}
}

func valueInfo(name string, dt rt.DType, shape []int64, dimNames []string) *onnxpb.ValueInfoProto {
	tt := &onnxpb.TypeProto_Tensor{ElemType: ONNXType(dt), Shape: &onnxpb.TensorShapeProto{}}
	{
		for i, d := range shape {
			dim := &onnxpb.TensorShapeProto_Dimension{}
			switch {
			case i < len(dimNames) && dimNames[i] != "":
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: dimNames[i]}
			case d >= 0:
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}
			}
			tt.Shape.Dim = append(tt.Shape.Dim, dim)
		}
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: tt}}}
}

// inferTypes propagates element types from the inputs and weights through
// the nodes (the IR carries no types for intermediates and outputs).
func (e *exporter) inferTypes() {
	m := e.m
	e.types = make([]rt.DType, len(m.Tensors))
	for i, t := range m.Tensors {
		if t.Role == model.Input || t.Role == model.Weight || t.DType != rt.InvalidDType {
			e.types[i] = t.DType
		}
	}
	for _, n := range m.Nodes {
		ts := outTypes(&n, func(k int) rt.DType {
			if i := inputAt(&n, k); i >= 0 {
				return e.types[i]
			}
			return rt.InvalidDType
		})
		for k, o := range n.Outputs {
			if o >= 0 && k < len(ts) && e.types[o] == rt.InvalidDType {
				e.types[o] = ts[k]
			}
		}
	}
}

// onnxDType maps a TensorProto data type attribute value to a dtype.
func onnxDType(code int64) rt.DType {
	dt, _ := DType(int32(code))
	return dt
}

// outTypes returns the element types of a node's outputs given those of
// its inputs; InvalidDType where unknown.
func outTypes(n *model.Node, in func(int) rt.DType) []rt.DType {
	attrInt := func(name string, def int64) int64 {
		if a, ok := n.Attr(name); ok {
			return a.Int
		}
		return def
	}
	all := func(dt rt.DType) []rt.DType {
		out := make([]rt.DType, len(n.Outputs))
		for i := range out {
			out[i] = dt
		}
		return out
	}
	switch n.Op {
	case "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf":
		return all(rt.Bool)
	case "Shape", "Size", "ArgMax", "ArgMin", "NonZero":
		return all(rt.I64)
	case "Cast":
		return all(onnxDType(attrInt("to", 0)))
	case "CastLike":
		return all(in(1))
	case "Where":
		return all(in(1))
	case "OneHot":
		return all(in(2))
	case "EyeLike":
		if a, ok := n.Attr("dtype"); ok {
			return all(onnxDType(a.Int))
		}
		return all(in(0))
	case "ConstantOfShape":
		if dt := in(1); dt != rt.InvalidDType {
			return all(dt)
		}
		return all(rt.F32)
	case "HannWindow", "HammingWindow", "BlackmanWindow":
		return all(onnxDType(attrInt("output_datatype", int64(onnxpb.TensorProto_FLOAT))))
	case "TopK":
		return []rt.DType{in(0), rt.I64}
	case "MaxPool":
		return []rt.DType{in(0), rt.I64}
	case "Dropout":
		return []rt.DType{in(0), rt.Bool}
	case "LayerNormalization":
		// Mean and InvStdDev take stash_type (float by default).
		st := onnxDType(attrInt("stash_type", 1))
		return []rt.DType{in(0), st, st}
	case "Concat", "Sum", "Mean", "Max", "Min":
		for k := range n.Inputs {
			if dt := in(k); dt != rt.InvalidDType {
				return all(dt)
			}
		}
		return all(rt.InvalidDType)
	}
	// Every other operator keeps the element type of its first input
	// (data, X, A, ...), for all its outputs.
	return all(in(0))
}

// allOnes reports whether every value of s is 1 (true for an empty s).
func allOnes(s []int64) bool {
	for _, v := range s {
		if v != 1 {
			return false
		}
	}
	return true
}
