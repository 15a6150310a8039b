package onnx

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

const (
	tFloat = onnxpb.TensorProto_FLOAT
	tInt64 = onnxpb.TensorProto_INT64
)

// vi declares a tensor value; dims are ints (fixed) or strings (symbolic).
func vi(name string, elem onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		sh.Dim = append(sh.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: int32(elem), Shape: sh}}}}
}

func nd(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: op, Name: name, Input: in, Output: out, Attribute: attrs}
}

func aInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INT, I: v}
}
func aInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INTS, Ints: v}
}
func aFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_FLOAT, F: v}
}
func aFloats(name string, v ...float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_FLOATS, Floats: v}
}
func aStr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_STRING, S: []byte(v)}
}
func aTensor(name string, tp *onnxpb.TensorProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_TENSOR, T: tp}
}

func f32s(name string, dims []int64, v ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: name, DataType: int32(tFloat), Dims: dims, FloatData: v}
}

type graph struct {
	opset   int64
	nodes   []*onnxpb.NodeProto
	inputs  []*onnxpb.ValueInfoProto
	outputs []*onnxpb.ValueInfoProto
	inits   []*onnxpb.TensorProto
	vinfo   []*onnxpb.ValueInfoProto
}

func (g graph) proto() *onnxpb.ModelProto {
	if g.opset == 0 {
		g.opset = 21
	}
	return &onnxpb.ModelProto{
		IrVersion:    10,
		ProducerName: "test",
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Version: g.opset}},
		Graph: &onnxpb.GraphProto{Name: "g", Node: g.nodes, Input: g.inputs, Output: g.outputs,
			Initializer: g.inits, ValueInfo: g.vinfo},
	}
}

