package onnx_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/internal/onnxrt"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/rt"
)

// exportCase is a model built with model.Builder, and its input shapes.
type exportCase struct {
	name   string
	inputs map[string][]int
	dtype  rt.DType
	build  func(b *model.Builder, w func(name string, shape ...int) string)
	// ortSkip says why onnxruntime cannot run the case, if it cannot.
	ortSkip string
}

func i64w(b *model.Builder, name string, v ...int64) string {
	return b.Weight(name, rt.I64, []int64{int64(len(v))}, v)
}

var exportCases = []exportCase{
	{name: "mlp", inputs: map[string][]int{"x": {4, 6}}, build: func(b *model.Builder, w func(string, ...int) string) {
		h := b.Op("Gemm", []string{"x", w("w1", 10, 6), w("b1", 10)}, model.Attrs{"transB": 1, "alpha": 0.5})
		h = b.Op("BatchNormalization", []string{h, w("g", 10), w("beta", 10), w("rm", 10), b.Weight("rv", rt.F32, []int64{10}, []float32{1, 2, 1, 3, 1, 1, 0.5, 1, 1, 2})}, model.Attrs{"epsilon": 1e-3})
		h = b.Op("Relu", []string{h}, nil)
		h = b.Op("Dropout", []string{h, b.Weight("ratio", rt.F32, []int64{}, []float32{0.3})}, nil)
		b.Node("logits", "MatMul", []string{h, w("w2", 10, 3)}, []string{"logits"}, nil)
		b.Node("lsm", "LogSoftmax", []string{"logits"}, []string{"logp"}, model.Attrs{"axis": 1})
		b.Node("am", "ArgMax", []string{"logits"}, []string{"class"}, model.Attrs{"axis": 1, "keepdims": 0})
		b.Output("logp", "class")
	}},
	{name: "cnn", inputs: map[string][]int{"x": {2, 1, 10, 10}}, build: func(b *model.Builder, w func(string, ...int) string) {
		c := b.Op("Conv", []string{"x", w("cw", 4, 1, 3, 3), w("cb", 4)}, model.Attrs{"pads": []int64{1, 1, 1, 1}})
		c = b.Op("MaxPool", []string{b.Op("Relu", []string{c}, nil)}, model.Attrs{"kernel_shape": []int64{2, 2}, "strides": []int64{2, 2}})
		c = b.Op("Conv", []string{c, w("dw", 6, 2, 3, 3)}, model.Attrs{"group": 2, "strides": []int64{2, 1}})
		c = b.Op("AveragePool", []string{c}, model.Attrs{"kernel_shape": []int64{2, 2}, "pads": []int64{1, 0, 0, 1}, "count_include_pad": 1})
		f := b.Op("Flatten", []string{c}, nil)
		b.Node("fc", "Gemm", []string{f, w("fw", 5, 36), w("fb", 5)}, []string{"y"}, model.Attrs{"transB": 1})
		b.Node("sm", "Softmax", []string{"y"}, []string{"p"}, model.Attrs{"axis": -1})
		b.Output("p")
	}},
	{name: "reduce", inputs: map[string][]int{"x": {3, 4, 5}}, build: func(b *model.Builder, w func(string, ...int) string) {
		b.Node("mean", "ReduceMean", []string{"x", i64w(b, "ax1", 1)}, []string{"mean"}, model.Attrs{"keepdims": 0})
		b.Node("max", "ReduceMax", []string{"x", i64w(b, "axl", -1, 0)}, []string{"max"}, nil)
		b.Node("ss", "ReduceSumSquare", []string{"x"}, []string{"ss"}, model.Attrs{"keepdims": 0})
		b.Node("sum", "ReduceSum", []string{"x", i64w(b, "ax2", 2)}, []string{"sum"}, nil)
		b.Node("l2", "ReduceL2", []string{"x"}, []string{"l2"}, model.Attrs{"noop_with_empty_axes": 1})
		b.Node("lse", "ReduceLogSumExp", []string{"x", "ax1"}, []string{"lse"}, model.Attrs{"keepdims": 1})
		b.Output("mean", "max", "ss", "sum", "l2", "lse")
	}},
	{name: "shapes", inputs: map[string][]int{"x": {2, 6, 3}}, build: func(b *model.Builder, w func(string, ...int) string) {
		p := b.OpN("Split", []string{"x"}, 2, model.Attrs{"axis": 1, "num_outputs": 2})
		q := b.OpN("Split", []string{"x", i64w(b, "sizes", 1, 2)}, 2, model.Attrs{"axis": 2})
		c := b.Op("Concat", []string{p[1], p[0]}, model.Attrs{"axis": 2})
		u := b.Op("Unsqueeze", []string{q[0], i64w(b, "uax", 0)}, nil)
		s := b.Op("Squeeze", []string{u, i64w(b, "sax", 0, 3)}, nil)
		t := b.Op("Transpose", []string{c}, model.Attrs{"perm": []int64{2, 0, 1}})
		r := b.Op("Reshape", []string{t, i64w(b, "rs", -1, 6)}, nil)
		g := b.Op("Gather", []string{r, b.Weight("gi", rt.I64, []int64{2}, []int64{3, 0})}, model.Attrs{"axis": 0})
		b.Node("out1", "Identity", []string{g}, []string{"g"}, nil)
		b.Node("out2", "Mul", []string{s, s}, []string{"s"}, nil)
		b.Node("out3", "Neg", []string{q[1]}, []string{"q"}, nil)
		b.Output("g", "s", "q")
	}},
	{name: "consts", inputs: map[string][]int{"x": {2, 3}}, build: func(b *model.Builder, w func(string, ...int) string) {
		c := b.Op("ConstantOfShape", []string{i64w(b, "cs", 2, 3), b.Weight("cv", rt.F32, []int64{1}, []float32{2.5})}, nil)
		y := b.Op("Add", []string{"x", c}, nil)
		p := b.Op("Pad", []string{"x", i64w(b, "pads", 1, 2), b.Weight("pv", rt.F32, []int64{}, []float32{-1}), i64w(b, "pax", -1)}, model.Attrs{"mode": "constant"})
		p = b.Op("Add", []string{p, b.Op("Pad", []string{y, i64w(b, "pads2", 0, 1, 0, 2)}, nil)}, nil)
		m := b.Op("Greater", []string{p, b.Weight("zero", rt.F32, []int64{}, []float32{0})}, nil)
		b.Node("where", "Where", []string{m, p, b.Op("Neg", []string{p}, nil)}, []string{"abs"}, nil)
		b.Node("cast", "Cast", []string{m}, []string{"mask"}, model.Attrs{"to": int64(6), "saturate": 1})
		b.Node("cl", "Clip", []string{"x", b.Weight("lo", rt.F32, []int64{}, []float32{-0.5}), b.Weight("hi", rt.F32, []int64{}, []float32{0.5})}, []string{"clip"}, nil)
		b.Output("abs", "mask", "clip")
	}},
	{name: "activations", inputs: map[string][]int{"x": {3, 8}}, build: func(b *model.Builder, w func(string, ...int) string) {
		b.Node("gelu", "Gelu", []string{"x"}, []string{"gelu"}, nil)
		b.Node("gelut", "Gelu", []string{"x"}, []string{"gelut"}, model.Attrs{"approximate": "tanh"})
		b.Node("mish", "Mish", []string{"x"}, []string{"mish"}, nil)
		b.Node("silu", "Silu", []string{"x"}, []string{"silu"}, nil)
		b.Node("hs", "HardSwish", []string{"x"}, []string{"hs"}, nil)
		b.Node("lr", "LeakyRelu", []string{"x"}, []string{"lr"}, model.Attrs{"alpha": 0.1})
		b.Node("ln", "LayerNormalization", []string{"x", w("lg", 8), w("lb", 8)}, []string{"ln"}, model.Attrs{"epsilon": 1e-5})
		b.Output("gelu", "gelut", "mish", "silu", "hs", "lr", "ln")
	}},
	{name: "gelu64", dtype: rt.F64, inputs: map[string][]int{"x": {2, 5}}, ortSkip: "onnxruntime has no double Erf kernel", build: func(b *model.Builder, w func(string, ...int) string) {
		b.Node("gelu", "Gelu", []string{"x"}, []string{"y"}, nil)
		b.Node("gelut", "Gelu", []string{"x"}, []string{"yt"}, model.Attrs{"approximate": "tanh"})
		b.Output("y", "yt")
	}},
	{name: "f64", dtype: rt.F64, inputs: map[string][]int{"x": {2, 5}}, build: func(b *model.Builder, w func(string, ...int) string) {
		h := b.Op("Tanh", []string{b.Op("MatMul", []string{"x", w("w", 5, 4)}, nil)}, nil)
		b.Node("sm", "Softmax", []string{h}, []string{"y"}, model.Attrs{"axis": 0})
		b.Node("sum", "ReduceMean", []string{"y", i64w(b, "ax", 0, 1)}, []string{"m"}, model.Attrs{"keepdims": 0})
		b.Output("y", "m")
	}},
}

