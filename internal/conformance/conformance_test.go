package conformance

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

func loadAll(t *testing.T) []Case {
	t.Helper()
	dir, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestTable checks the table's integrity: every case loads, has inputs
// and outputs, states a tolerance, has non-zero float inputs, and the
// expected outputs are finite.
func TestTable(t *testing.T) {
	cs := loadAll(t)
	if len(cs) < 150 {
		t.Errorf("only %d cases", len(cs))
	}
	ops := map[string]int{}
	for _, c := range cs {
		ops[c.Op]++
		if len(c.Inputs) == 0 {
			t.Errorf("%s: no inputs", c.Name)
		}
		if c.Inputs[0].Kind != KindInput && c.Op != "Concat" {
			t.Errorf("%s: first input is not a runtime input", c.Name)
		}
		if c.Tol.Class == "exact" && (c.Tol.RTol != 0 || c.Tol.ATol != 0) {
			t.Errorf("%s: exact class with tolerance %+v", c.Name, c.Tol)
		}
		for _, in := range c.Inputs {
			if in.Kind == KindAbsent || !in.DType.IsFloat() || in.Tensor.Len() < 2 {
				continue
			}
			for i, v := range in.Tensor.Float64s() {
				if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s: input %s[%d] = %v", c.Name, in.Name, i, v)
					break
				}
			}
		}
		for _, o := range c.Outputs {
			if o.DType.IsFloat() {
				for i, v := range o.Tensor.Float64s() {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Errorf("%s: output %s[%d] = %v", c.Name, o.Name, i, v)
						break
					}
				}
			}
		}
	}
	for _, op := range []string{"Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Relu",
		"LeakyRelu", "Elu", "Sigmoid", "Tanh", "Gelu", "Silu", "Exp", "Log", "Sqrt", "Neg", "Abs", "Clip",
		"Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "Conv", "MaxPool", "AveragePool",
		"GlobalAveragePool", "Reshape", "Flatten", "Transpose", "Concat", "Slice", "Gather", "ReduceSum",
		"ReduceMean", "ReduceMax"} {
		if ops[op] == 0 {
			t.Errorf("no case for %s", op)
		}
	}
	t.Logf("%d cases over %d ops", len(cs), len(ops))
}

func TestBuildAll(t *testing.T) {
	for _, c := range loadAll(t) {
		m, err := Build(&c)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if len(m.Nodes) != 1 || m.Nodes[0].Op != c.Op {
			t.Errorf("%s: model has %d nodes", c.Name, len(m.Nodes))
		}
		nin := 0
		for _, in := range c.Inputs {
			if in.Kind == KindInput {
				nin++
			}
		}
		if len(m.Inputs()) != nin || len(m.Outputs()) != len(c.Outputs) {
			t.Errorf("%s: %d inputs %d outputs", c.Name, len(m.Inputs()), len(m.Outputs()))
		}
	}
}