func (g graph) bytes(t testing.TB) []byte {
	b, err := proto.Marshal(g.proto())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (g graph) imp(t *testing.T) *model.Model {
	t.Helper()
	m, err := Import(g.bytes(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dump renders nodes as "Op(in,in)->out[attrs]" with tensor names.
func dump(m *model.Model) []string {
	name := func(i int) string {
		if i < 0 {
			return "_"
		}
		return m.Tensors[i].Name
	}
	var out []string
	for _, n := range m.Nodes {
		var ins, outs []string
		for _, i := range n.Inputs {
			ins = append(ins, name(i))
		}
		for _, i := range n.Outputs {
			outs = append(outs, name(i))
		}
		s := n.Op + "(" + strings.Join(ins, ",") + ")->" + strings.Join(outs, ",")
		out = append(out, s)
	}
	return out
}

func weight(t *testing.T, m *model.Model, name string) *model.Tensor {
	t.Helper()
	i := m.TensorIndex(name)
	if i < 0 || m.Tensors[i].Role != model.Weight {
		t.Fatalf("no weight %q in %v", name, dump(m))
	}
	return &m.Tensors[i]
}

func values(w *model.Tensor) []float64 {
	sh := make([]int, len(w.Shape))
	for i, d := range w.Shape {
		sh[i] = int(d)
	}
	return (&rt.Tensor{DType: w.DType, Shape: sh, Data: w.Data}).Float64s()
}

func attr(t *testing.T, n *model.Node, name string) *model.Attr {
	t.Helper()
	a, ok := n.Attr(name)
	if !ok {
		t.Fatalf("node %s has no attribute %q (%+v)", n.Op, name, n.Attrs)
	}
	return a
}

func TestImportBasic(t *testing.T) {
	m := graph{
		opset: 17,
		nodes: []*onnxpb.NodeProto{
			nd("Constant", "c", nil, []string{"k"}, aTensor("value", f32s("", []int64{1}, 2))),
			nd("Mul", "mul", []string{"x", "k"}, []string{"t"}),
			nd("Gemm", "", []string{"t", "w", ""}, []string{"y"}, aFloat("alpha", 0.5), aInt("transB", 1),
				aInts("dummy_ints", 1, 2), aFloats("dummy_floats", 1.5), aStr("dummy_s", "hi"),
				&onnxpb.AttributeProto{Name: "dummy_ss", Type: onnxpb.AttributeProto_STRINGS, Strings: [][]byte{[]byte("a")}}),
		},
		inputs:  []*onnxpb.ValueInfoProto{vi("x", tFloat, "batch", 4, &struct{}{})},
		outputs: []*onnxpb.ValueInfoProto{vi("y", tFloat, "batch", 3)},
		inits:   []*onnxpb.TensorProto{f32s("w", []int64{3, 4}, make([]float32, 12)...), f32s("unused", []int64{1}, 1)},
	}.imp(t)
	if got, want := dump(m), []string{"Mul(x,k)->t", "Gemm(t,w)->y"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
	x := m.Tensors[m.TensorIndex("x")]
	if x.Role != model.Input || x.DType != rt.F32 || !reflect.DeepEqual(x.Shape, []int64{-1, 4, -1}) || !reflect.DeepEqual(x.DimNames, []string{"batch", "", ""}) {
		t.Errorf("input x: %+v", x)
	}
	if y := m.Tensors[m.TensorIndex("y")]; y.Role != model.Output {
		t.Errorf("output y: %+v", y)
	}
	if m.TensorIndex("unused") >= 0 {
		t.Error("unused initializer kept")
	}
	if w := weight(t, m, "k"); !reflect.DeepEqual(values(w), []float64{2}) {
		t.Errorf("constant k = %v", values(w))
	}
	if w := weight(t, m, "w"); !reflect.DeepEqual(w.Shape, []int64{3, 4}) {
		t.Errorf("w shape %v", w.Shape)
	}
	g := &m.Nodes[1]
	if g.Name != "Gemm_2" {
		t.Errorf("generated name %q", g.Name)
	}
	if a := attr(t, g, "alpha"); a.Kind != model.AttrFloat || a.Float != 0.5 {
		t.Errorf("alpha %+v", a)
	}
	if a := attr(t, g, "transB"); a.Kind != model.AttrInt || a.Int != 1 {
		t.Errorf("transB %+v", a)
	}
	if a := attr(t, g, "dummy_ints"); a.Kind != model.AttrInts || !reflect.DeepEqual(a.Ints, []int64{1, 2}) {
		t.Errorf("ints %+v", a)
	}
	if a := attr(t, g, "dummy_floats"); a.Kind != model.AttrFloats || !reflect.DeepEqual(a.Floats, []float64{1.5}) {
		t.Errorf("floats %+v", a)
	}
	if a := attr(t, g, "dummy_s"); a.Kind != model.AttrString || a.Str != "hi" {
		t.Errorf("s %+v", a)
	}
	if a := attr(t, g, "dummy_ss"); a.Kind != model.AttrStrings || !reflect.DeepEqual(a.Strings, []string{"a"}) {
		t.Errorf("ss %+v", a)
	}
	if v, _ := m.MetaValue("producer"); v != "test" {
		t.Errorf("producer %q", v)
	}
	if v, _ := m.MetaValue("onnx.opset_import"); v != "ai.onnx:17" {
		t.Errorf("opset meta %q", v)
	}
}

func TestImportTopoSort(t *testing.T) {
	m := graph{
		nodes: []*onnxpb.NodeProto{
			nd("Neg", "b", []string{"a"}, []string{"y"}),
			nd("Relu", "a", []string{"x"}, []string{"a"}),
		},
		inputs:  []*onnxpb.ValueInfoProto{vi("x", tFloat, 2)},
		outputs: []*onnxpb.ValueInfoProto{vi("y", tFloat, 2)},
	}.imp(t)
	if got, want := dump(m), []string{"Relu(x)->a", "Neg(a)->y"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestImportIdentityRemoval(t *testing.T) {
	in := []*onnxpb.ValueInfoProto{vi("x", tFloat, 2)}
	for _, tc := range []struct {
		name    string
		nodes   []*onnxpb.NodeProto
		outputs []string
		want    []string
	}{
		{"chain to output", []*onnxpb.NodeProto{
			nd("Relu", "r", []string{"x"}, []string{"a"}),
			nd("Identity", "i1", []string{"a"}, []string{"b"}),
			nd("Identity", "i2", []string{"b"}, []string{"y"}),
		}, []string{"y"}, []string{"Relu(x)->y"}},
		{"middle", []*onnxpb.NodeProto{
			nd("Relu", "r", []string{"x"}, []string{"a"}),
			nd("Identity", "i", []string{"a"}, []string{"b"}),
			nd("Neg", "n", []string{"b"}, []string{"y"}),
			nd("Abs", "n2", []string{"a"}, []string{"z"}),
		}, []string{"y", "z"}, []string{"Relu(x)->a", "Neg(a)->y", "Abs(a)->z"}},
		{"output renames producer used elsewhere", []*onnxpb.NodeProto{
			nd("Relu", "r", []string{"x"}, []string{"a"}),
			nd("Neg", "n", []string{"a"}, []string{"z"}),
			nd("Identity", "i", []string{"a"}, []string{"y"}),
		}, []string{"y", "z"}, []string{"Relu(x)->y", "Neg(y)->z"}},
		{"input to output kept", []*onnxpb.NodeProto{
			nd("Identity", "i", []string{"x"}, []string{"y"}),
		}, []string{"y"}, []string{"Identity(x)->y"}},
		{"output to output kept", []*onnxpb.NodeProto{
			nd("Relu", "r", []string{"x"}, []string{"a"}),
			nd("Identity", "i", []string{"a"}, []string{"y"}),
		}, []string{"a", "y"}, []string{"Relu(x)->a", "Identity(a)->y"}},
		{"dropout", []*onnxpb.NodeProto{
			nd("Dropout", "d", []string{"x", "", ""}, []string{"a", ""}, aFloat("ratio", 0.5)),
			nd("Relu", "r", []string{"a"}, []string{"y"}),
		}, []string{"y"}, []string{"Relu(x)->y"}},
		{"dropout mask used", []*onnxpb.NodeProto{
			nd("Dropout", "d", []string{"x"}, []string{"a", "mask"}),
			nd("Relu", "r", []string{"a"}, []string{"y"}),
		}, []string{"y", "mask"}, []string{"Dropout(x)->a,mask", "Relu(a)->y"}},
		{"dropout mask unused", []*onnxpb.NodeProto{
			nd("Dropout", "d", []string{"x"}, []string{"a", "mask"}),
			nd("Relu", "r", []string{"a"}, []string{"y"}),
		}, []string{"y"}, []string{"Relu(x)->y"}},
		{"constant output", []*onnxpb.NodeProto{
			nd("Constant", "c", nil, []string{"y"}, aTensor("value", f32s("", nil, 3))),
		}, []string{"y"}, []string{"Identity(y_value)->y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outs []*onnxpb.ValueInfoProto
			for _, o := range tc.outputs {
				outs = append(outs, vi(o, tFloat, 2))
			}
			m := graph{opset: 13, nodes: tc.nodes, inputs: in, outputs: outs}.imp(t)
			if got := dump(m); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestImportNormalise checks the conversions of older opsets to the latest
// semantics.
func TestImportNormalise(t *testing.T) {
	x := []*onnxpb.ValueInfoProto{vi("x", tFloat, 2, 3, 4)}
	y := []*onnxpb.ValueInfoProto{vi("y", tFloat)}
	type check func(t *testing.T, m *model.Model)
	ints := func(name string, want ...int64) check {
		return func(t *testing.T, m *model.Model) {
			w := weight(t, m, name)
			if w.DType != rt.I64 {
				t.Errorf("%s dtype %s", name, w.DType)
			}
			var got []int64
			for _, v := range values(w) {
				got = append(got, int64(v))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
	floats := func(name string, dt rt.DType, want ...float64) check {
		return func(t *testing.T, m *model.Model) {
			w := weight(t, m, name)
			if w.DType != dt || !reflect.DeepEqual(values(w), want) {
				t.Errorf("%s = %s %v, want %s %v", name, w.DType, values(w), dt, want)
			}
		}
	}
	attrIs := func(node int, name string, want any) check {
		return func(t *testing.T, m *model.Model) {
			a := attr(t, &m.Nodes[node], name)
			var got any
			switch a.Kind {
			case model.AttrInt:
				got = a.Int
			case model.AttrString:
				got = a.Str
			case model.AttrInts:
				got = a.Ints
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("node %d %s = %v, want %v", node, name, got, want)
			}
		}
	}
	noAttr := func(node int, name string) check {
		return func(t *testing.T, m *model.Model) {
			if _, ok := m.Nodes[node].Attr(name); ok {
				t.Errorf("node %d still has %q", node, name)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		opset  int64
		nodes  []*onnxpb.NodeProto
		outs   []*onnxpb.ValueInfoProto
		want   []string
		checks []check
	}{
		{"Split-11 split attr", 11, []*onnxpb.NodeProto{nd("Split", "s", []string{"x"}, []string{"y", "z"}, aInt("axis", 1), aInts("split", 1, 2))},
			[]*onnxpb.ValueInfoProto{vi("y", tFloat), vi("z", tFloat)}, []string{"Split(x,s_split)->y,z"}, []check{ints("s_split", 1, 2), noAttr(0, "split")}},
		{"Split-13 equal", 13, []*onnxpb.NodeProto{nd("Split", "s", []string{"x"}, []string{"y", "z"})},
			[]*onnxpb.ValueInfoProto{vi("y", tFloat), vi("z", tFloat)}, []string{"Split(x)->y,z"}, []check{attrIs(0, "num_outputs", int64(2))}},
		{"Squeeze-11", 11, []*onnxpb.NodeProto{nd("Squeeze", "s", []string{"x"}, []string{"y"}, aInts("axes", 0))},
			y, []string{"Squeeze(x,s_axes)->y"}, []check{ints("s_axes", 0)}},
		{"Unsqueeze-1", 1, []*onnxpb.NodeProto{nd("Unsqueeze", "s", []string{"x"}, []string{"y"}, aInts("axes", 0, 4))},
			y, []string{"Unsqueeze(x,s_axes)->y"}, []check{ints("s_axes", 0, 4)}},
		{"ReduceSum-11", 11, []*onnxpb.NodeProto{nd("ReduceSum", "r", []string{"x"}, []string{"y"}, aInts("axes", 1), aInt("keepdims", 0))},
			y, []string{"ReduceSum(x,r_axes)->y"}, []check{ints("r_axes", 1), attrIs(0, "keepdims", int64(0))}},
		{"ReduceMean-17", 17, []*onnxpb.NodeProto{nd("ReduceMean", "r", []string{"x"}, []string{"y"}, aInts("axes", -1))},
			y, []string{"ReduceMean(x,r_axes)->y"}, []check{ints("r_axes", -1)}},
		{"ReduceMean-18 untouched", 18, []*onnxpb.NodeProto{nd("ReduceMean", "r", []string{"x"}, []string{"y"})},
			y, []string{"ReduceMean(x)->y"}, nil},
		{"Reshape-1", 1, []*onnxpb.NodeProto{nd("Reshape", "r", []string{"x"}, []string{"y"}, aInts("shape", 6, 4))},
			y, []string{"Reshape(x,r_shape)->y"}, []check{ints("r_shape", 6, 4)}},
		{"Slice-9", 9, []*onnxpb.NodeProto{nd("Slice", "s", []string{"x"}, []string{"y"}, aInts("starts", 0), aInts("ends", 1), aInts("axes", 2))},
			y, []string{"Slice(x,s_starts,s_ends,s_axes)->y"}, []check{ints("s_starts", 0), ints("s_ends", 1), ints("s_axes", 2)}},
		{"Slice-9 no axes", 9, []*onnxpb.NodeProto{nd("Slice", "s", []string{"x"}, []string{"y"}, aInts("starts", 0), aInts("ends", 1))},
			y, []string{"Slice(x,s_starts,s_ends)->y"}, nil},
		{"TopK-1", 1, []*onnxpb.NodeProto{nd("TopK", "k", []string{"x"}, []string{"y", "i"}, aInt("k", 3))},
			[]*onnxpb.ValueInfoProto{vi("y", tFloat), vi("i", tInt64)}, []string{"TopK(x,k_k)->y,i"}, []check{ints("k_k", 3)}},
		{"Clip-6 typed", 6, []*onnxpb.NodeProto{nd("Clip", "c", []string{"x"}, []string{"y"}, aFloat("min", -1), aFloat("max", 1))},
			y, []string{"Clip(x,c_min,c_max)->y"}, []check{floats("c_min", rt.F32, -1), floats("c_max", rt.F32, 1)}},
		{"Clip-6 max only", 6, []*onnxpb.NodeProto{nd("Clip", "c", []string{"x"}, []string{"y"}, aFloat("max", 6))},
			y, []string{"Clip(x,_,c_max)->y"}, nil},
		{"Clip-6 untyped uses CastLike", 6, []*onnxpb.NodeProto{
			nd("Relu", "r", []string{"x"}, []string{"a"}),
			nd("Clip", "c", []string{"a"}, []string{"y"}, aFloat("min", 0))},
			y, []string{"Relu(x)->a", "CastLike(c_min_f32,a)->c_min", "Clip(a,c_min)->y"}, []check{floats("c_min_f32", rt.F32, 0)}},
		{"Pad-2", 2, []*onnxpb.NodeProto{nd("Pad", "p", []string{"x"}, []string{"y"}, aInts("pads", 0, 0, 1, 0, 0, 1), aFloat("value", 1.5), aStr("mode", "constant"))},
			y, []string{"Pad(x,p_pads,p_value)->y"}, []check{ints("p_pads", 0, 0, 1, 0, 0, 1), floats("p_value", rt.F32, 1.5), attrIs(0, "mode", "constant")}},
		{"Pad-1 paddings", 1, []*onnxpb.NodeProto{nd("Pad", "p", []string{"x"}, []string{"y"}, aInts("paddings", 0, 0, 1, 0, 0, 1))},
			y, []string{"Pad(x,p_pads)->y"}, nil},
		{"Upsample-7", 7, []*onnxpb.NodeProto{nd("Upsample", "u", []string{"x"}, []string{"y"}, aFloats("scales", 1, 1, 2), aStr("mode", "nearest"))},
			y, []string{"Resize(x,_,u_scales)->y"}, []check{floats("u_scales", rt.F32, 1, 1, 2),
				attrIs(0, "coordinate_transformation_mode", "asymmetric"), attrIs(0, "nearest_mode", "floor"), attrIs(0, "mode", "nearest")}},
		{"Upsample-9 linear", 9, []*onnxpb.NodeProto{
			nd("Constant", "c", nil, []string{"s"}, aTensor("value", f32s("", []int64{3}, 1, 2, 2))),
			nd("Upsample", "u", []string{"x", "s"}, []string{"y"}, aStr("mode", "linear"))},
			y, []string{"Resize(x,_,s)->y"}, []check{attrIs(0, "mode", "linear"), noAttr(0, "nearest_mode")}},
		{"Resize-10", 10, []*onnxpb.NodeProto{
			nd("Constant", "c", nil, []string{"s"}, aTensor("value", f32s("", []int64{3}, 1, 2, 2))),
			nd("Resize", "u", []string{"x", "s"}, []string{"y"})},
			y, []string{"Resize(x,_,s)->y"}, []check{attrIs(0, "coordinate_transformation_mode", "asymmetric")}},
		{"Softmax-11 last axis", 11, []*onnxpb.NodeProto{nd("Softmax", "s", []string{"x"}, []string{"y"}, aInt("axis", 2))},
			y, []string{"Softmax(x)->y"}, []check{attrIs(0, "axis", int64(-1))}},
		{"Softmax-11 default axis", 11, []*onnxpb.NodeProto{nd("Softmax", "s", []string{"x"}, []string{"y"})},
			y, []string{"Flatten(x)->s_flat", "Shape(x)->s_shape", "Softmax(s_flat)->s_2d", "Reshape(s_2d,s_shape)->y"},
			[]check{attrIs(0, "axis", int64(1)), attrIs(2, "axis", int64(1))}},
		{"LogSoftmax-13 untouched", 13, []*onnxpb.NodeProto{nd("LogSoftmax", "s", []string{"x"}, []string{"y"})},
			y, []string{"LogSoftmax(x)->y"}, []check{noAttr(0, "axis")}},
		{"Cast-1 string", 1, []*onnxpb.NodeProto{nd("Cast", "c", []string{"x"}, []string{"y"}, aStr("to", "INT64"))},
			y, []string{"Cast(x)->y"}, []check{attrIs(0, "to", int64(7))}},
		{"Concat-1 default axis", 1, []*onnxpb.NodeProto{nd("Concat", "c", []string{"x", "x"}, []string{"y"})},
			y, []string{"Concat(x,x)->y"}, []check{attrIs(0, "axis", int64(1))}},
		{"BatchNormalization-6", 6, []*onnxpb.NodeProto{nd("BatchNormalization", "b", []string{"x", "sc", "sc", "sc", "sc"}, []string{"y", "m", "v", "sm", "sv"},
			aInt("spatial", 1), aInt("is_test", 1), aFloat("epsilon", 1e-3))},
			y, []string{"BatchNormalization(x,sc,sc,sc,sc)->y"}, []check{noAttr(0, "spatial"), noAttr(0, "is_test")}},
		{"Add-6 broadcast axis", 6, []*onnxpb.NodeProto{nd("Add", "a", []string{"x", "sc"}, []string{"y"}, aInt("broadcast", 1), aInt("axis", 1))},
			y, []string{"Unsqueeze(sc,a_axes)->sc_bcast", "Add(x,sc_bcast)->y"}, []check{ints("a_axes", 1), noAttr(1, "axis"), noAttr(1, "broadcast")}},
		{"Add-1 consumed_inputs", 1, []*onnxpb.NodeProto{nd("Relu", "r", []string{"x"}, []string{"y"}, aInts("consumed_inputs", 0))},
			y, []string{"Relu(x)->y"}, []check{noAttr(0, "consumed_inputs")}},
		{"Scatter-9", 9, []*onnxpb.NodeProto{nd("Scatter", "s", []string{"x", "idx", "x"}, []string{"y"})},
			y, []string{"ScatterElements(x,idx,x)->y"}, nil},
		{"ConstantOfShape value", 21, []*onnxpb.NodeProto{nd("ConstantOfShape", "c", []string{"idx"}, []string{"y"},
			aTensor("value", &onnxpb.TensorProto{DataType: int32(tInt64), Dims: []int64{1}, Int64Data: []int64{7}}))},
			y, []string{"ConstantOfShape(idx,c_value)->y"}, []check{ints("c_value", 7)}},
		{"ConstantOfShape default", 21, []*onnxpb.NodeProto{nd("ConstantOfShape", "c", []string{"idx"}, []string{"y"})},
			y, []string{"ConstantOfShape(idx,c_value)->y"}, []check{floats("c_value", rt.F32, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph{opset: tc.opset, nodes: tc.nodes, inputs: x, outputs: tc.outs,
				inits: []*onnxpb.TensorProto{f32s("sc", []int64{3}, 1, 2, 3),
					{Name: "idx", DataType: int32(tInt64), Dims: []int64{2}, Int64Data: []int64{0, 0}}}}
			m := g.imp(t)
			if got := dump(m); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, c := range tc.checks {
				c(t, m)
			}
		})
	}
}

func TestImportErrors(t *testing.T) {
	x := []*onnxpb.ValueInfoProto{vi("x", tFloat, 2)}
	y := []*onnxpb.ValueInfoProto{vi("y", tFloat, 2)}
	for _, tc := range []struct {
		name        string
		g           graph
		data        []byte
		unsupported bool
		msgs        []string
	}{
		{name: "protobuf", data: []byte{0xff, 0xff, 0xff}, msgs: []string{"protobuf"}},
		{name: "no graph", data: []byte{8, 7}, msgs: []string{"no graph"}},
		{name: "cycle", g: graph{nodes: []*onnxpb.NodeProto{
			nd("Relu", "r1", []string{"b"}, []string{"a"}),
			nd("Relu", "r2", []string{"a"}, []string{"b"}),
			nd("Add", "add", []string{"x", "b"}, []string{"y"}),
		}, inputs: x, outputs: y}, msgs: []string{"cycle", `"r1"`, `"r2"`, `"add"`}},
		{name: "dangling", g: graph{nodes: []*onnxpb.NodeProto{nd("Add", "add", []string{"x", "nowhere"}, []string{"y"})}, inputs: x, outputs: y},
			msgs: []string{`"add"`, `"nowhere"`}},
		{name: "output not produced", g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"x"}, []string{"z"})}, inputs: x, outputs: y},
			msgs: []string{`graph output "y"`}},
		{name: "two producers", g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"x"}, []string{"y"}), nd("Neg", "n", []string{"x"}, []string{"y"})}, inputs: x, outputs: y},
			msgs: []string{`"r"`, `"n"`}},
		{name: "type mismatch", g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"w"}, []string{"y"})},
			inputs: []*onnxpb.ValueInfoProto{vi("w", tInt64, 1)}, outputs: y, inits: []*onnxpb.TensorProto{f32s("w", []int64{1}, 1)}},
			msgs: []string{"type mismatch", `"w"`, "INT64", "FLOAT"}},
		{name: "bad initializer", g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"w"}, []string{"y"})},
			outputs: y, inits: []*onnxpb.TensorProto{f32s("w", []int64{2}, 1)}},
			msgs: []string{`"w"`, "want 2"}},
		{name: "missing external", g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"w"}, []string{"y"})},
			outputs: y, inits: []*onnxpb.TensorProto{external("weights.bin")}},
			msgs: []string{"weights.bin"}},
		{name: "domains and subgraphs", unsupported: true, g: graph{nodes: []*onnxpb.NodeProto{
			{OpType: "FusedGemm", Name: "fg", Domain: "com.microsoft", Input: []string{"x"}, Output: []string{"a"}},
			nd("If", "if", []string{"a"}, []string{"b"}, &onnxpb.AttributeProto{Name: "then_branch", Type: onnxpb.AttributeProto_GRAPH, G: &onnxpb.GraphProto{}}),
			nd("Relu", "r", []string{"b"}, []string{"y"}),
		}, inputs: x, outputs: y}, msgs: []string{`"fg" (com.microsoft/FusedGemm, opset 1)`, "domain", `"if" (If, opset 21)`, "subgraphs (If/Loop/Scan) are not supported"}},
		{name: "sequence input", unsupported: true, g: graph{nodes: []*onnxpb.NodeProto{nd("Relu", "r", []string{"s"}, []string{"y"})},
			inputs:  []*onnxpb.ValueInfoProto{{Name: "s", Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{SequenceType: &onnxpb.TypeProto_Sequence{}}}}},
			outputs: y}, msgs: []string{`graph input "s" is a sequence`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data
			if data == nil {
				p := tc.g.proto()
				if tc.name == "domains and subgraphs" {
					p.OpsetImport = append(p.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: "com.microsoft", Version: 1})
				}
				data, _ = proto.Marshal(p)
			}
			_, err := Import(data, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("unsupported = %v, want %v: %v", errors.Is(err, ErrUnsupported), tc.unsupported, err)
			}
			for _, s := range tc.msgs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %s", err, s)
				}
			}
		})
	}
}

