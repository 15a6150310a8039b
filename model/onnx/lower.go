package onnx

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// attrInputs lists the integer attributes that later opsets turned into
// inputs: before opset since, attribute names[k] of the operator becomes
// its input k+1 (an I64 constant).
var attrInputs = map[string]struct {
	since int64
	names []string
}{
	"Split": {13, []string{"split"}}, "Squeeze": {13, []string{"axes"}}, "Unsqueeze": {13, []string{"axes"}},
	"Reshape": {5, []string{"shape"}}, "Slice": {10, []string{"starts", "ends", "axes"}}, "TopK": {10, []string{"k"}},
	// The Reduce* operators moved axes in opset 13 (ReduceSum) or 18.
	"ReduceSum": {13, []string{"axes"}}, "ReduceMean": {18, []string{"axes"}}, "ReduceMax": {18, []string{"axes"}},
	"ReduceMin": {18, []string{"axes"}}, "ReduceProd": {18, []string{"axes"}}, "ReduceL1": {18, []string{"axes"}},
	"ReduceL2": {18, []string{"axes"}}, "ReduceLogSum": {18, []string{"axes"}},
	"ReduceLogSumExp": {18, []string{"axes"}}, "ReduceSumSquare": {18, []string{"axes"}},
}

// legacyBroadcast lists the operators that had the broadcast/axis
// attributes before opset 7.
var legacyBroadcast = map[string]bool{
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true,
	"And": true, "Or": true, "Xor": true, "Equal": true, "Greater": true,
	"Less": true, "Gemm": true, "PRelu": true,
}

// needsX lists the operators whose rewriting reads their first input.
var needsX = map[string]bool{
	"Upsample": true, "Resize": true, "Clip": true, "Pad": true, "Softmax": true,
	"LogSoftmax": true, "Hardmax": true, "Dropout": true,
}

// castNames maps the string values of Cast-1's "to" attribute.
var castNames = map[string]int32{}

func init() {
	for v, s := range onnxpb.TensorProto_DataType_name {
		castNames[s] = v
	}
}

// convertAttr converts a scalar or list attribute. ok is false for the
// kinds vrun's IR cannot hold (tensors, graphs, types), which the caller
// handles.
func convertAttr(a *onnxpb.AttributeProto) (model.Attr, bool) {
	at := model.Attr{Name: a.GetName()}
	typ := a.GetType()
	if typ == onnxpb.AttributeProto_UNDEFINED {
		typ = guessAttrType(a)
	}
	switch typ {
	case onnxpb.AttributeProto_INT:
		at.Kind, at.Int = model.AttrInt, a.GetI()
	case onnxpb.AttributeProto_FLOAT:
		at.Kind, at.Float = model.AttrFloat, float64(a.GetF())
	case onnxpb.AttributeProto_STRING:
		at.Kind, at.Str = model.AttrString, string(a.GetS())
	case onnxpb.AttributeProto_INTS:
		at.Kind, at.Ints = model.AttrInts, append([]int64{}, a.Ints...)
	case onnxpb.AttributeProto_FLOATS:
		at.Kind, at.Floats = model.AttrFloats, make([]float64, len(a.Floats))
		for i, f := range a.Floats {
			at.Floats[i] = float64(f)
		}
	case onnxpb.AttributeProto_STRINGS:
		at.Kind, at.Strings = model.AttrStrings, make([]string, len(a.Strings))
		for i, s := range a.Strings {
			at.Strings[i] = string(s)
		}
	default:
		return at, false
	}
	return at, true
}

// guessAttrType infers the type of an attribute written without one (very
// old exporters) from the field that is set.
func guessAttrType(a *onnxpb.AttributeProto) onnxpb.AttributeProto_AttributeType {
	switch {
	case len(a.Floats) > 0:
		return onnxpb.AttributeProto_FLOATS
	case len(a.Ints) > 0:
		return onnxpb.AttributeProto_INTS
	case len(a.Strings) > 0:
		return onnxpb.AttributeProto_STRINGS
	case a.T != nil:
		return onnxpb.AttributeProto_TENSOR
	case a.G != nil:
		return onnxpb.AttributeProto_GRAPH
	case len(a.Graphs) > 0:
		return onnxpb.AttributeProto_GRAPHS
	case len(a.Tensors) > 0:
		return onnxpb.AttributeProto_TENSORS
	case a.S != nil:
		return onnxpb.AttributeProto_STRING
	case a.F != 0:
		return onnxpb.AttributeProto_FLOAT
	}
	return onnxpb.AttributeProto_INT
}

