package vrun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// embedModel has a dynamic batch in two inputs: x [batch, 3] f32 and ids
// [batch, seq] i64; y = x·W [batch, 2] and e = E[ids] [batch, seq, 4].
func embedModel(t *testing.T) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 3)
	b.DimNames(x, "batch", "")
	ids := b.Input("ids", rt.I64, -1, -1)
	b.DimNames(ids, "batch", "seq")
	w := b.Weight("w", rt.F32, []int64{3, 2}, []float32{1, 0, 0, 1, 1, 1})
	e := b.Weight("emb", rt.F32, []int64{5, 4}, []float32{
		0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4})
	b.Node("mm", "MatMul", []string{x, w}, []string{"y"}, nil)
	b.Node("lookup", "Gather", []string{e, ids}, []string{"e"}, nil)
	b.Output("y", "e")
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeModel(t *testing.T, m *model.Model) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.bin")
	if err := model.WriteFile(p, m); err != nil {
		t.Fatal(err)
	}
	return p
}

// A model with a dynamic batch loads without Options.Shapes and runs any
// batch; Options.Dims binds dims by name.
func TestLoadDynamic(t *testing.T) {
	path := writeModel(t, embedModel(t))
	for _, tc := range []struct {
		name   string
		opts   vrun.Options
		x, ids []int
	}{
		{"no shapes", vrun.Options{Device: "cpu"}, []int{1, 3}, []int{1, 1}},
		{"dims", vrun.Options{Device: "cpu", Dims: map[string]int{"batch": 4, "seq": 7}}, []int{4, 3}, []int{4, 7}},
		{"dims and shapes", vrun.Options{Device: "cpu", Dims: map[string]int{"batch": 4}, Shapes: map[string][]int{"ids": {4, 2}}}, []int{4, 3}, []int{4, 2}},
		{"no mmap", vrun.Options{Device: "cpu", NoMmap: true}, []int{1, 3}, []int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := vrun.Load(path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if in := m.Info().InputShapes; !reflect.DeepEqual(in["x"], tc.x) || !reflect.DeepEqual(in["ids"], tc.ids) {
				t.Errorf("planned %v, want x %v ids %v", in, tc.x, tc.ids)
			}
			out, err := m.Run(context.Background(), map[string]*rt.Tensor{
				"x":   rt.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
				"ids": rt.FromInt64([]int64{4, 0, 2, 1, 3, 4}, 2, 3),
			})
			if err != nil {
				t.Fatal(err)
			}
			y, err := rt.As[float32](out["y"])
			if err != nil || !reflect.DeepEqual(y, []float32{4, 5, 10, 11}) {
				t.Errorf("y = %v, %v", y, err)
			}
			e, err := rt.As[float32](out["e"])
			if err != nil || !reflect.DeepEqual(out["e"].Shape, []int{2, 3, 4}) || e[0] != 4 || e[4] != 0 || e[20] != 4 {
				t.Errorf("e = %v %v, %v", out["e"].Shape, e, err)
			}
		})
	}
	if _, err := vrun.Load(path, vrun.Options{Device: "cpu", Dims: map[string]int{"time": 3}}); !errors.Is(err, vrun.ErrUnknownInput) {
		t.Errorf("an unknown dim: %v", err)
	}
}

func TestInputsOutputs(t *testing.T) {
	m, err := vrun.New(embedModel(t), vrun.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	wantIn := []vrun.TensorInfo{
		{Name: "x", DType: rt.F32, Shape: []int64{-1, 3}, DimNames: []string{"batch", ""}},
		{Name: "ids", DType: rt.I64, Shape: []int64{-1, -1}, DimNames: []string{"batch", "seq"}},
	}
	wantOut := []vrun.TensorInfo{
		{Name: "y", DType: rt.F32, Shape: []int64{-1, 2}, DimNames: []string{"batch", ""}},
		{Name: "e", DType: rt.F32, Shape: []int64{-1, -1, 4}, DimNames: []string{"batch", "seq", ""}},
	}
	if got := m.Inputs(); !reflect.DeepEqual(got, wantIn) {
		t.Errorf("Inputs() = %+v, want %+v", got, wantIn)
	}
	for range 2 { // the second call answers from the cache
		if got := m.Outputs(); !reflect.DeepEqual(got, wantOut) {
			t.Errorf("Outputs() = %+v, want %+v", got, wantOut)
		}
	}
	// A static model: every dim static, no names.
	b := model.NewBuilder()
	b.Output(b.Op("Relu", []string{b.Input("a", rt.F64, 2, 5)}, nil))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, err := vrun.New(g, vrun.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Outputs(); len(got) != 1 || got[0].DType != rt.F64 || !reflect.DeepEqual(got[0].Shape, []int64{2, 5}) || got[0].DimNames != nil {
		t.Errorf("Outputs() = %+v", got)
	}
}

func TestRunErrorsMatch(t *testing.T) {
	m, err := vrun.New(embedModel(t), vrun.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x := rt.FromSlice([]float32{1, 2, 3}, 1, 3)
	ids := rt.FromInt64([]int64{1}, 1, 1)
	for _, tc := range []struct {
		name   string
		inputs map[string]*rt.Tensor
		is     error
	}{
		{"missing", map[string]*rt.Tensor{"x": x}, vrun.ErrMissingInput},
		{"dtype", map[string]*rt.Tensor{"x": x, "ids": rt.FromSlice([]int32{1}, 1, 1)}, vrun.ErrDType},
		{"shape", map[string]*rt.Tensor{"x": rt.FromSlice([]float32{1, 2}, 1, 2), "ids": ids}, vrun.ErrShape},
		{"unknown", map[string]*rt.Tensor{"x": x, "ids": ids, "mask": x}, vrun.ErrUnknownInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Run(context.Background(), tc.inputs)
			var ie *vrun.InputError
			if !errors.Is(err, tc.is) || !errors.As(err, &ie) {
				t.Errorf("got %v, want %v in an *InputError", err, tc.is)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Run(ctx, map[string]*rt.Tensor{"x": x, "ids": ids}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
}

// With NoMmap the model does not read its file after Load: replacing or
// truncating the file leaves it intact.
func TestNoMmap(t *testing.T) {
	path := writeModel(t, embedModel(t))
	m, err := vrun.Load(path, vrun.Options{Device: "cpu", NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.WriteFile(path, []byte("replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := m.Run(context.Background(), map[string]*rt.Tensor{
		"x": rt.FromSlice([]float32{1, 2, 3}, 1, 3), "ids": rt.FromInt64([]int64{3}, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := rt.As[float32](out["e"]); !reflect.DeepEqual(e, []float32{3, 3, 3, 3}) {
		t.Errorf("e = %v", e)
	}
	// The graph's weights are in memory (a mapping of the truncated file
	// would fault here).
	w := m.Graph.Tensors[m.Graph.TensorIndex("w")]
	if got := (&rt.Tensor{DType: w.DType, Shape: []int{6}, Data: w.Data}).Float32s(); !reflect.DeepEqual(got, []float32{1, 0, 0, 1, 1, 1}) {
		t.Errorf("weight w = %v", got)
	}
}