func TestImportSupported(t *testing.T) {
	data := graph{opset: 7, nodes: []*onnxpb.NodeProto{
		nd("Relu", "r", []string{"x"}, []string{"a"}),
		nd("Upsample", "up", []string{"a"}, []string{"b"}, aFloats("scales", 1, 2)),
		nd("Erf", "", []string{"b"}, []string{"c"}),
		nd("Sin", "s", []string{"c"}, []string{"y"}),
	}, inputs: []*onnxpb.ValueInfoProto{vi("x", tFloat, 2, 2)}, outputs: []*onnxpb.ValueInfoProto{vi("y", tFloat)}}.bytes(t)
	_, err := Import(data, Options{Supported: func(op string) bool { return op == "Relu" || op == "Sin" }})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v, want *UnsupportedError", err)
	}
	want := []Unsupported{
		{Node: "up", Op: "Resize", Opset: 7, Reason: "operator not supported"},
		{Node: "Erf_2", Op: "Erf", Opset: 7, Reason: "operator not supported"},
	}
	if !reflect.DeepEqual(ue.Items, want) {
		t.Fatalf("items %+v\nwant %+v", ue.Items, want)
	}
	if _, err := Import(data, Options{Supported: func(string) bool { return true }}); err != nil {
		t.Fatal(err)
	}
}