func attrTypeOf(a *onnxpb.AttributeProto) onnxpb.AttributeProto_AttributeType {
	if t := a.GetType(); t != onnxpb.AttributeProto_UNDEFINED {
		return t
	}
	return guessAttrType(a)
}

// node helpers on inode.

func (n *inode) attr(name string) (*model.Attr, bool) {
	for i := range n.attrs {
		if n.attrs[i].Name == name {
			return &n.attrs[i], true
		}
	}
	return nil, false
}

// take removes and returns an attribute.
func (n *inode) take(name string) (model.Attr, bool) {
	for i := range n.attrs {
		if n.attrs[i].Name == name {
			a := n.attrs[i]
			n.attrs = append(n.attrs[:i], n.attrs[i+1:]...)
			return a, true
		}
	}
	return model.Attr{}, false
}

func (n *inode) drop(names ...string) {
	for _, s := range names {
		n.take(s)
	}
}

func (n *inode) set(a model.Attr) {
	if p, ok := n.attr(a.Name); ok {
		*p = a
		return
	}
	n.attrs = append(n.attrs, a)
}

// setInput puts name at input position k, padding with absent inputs.
func (n *inode) setInput(k int, name string) {
	for len(n.in) <= k {
		n.in = append(n.in, "")
	}
	n.in[k] = name
}

func i64Tensor(v []int64, scalar bool) *rt.Tensor {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	t := rt.FromFloat64(rt.I64, f, len(v))
	// FromFloat64 would lose precision past 2^53; store exactly.
	for i, x := range v {
		for b := range 8 {
			t.Data[8*i+b] = byte(uint64(x) >> (8 * b))
		}
	}
	if scalar {
		t.Shape = []int{}
	}
	return t
}

// lower converts ONNX node i and appends the result to im.nodes. Problems
// that make the model unsupported are recorded (the node is still added,
// so that the graph stays connected for the structural checks); the error
// return is for malformed nodes.
func (im *importer) lower(i int, np *onnxpb.NodeProto, consumed map[string]int) error {
	n, err := newINode(i, np)
	if err != nil {
		return err
	}
	if n.domain != "" {
		return im.foreignNode(n)
	}
	tensorAttrs, err := im.convertAttrs(n, np)
	if err != nil {
		return err
	}
	if needsX[n.op] && (len(n.in) == 0 || n.in[0] == "") {
		return invalidf("node %q (%s) has no first input", n.name, n.op)
	}
	if im.opset < 6 {
		n.drop("consumed_inputs")
	}
	if im.opset < 7 && legacyBroadcast[n.op] {
		im.legacyBroadcast(n)
	}
	if n.op == "Constant" {
		return im.lowerConstant(n, tensorAttrs)
	}
	if err := im.normalise(n, tensorAttrs, consumed); err != nil {
		return err
	}
	for name := range tensorAttrs {
		im.problem(n, "tensor attribute %q is not supported", name)
	}
	im.nodes = append(im.nodes, n)
	return nil
}

// newINode reads node i's name, op, domain, inputs and outputs, naming an
// unnamed node after its op and index.
func newINode(i int, np *onnxpb.NodeProto) (*inode, error) {
	n := &inode{
		name:   np.GetName(),
		op:     np.GetOpType(),
		domain: np.GetDomain(),
		in:     append([]string{}, np.Input...),
		out:    append([]string{}, np.Output...),
	}
	if n.domain == "ai.onnx" {
		n.domain = ""
	}
	if n.op == "" {
		return nil, invalidf("node %d %q has no op_type", i, n.name)
	}
	if n.name == "" {
		n.name = fmt.Sprintf("%s_%d", n.op, i)
	}
	return n, nil
}