func TestLoadAttrsAndAbsent(t *testing.T) {
	dir, _ := DefaultDir()
	c, err := LoadCase(filepath.Join(dir, "gemm_transab_alpha_beta_f32"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"alpha": 0.5, "beta": 2.0, "transA": int64(1), "transB": int64(1)}
	for _, a := range c.Attrs {
		if want[a.Name] != a.Value {
			t.Errorf("attr %s = %#v, want %#v", a.Name, a.Value, want[a.Name])
		}
	}
	c, err = LoadCase(filepath.Join(dir, "clip_max_only_f32"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Inputs) != 3 || c.Inputs[1].Kind != KindAbsent || c.Inputs[1].Tensor != nil {
		t.Errorf("clip inputs: %+v", c.Inputs)
	}
	c, err = LoadCase(filepath.Join(dir, "conv_group2_f32"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Attrs {
		if a.Name == "pads" && !slices.Equal(a.Value.([]int64), []int64{1, 1, 1, 1}) {
			t.Errorf("pads = %v", a.Value)
		}
	}
}

func writeCase(t *testing.T, json string, files map[string]*rt.Tensor) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "case.json"), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tt := range files {
		if err := npy.WriteFile(filepath.Join(dir, name), tt); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadErrors(t *testing.T) {
	x := rt.FromFloat32([]float32{1, 2}, 2)
	files := map[string]*rt.Tensor{"in_0.npy": x, "out_0.npy": x}
	good := `{"version": 1, "name": "c", "op": "Neg", "domain": "", "dtype": "f32", "attrs": [],
 "inputs": [{"name": "x", "kind": "input", "file": "in_0.npy", "dtype": "f32", "shape": [2]}],
 "outputs": [{"name": "y", "file": "out_0.npy", "dtype": "f32", "shape": [2]}],
 "tolerance": {"rtol": 0, "atol": 0}, "note": ""}`
	if _, err := LoadCase(writeCase(t, good, files)); err != nil {
		t.Fatalf("good case: %v", err)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"version": 1`, `"version": 2`, "version"},
		{`"name": "c"`, `"name": "d"`, "directory"},
		{`"rtol": 0, `, ``, "rtol and atol"},
		{`"shape": [2]}],
 "outputs"`, `"shape": [3]}],
 "outputs"`, "holds f32[2]"},
		{`"kind": "input"`, `"kind": "const"`, "unknown kind"},
		{`"attrs": []`, `"attrs": [{"name": "a", "type": "int", "value": 1.5}]`, "attr"},
		{`"attrs": []`, `"attrs": [{"name": "a", "type": "tensor", "value": 1}]`, "unknown attribute type"},
		{`"note": ""`, `"note": "", "extra": 1`, "unknown field"},
		{`"file": "in_0.npy"`, `"file": "../in_0.npy"`, "bad file name"},
		{`"name": "y"`, `"name": "x"`, "used twice"},
	} {
		js := strings.Replace(good, c.old, c.new, 1)
		if js == good {
			t.Fatalf("replacement %q did not apply", c.old)
		}
		_, err := LoadCase(writeCase(t, js, files))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q: err = %v, want %q", c.old, c.new, err, c.want)
		}
	}
}

func TestCompare(t *testing.T) {
	want := rt.FromFloat32([]float32{1, -2, 100, 0, 5, 6}, 2, 3)
	tol := Tolerance{RTol: 1e-3, ATol: 1e-4}
	same := rt.FromFloat32([]float32{1, -2, 100, 0, 5, 6}, 2, 3)
	if err := Compare(same, want, tol); err != nil {
		t.Fatal(err)
	}
	// Within: 100 +- 0.1001 allowed; 0 +- 1e-4.
	near := rt.FromFloat32([]float32{1.0005, -2.001, 100.1, 9e-5, 5, 6}, 2, 3)
	if err := Compare(near, want, tol); err != nil {
		t.Fatal(err)
	}
	// Two bad elements; [0,1] is worse relative to its allowance.
	far := rt.FromFloat32([]float32{1, -2.5, 100.5, 0, 5, 6}, 2, 3)
	err := Compare(far, want, tol)
	var m *Mismatch
	if !errors.As(err, &m) {
		t.Fatalf("err = %v", err)
	}
	if m.Bad != 2 || m.Total != 6 || !slices.Equal(m.Index, []int{0, 1}) || m.Got != -2.5 || m.Want != -2 {
		t.Errorf("mismatch %+v", m)
	}
	if !strings.Contains(m.Error(), "worst at [0 1]: got -2.5, want -2") {
		t.Errorf("message %q", m.Error())
	}
	// Exact tolerance: any difference fails, the largest is reported.
	exact := Tolerance{}
	err = Compare(rt.FromFloat32([]float32{1, -2, 100, 1e-30, 5, 7}, 2, 3), want, exact)
	if !errors.As(err, &m) || !slices.Equal(m.Index, []int{1, 2}) || m.Bad != 2 {
		t.Errorf("exact: %v", err)
	}
	// Shape, dtype and special values.
	if err := Compare(rt.FromFloat32([]float32{1, -2, 100, 0, 5, 6}, 3, 2), want, tol); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("shape: %v", err)
	}
	if err := Compare(rt.FromFloat64(rt.F64, []float64{1, -2, 100, 0, 5, 6}, 2, 3), want, tol); err == nil || !strings.Contains(err.Error(), "dtype") {
		t.Errorf("dtype: %v", err)
	}
	nan := rt.FromFloat32([]float32{float32(math.NaN())}, 1)
	inf := rt.FromFloat32([]float32{float32(math.Inf(1))}, 1)
	one := rt.FromFloat32([]float32{1}, 1)
	if Compare(nan, nan, tol) != nil || Compare(inf, inf, tol) != nil {
		t.Error("NaN/Inf should match themselves")
	}
	if Compare(nan, one, tol) == nil || Compare(one, nan, tol) == nil || Compare(inf, one, Tolerance{RTol: 1e300}) == nil {
		t.Error("NaN/Inf mismatch accepted")
	}
	if Compare(nil, want, tol) == nil {
		t.Error("nil accepted")
	}
	// Scalars.
	s1, s2 := rt.FromFloat32([]float32{2}), rt.FromFloat32([]float32{3})
	if err := Compare(s1, s2, tol); !errors.As(err, &m) || len(m.Index) != 0 {
		t.Errorf("scalar: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	dir, _ := DefaultDir()
	c, err := LoadCase(filepath.Join(dir, "slice_reverse_f32"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Describe()
	if !strings.Contains(d, "Slice(x:f32[4 6], starts:i64[1] const=[-1]") || !strings.Contains(d, "-> y:f32[4 6]") {
		t.Errorf("Describe = %s", d)
	}
}