func buildCase(t testing.TB, tc exportCase) *model.Model {
	t.Helper()
	dt := tc.dtype
	if dt == rt.InvalidDType {
		dt = rt.F32
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b := model.NewBuilder()
	for name, sh := range tc.inputs {
		s := make([]int64, len(sh))
		for i, d := range sh {
			s[i] = int64(d)
		}
		b.Input(name, dt, s...)
	}
	w := func(name string, shape ...int) string {
		n := rt.NumElements(shape)
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.5
		}
		s := make([]int64, len(shape))
		for i, d := range shape {
			s[i] = int64(d)
		}
		return b.Weight(name, dt, s, rt.FromFloat64(dt, v, len(v)).Data)
	}
	tc.build(b, w)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func caseInputs(m *model.Model, tc exportCase) map[string]*rt.Tensor {
	rng := rand.New(rand.NewPCG(8, 9))
	in := map[string]*rt.Tensor{}
	for _, i := range m.Inputs() {
		mt := m.Tensors[i]
		sh := tc.inputs[mt.Name]
		v := make([]float64, rt.NumElements(sh))
		for k := range v {
			v[k] = rng.NormFloat64()
		}
		in[mt.Name] = rt.FromFloat64(mt.DType, v, sh...)
	}
	return in
}

func runModel(t testing.TB, m *model.Model, in map[string]*rt.Tensor) map[string]*rt.Tensor {
	t.Helper()
	dev := cpu.NewDevice()
	defer dev.Close()
	s, err := engine.New(m, dev, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closeTo compares tensors: same dtype and shape; float values within
// rtol·max(1, |want|); others equal.
func closeTo(got, want *rt.Tensor, rtol float64) error {
	if got == nil {
		return errors.New("missing")
	}
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Errorf("%s%v, want %s%v", got.DType, got.Shape, want.DType, want.Shape)
	}
	for i := range want.Len() {
		g, w := got.Float64(i), want.Float64(i)
		if want.DType.IsFloat() {
			if math.Abs(g-w) > rtol*math.Max(1, math.Abs(w)) || math.IsNaN(g) != math.IsNaN(w) {
				return fmt.Errorf("element %d = %v, want %v", i, g, w)
			}
		} else if g != w {
			return fmt.Errorf("element %d = %v, want %v", i, g, w)
		}
	}
	return nil
}

// exportOpts declares the outputs' types and shapes, as the engine
// infers them.
func exportOpts(t testing.TB, m *model.Model) onnx.ExportOptions {
	t.Helper()
	outs, err := export.OutputTypes(m)
	if err != nil {
		t.Fatal(err)
	}
	return onnx.ExportOptions{Outputs: outs}
}

func tol(dt rt.DType) float64 {
	if dt == rt.F64 {
		return 1e-12
	}
	return 2e-6
}

// TestExportRoundTrip exports each case to ONNX, imports it back with
// this package's importer and checks that the engine computes the same
// outputs (decomposed activations within rounding).
func TestExportRoundTrip(t *testing.T) {
	for _, tc := range exportCases {
		t.Run(tc.name, func(t *testing.T) {
			m := buildCase(t, tc)
			b, err := onnx.ExportBytes(m, exportOpts(t, m))
			if err != nil {
				t.Fatal(err)
			}
			m2, err := onnx.Import(b, onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := m2.MetaValue("onnx.opset_import"); v != "ai.onnx:17" {
				t.Errorf("opset_import %q", v)
			}
			in := caseInputs(m, tc)
			want, got := runModel(t, m, in), runModel(t, m2, in)
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for name, w := range want {
				if err := closeTo(got[name], w, tol(w.DType)); err != nil {
					t.Errorf("output %s: %v", name, err)
				}
			}
		})
	}
}

// TestExportOpset17Forms checks the opset-17 forms Export writes for the
// operators whose signature changed after opset 17.
func TestExportOpset17Forms(t *testing.T) {
	find := func(tc string) map[string]string {
		for _, c := range exportCases {
			if c.name == tc {
				m := buildCase(t, c)
				mp, err := onnx.Export(m, exportOpts(t, m))
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for _, n := range mp.Graph.Node {
					var attrs []string
					for _, a := range n.Attribute {
						attrs = append(attrs, fmt.Sprintf("%s=%v%v%v%s", a.Name, a.I, a.Ints, a.F, a.S))
					}
					out[n.Name] = fmt.Sprintf("%s(%d inputs) %s", n.OpType, len(n.Input), strings.Join(attrs, " "))
				}
				return out
			}
		}
		t.Fatalf("no case %s", tc)
		return nil
	}
	red := find("reduce")
	for name, want := range map[string]string{
		"mean": "ReduceMean(1 inputs) keepdims=0[]0 axes=0[1]0",
		"max":  "ReduceMax(1 inputs) axes=0[-1 0]0",
		"ss":   "ReduceSumSquare(1 inputs) keepdims=0[]0",
		"sum":  "ReduceSum(2 inputs) ",
		"l2":   "Identity(1 inputs) ",
	} {
		if got := red[name]; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	sh := find("shapes")
	for name, got := range sh {
		if strings.HasPrefix(got, "Split") && strings.Contains(got, "num_outputs") {
			t.Errorf("%s: %q keeps num_outputs", name, got)
		}
	}
	cs := find("consts")
	for name, got := range cs {
		switch {
		case strings.HasPrefix(got, "ConstantOfShape") && !strings.HasPrefix(got, "ConstantOfShape(1 inputs) value="):
			t.Errorf("%s: %q, want the value as an attribute", name, got)
		case strings.HasPrefix(got, "Pad(4"):
			t.Errorf("%s: %q, want (data, pads, value) without axes", name, got)
		case strings.HasPrefix(got, "Cast") && strings.Contains(got, "saturate"):
			t.Errorf("%s: %q keeps saturate", name, got)
		}
	}
	act := find("activations")
	for _, op := range []string{"Gelu", "Mish", "Silu"} {
		for name, got := range act {
			if strings.HasPrefix(got, op+"(") {
				t.Errorf("%s: %q is not in opset 17", name, got)
			}
		}
	}
}

func TestExportUnsupported(t *testing.T) {
	b := model.NewBuilder()
	b.Input("x", rt.F32, 2, 4, 3)
	g := b.Op("GroupNormalization", []string{"x", b.Weight("s", rt.F32, []int64{4}, []float32{1, 1, 1, 1}), b.Weight("bb", rt.F32, []int64{4}, []float32{0, 0, 0, 0})}, model.Attrs{"num_groups": 2})
	p := b.Op("Pad", []string{g, i64w(b, "pads", 1, 1, 1, 1, 1, 1)}, model.Attrs{"mode": "wrap"})
	b.Node("r", "ReduceMean", []string{p, b.Op("Shape", []string{p}, nil)}, []string{"y"}, nil)
	b.Output("y")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = onnx.Export(m, onnx.ExportOptions{})
	var ue *onnx.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, onnx.ErrUnsupported) || len(ue.Items) != 4 {
		t.Fatalf("err = %v, want 4 unsupported items", err)
	}
	for _, want := range []string{"GroupNormalization is not in opset 17", `"wrap" needs opset 19`, "axes computed at run time",
		`type and shape of graph output "y" are unknown`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// TestExportChecker runs the ONNX checker (with full_check: shape and
// type inference) on every exported case.
func TestExportChecker(t *testing.T) {
	onnxrt.Python(t)
	dir := t.TempDir()
	var paths []string
	for _, tc := range exportCases {
		p := filepath.Join(dir, tc.name+".onnx")
		m := buildCase(t, tc)
		if err := onnx.ExportFile(p, m, exportOpts(t, m)); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	t.Log(onnxrt.Check(t, onnx.ExportOpset, onnx.ExportIRVersion, paths...))
}

// TestExportONNXRuntime runs every exported case in onnxruntime (through
// onnxruntime-node) and compares its outputs with vrun's.
func TestExportONNXRuntime(t *testing.T) {
	onnxrt.NodeModules(t)
	dir := t.TempDir()
	for _, tc := range exportCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ortSkip != "" {
				t.Skip(tc.ortSkip)
			}
			m := buildCase(t, tc)
			p := filepath.Join(dir, tc.name+".onnx")
			if err := onnx.ExportFile(p, m, exportOpts(t, m)); err != nil {
				t.Fatal(err)
			}
			in := caseInputs(m, tc)
			want := runModel(t, m, in)
			got := onnxrt.Run(t, p, in)
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for name, w := range want {
				if err := closeTo(got[name], w, 10*tol(w.DType)); err != nil {
					t.Errorf("output %s: %v", name, err)
				}
			}
		})
	}
}