// foreignNode adds a node of another domain than the default one, which
// vrun does not support (a model-local function or an operator set).
func (im *importer) foreignNode(n *inode) error {
	if _, ok := im.opsets[n.domain]; !ok {
		return invalidf("node %q (%s) uses domain %q, which opset_import does not list", n.name, n.op, n.domain)
	}
	if im.funcs[n.domain+"/"+n.op] {
		im.problem(n, "model-local functions are not supported (no inlining)")
	} else {
		im.problem(n, "operator domain %q is not supported", n.domain)
	}
	im.nodes = append(im.nodes, n)
	return nil
}

// convertAttrs converts the node's attributes into n.attrs and returns its
// tensor attributes by name. Subgraphs and other kinds vrun cannot hold are
// recorded as problems.
func (im *importer) convertAttrs(n *inode, np *onnxpb.NodeProto) (map[string]*onnxpb.TensorProto, error) {
	tensorAttrs := map[string]*onnxpb.TensorProto{}
	seen := map[string]bool{}
	subgraph := false
	for _, a := range np.Attribute {
		if a.GetName() == "" {
			return nil, invalidf("node %q (%s) has an attribute with no name", n.name, n.op)
		}
		if seen[a.GetName()] {
			return nil, invalidf("node %q (%s) has attribute %q twice", n.name, n.op, a.GetName())
		}
		seen[a.GetName()] = true
		if a.GetRefAttrName() != "" {
			return nil, invalidf("node %q (%s): attribute %q refers to a function attribute outside a function", n.name, n.op, a.GetName())
		}
		if at, ok := convertAttr(a); ok {
			n.attrs = append(n.attrs, at)
			continue
		}
		switch attrTypeOf(a) {
		case onnxpb.AttributeProto_TENSOR:
			if a.T == nil {
				return nil, invalidf("node %q (%s): tensor attribute %q has no value", n.name, n.op, a.GetName())
			}
			tensorAttrs[a.GetName()] = a.T
		case onnxpb.AttributeProto_GRAPH, onnxpb.AttributeProto_GRAPHS:
			if !subgraph {
				im.problem(n, "subgraphs (If/Loop/Scan) are not supported")
			}
			subgraph = true
		default:
			im.problem(n, "attribute %q of type %s is not supported", a.GetName(), attrTypeOf(a))
		}
	}
	return tensorAttrs, nil
}

// normalise rewrites a node of the default domain into vrun's
// latest-opset form: attributes that became inputs, renamed operators,
// legacy attribute forms, and inference-only simplifications.
func (im *importer) normalise(n *inode, tensorAttrs map[string]*onnxpb.TensorProto, consumed map[string]int) error {
	v := im.opset
	if ai, ok := attrInputs[n.op]; ok && v < ai.since {
		for k, name := range ai.names {
			if a, ok := n.take(name); ok {
				vals := a.Ints
				if a.Kind == model.AttrInt {
					vals = []int64{a.Int}
				}
				n.setInput(k+1, im.constant(n.name+"_"+name, i64Tensor(vals, false)))
			}
		}
	}
	switch n.op {
	case "ConstantOfShape":
		return im.constantOfShape(n, tensorAttrs)
	case "Dropout":
		im.dropout(n, consumed)
	case "BatchNormalization":
		im.batchNorm(n, consumed)
	case "Split":
		if v < 18 && (len(n.in) < 2 || n.in[1] == "") {
			n.set(model.Attr{Name: "num_outputs", Kind: model.AttrInt, Int: int64(len(n.out))})
		}
	case "Clip":
		if v < 11 {
			im.legacyClip(n)
		}
	case "Pad":
		if v < 11 {
			im.legacyPad(n)
		}
	case "Concat":
		if _, ok := n.attr("axis"); !ok && v < 4 {
			n.set(model.Attr{Name: "axis", Kind: model.AttrInt, Int: 1})
		}
	case "Cast":
		if a, ok := n.attr("to"); ok && a.Kind == model.AttrString {
			code, known := castNames[strings.ToUpper(a.Str)]
			if !known {
				return invalidf("node %q (Cast): unknown type %q", n.name, a.Str)
			}
			*a = model.Attr{Name: "to", Kind: model.AttrInt, Int: int64(code)}
		}
	case "Upsample":
		im.lowerUpsample(n)
	case "Resize":
		if v < 11 {
			// Resize-10: (X, scales), asymmetric coordinates, like Upsample.
			if len(n.in) > 1 {
				n.in = []string{n.in[0], "", n.in[1]}
			}
			im.resizeLegacyAttrs(n)
		}
	case "Scatter":
		n.op = "ScatterElements"
	case "Softmax", "LogSoftmax", "Hardmax":
		if v < 13 {
			im.lowerSoftmax(n)
		}
	case "Tile":
		if v < 6 {
			im.problem(n, "Tile-1 (tiles/axis inputs) is not supported")
		}
	case "GroupNormalization":
		if v < 21 {
			im.problem(n, "GroupNormalization before opset 21 (per-group scale and bias) is not supported")
		}
	}
	return nil
}

// constantOfShape makes the value attribute (default: f32 zero) the
// node's second input.
func (im *importer) constantOfShape(n *inode, tensorAttrs map[string]*onnxpb.TensorProto) error {
	val := rt.FromFloat32([]float32{0}, 1)
	if tp, ok := tensorAttrs["value"]; ok {
		t, err := DecodeTensor(tp, im.opts.BaseDir)
		if err != nil {
			return fmt.Errorf("node %q (%s) value: %w", n.name, n.op, err)
		}
		if t.Len() != 1 {
			return invalidf("node %q (%s): value has %d elements, want 1", n.name, n.op, t.Len())
		}
		val = t
		val.Shape = []int{1}
		delete(tensorAttrs, "value")
	}
	n.in = n.in[:min(len(n.in), 1)]
	n.setInput(1, im.constant(n.name+"_value", val))
	return nil
}

// dropout keeps an inference Dropout: y = x. The ratio and training_mode
// are dropped; a Dropout whose mask is used stays (mask all true).
func (im *importer) dropout(n *inode, consumed map[string]int) {
	n.drop("ratio", "is_test", "seed")
	if len(n.in) > 2 && n.in[2] != "" {
		im.problem(n, "Dropout with a training_mode input is not supported")
	}
	n.in = n.in[:min(len(n.in), 1)]
	if len(n.out) > 1 && consumed[n.out[1]] == 0 {
		n.out = n.out[:1]
	}
}

// batchNorm keeps an inference BatchNormalization, dropping its unused
// training outputs.
func (im *importer) batchNorm(n *inode, consumed map[string]int) {
	if a, ok := n.take("spatial"); ok && a.Int == 0 {
		im.problem(n, "BatchNormalization with spatial=0 is not supported")
	}
	n.drop("is_test")
	if a, ok := n.attr("training_mode"); ok && a.Int != 0 {
		im.problem(n, "BatchNormalization in training mode is not supported")
	}
	used := false
	for k := 1; k < len(n.out); k++ {
		used = used || n.out[k] != "" && consumed[n.out[k]] > 0
	}
	if used {
		im.problem(n, "BatchNormalization training outputs (running or saved mean and var) are not supported")
	} else {
		n.out = n.out[:min(len(n.out), 1)]
	}
}

// legacyClip turns Clip-6's min and max attributes into inputs.
func (im *importer) legacyClip(n *inode) {
	mn, hasMin := n.take("min")
	mx, hasMax := n.take("max")
	if hasMin {
		n.setInput(1, im.likeInput(n, n.name+"_min", mn.Float))
	}
	if hasMax {
		n.setInput(2, im.likeInput(n, n.name+"_max", mx.Float))
	}
}

// legacyPad turns the pads (Pad-1: paddings) and value attributes of
// Pad-2 into inputs.
func (im *importer) legacyPad(n *inode) {
	a, ok := n.take("pads")
	if !ok {
		a, ok = n.take("paddings") // Pad-1
	}
	if ok {
		n.setInput(1, im.constant(n.name+"_pads", i64Tensor(a.Ints, false)))
	}
	if val, ok := n.take("value"); ok && val.Float != 0 {
		n.setInput(2, im.likeInput(n, n.name+"_value", val.Float))
	}
}

// likeInput returns the name of a scalar constant with value v and the
// element type of n's first input: a typed weight when the type is
// declared, else an f32 weight converted by a CastLike node.
func (im *importer) likeInput(n *inode, base string, v float64) string {
	if len(n.in) > 0 {
		if ti, ok := im.types[n.in[0]]; ok {
			if dt, ok := DType(ti.elem); ok {
				return im.constant(base, rt.FromFloat64(dt, []float64{v}))
			}
		}
	}
	c := im.constant(base+"_f32", rt.FromFloat64(rt.F32, []float64{v}))
	out := im.fresh(base)
	im.nodes = append(im.nodes, &inode{name: n.name + "_castlike", op: "CastLike", in: []string{c, n.in[0]}, out: []string{out}})
	return out
}

// legacyBroadcast rewrites the broadcast/axis attributes of opset < 7
// binary operators to numpy broadcasting, unsqueezing B on the right when
// axis does not align it with A's trailing dims.
func (im *importer) legacyBroadcast(n *inode) {
	n.take("broadcast")
	a, ok := n.take("axis")
	if !ok || n.op == "Gemm" || len(n.in) < 2 {
		return
	}
	ta, okA := im.types[n.in[0]]
	tb, okB := im.types[n.in[1]]
	if !okA || !okB || ta.rank < 0 || tb.rank < 0 {
		im.problem(n, "legacy broadcast with axis=%d needs the input ranks, which the model does not declare", a.Int)
		return
	}
	axis := a.Int
	if axis < 0 {
		axis += int64(ta.rank)
	}
	pad := int64(ta.rank) - axis - int64(tb.rank)
	if pad < 0 || axis < 0 {
		im.problem(n, "legacy broadcast: bad axis %d for ranks %d and %d", a.Int, ta.rank, tb.rank)
		return
	}
	if pad == 0 {
		return
	}
	axes := make([]int64, pad)
	for k := range axes {
		axes[k] = int64(tb.rank) + int64(k)
	}
	out := im.fresh(n.in[1] + "_bcast")
	im.types[out] = tinfo{elem: tb.elem, rank: tb.rank + int(pad)}
	im.nodes = append(im.nodes, &inode{name: n.name + "_unsqueeze", op: "Unsqueeze",
		in: []string{n.in[1], im.constant(n.name+"_axes", i64Tensor(axes, false))}, out: []string{out}})
	n.in[1] = out
}

// lowerConstant turns a Constant node into a weight named by its output.
func (im *importer) lowerConstant(n *inode, tensorAttrs map[string]*onnxpb.TensorProto) error {
	if len(n.out) != 1 || n.out[0] == "" {
		return invalidf("node %q (Constant) must have one output", n.name)
	}
	var t *rt.Tensor
	if tp, ok := tensorAttrs["value"]; ok {
		var err error
		if t, err = DecodeTensor(tp, im.opts.BaseDir); err != nil {
			if errors.Is(err, ErrUnsupported) {
				im.problem(n, "%v", err)
				im.nodes = append(im.nodes, n)
				return nil
			}
			return fmt.Errorf("node %q (Constant) value: %w", n.name, err)
		}
	} else if len(n.attrs) == 1 {
		a := n.attrs[0]
		switch a.Name {
		case "value_float":
			t = rt.FromFloat32([]float32{float32(a.Float)})
		case "value_floats":
			f := make([]float32, len(a.Floats))
			for i, x := range a.Floats {
				f[i] = float32(x)
			}
			t = rt.FromFloat32(f, len(f))
		case "value_int":
			t = i64Tensor([]int64{a.Int}, true)
		case "value_ints":
			t = i64Tensor(a.Ints, false)
		}
	}
	if t == nil {
		if len(n.attrs)+len(tensorAttrs) == 0 {
			return invalidf("node %q (Constant) has no value", n.name)
		}
		im.problem(n, "Constant of this kind (sparse or string) is not supported")
		im.nodes = append(im.nodes, n)
		return nil
	}
	if len(t.Shape) > model.MaxRank {
		return invalidf("node %q (Constant): rank %d exceeds %d", n.name, len(t.Shape), model.MaxRank)
	}
	name := n.out[0]
	if _, dup := im.weights[name]; dup {
		return invalidf("value %q is defined twice", name)
	}
	im.weights[name] = t
	im.types[name] = tinfo{elem: ONNXType(t.DType), rank: len(t.Shape)}
	return nil
}

// lowerUpsample rewrites Upsample (opsets 1, 7, 9) to Resize.
func (im *importer) lowerUpsample(n *inode) {
	v := im.opset
	n.op = "Resize"
	var scales string
	switch {
	case v >= 9:
		if len(n.in) > 1 {
			scales = n.in[1]
		}
	case v >= 7:
		if a, ok := n.take("scales"); ok {
			f := make([]float32, len(a.Floats))
			for i, x := range a.Floats {
				f[i] = float32(x)
			}
			scales = im.constant(n.name+"_scales", rt.FromFloat32(f, len(f)))
		}
	default: // Upsample-1: NCHW with height_scale and width_scale.
		h, _ := n.take("height_scale")
		w, _ := n.take("width_scale")
		scales = im.constant(n.name+"_scales", rt.FromFloat32([]float32{1, 1, float32(h.Float), float32(w.Float)}, 4))
	}
	if scales == "" {
		im.problem(n, "Upsample without scales")
	}
	n.in = []string{n.in[0], "", scales}
	im.resizeLegacyAttrs(n)
}

// resizeLegacyAttrs sets the Resize attributes that reproduce Upsample and
// Resize-10: asymmetric coordinates, floor for nearest.
func (im *importer) resizeLegacyAttrs(n *inode) {
	mode := "nearest"
	if a, ok := n.attr("mode"); ok {
		mode = strings.ToLower(a.Str)
	}
	if mode == "bilinear" {
		mode = "linear"
	}
	n.set(model.Attr{Name: "mode", Kind: model.AttrString, Str: mode})
	n.set(model.Attr{Name: "coordinate_transformation_mode", Kind: model.AttrString, Str: "asymmetric"})
	if mode == "nearest" {
		n.set(model.Attr{Name: "nearest_mode", Kind: model.AttrString, Str: "floor"})
	}
}

// lowerSoftmax rewrites opset < 13 Softmax/LogSoftmax/Hardmax, which work
// on the input coerced to 2-D at axis (default 1), to the opset-13 form:
// a plain axis when it is the last one, else Flatten, op on axis 1 and
// Reshape back to the input's shape.
func (im *importer) lowerSoftmax(n *inode) {
	axis := int64(1)
	if a, ok := n.take("axis"); ok {
		axis = a.Int
	}
	if len(n.in) < 1 || len(n.out) < 1 {
		return
	}
	if ti, ok := im.types[n.in[0]]; ok && ti.rank >= 0 {
		r := int64(ti.rank)
		if axis < 0 {
			axis += r
		}
		if axis == r-1 || r == 0 {
			n.set(model.Attr{Name: "axis", Kind: model.AttrInt, Int: -1})
			return
		}
	}
	x, y := n.in[0], n.out[0]
	flat := im.fresh(n.name + "_flat")
	shape := im.fresh(n.name + "_shape")
	soft := im.fresh(n.name + "_2d")
	im.nodes = append(im.nodes,
		&inode{name: n.name + "_flatten", op: "Flatten", attrs: []model.Attr{{Name: "axis", Kind: model.AttrInt, Int: axis}}, in: []string{x}, out: []string{flat}},
		&inode{name: n.name + "_shapeof", op: "Shape", in: []string{x}, out: []string{shape}},
	)
	n.set(model.Attr{Name: "axis", Kind: model.AttrInt, Int: 1})
	n.in, n.out = []string{flat}, []string{soft}
	im.nodes = append(im.nodes, &inode{name: n.name + "_reshape", op: "Reshape", in: []string{soft, shape}, out: []string{y}})
}
