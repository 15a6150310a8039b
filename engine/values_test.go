package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// reshapeModel is y = Reshape(x, shape) with shape a graph input.
func reshapeModel(t *testing.T) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 6)
	sh := b.Input("shape", rt.I64, 2)
	b.Output(b.Op("Reshape", []string{x, sh}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func iota32(n int) *rt.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i) - 3.5
	}
	return rt.FromFloat32(v, n/6, 6)
}

// A shape given as a graph input is planned by value: New defers the
// plan, each run plans for its value once, and a repeated value reuses
// its plan.
func TestRunPlansShapeInputByValue(t *testing.T) {
	m := reshapeModel(t)
	y := m.Tensors[m.Outputs()[0]].Name
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {2, 6}}})
	if got := s.ValueInputs(); !slices.Equal(got, []string{"shape"}) {
		t.Fatalf("ValueInputs() = %v, want [shape]", got)
	}
	if info := s.Info(); info.Ops != 0 || info.Nodes != 1 {
		t.Errorf("Info() before the first run = %+v, want no plan", info)
	}
	for k, tc := range []struct {
		rows  int
		shape []int64
		plans int
	}{
		{2, []int64{3, 4}, 1},
		{2, []int64{4, 3}, 2},
		{2, []int64{3, 4}, 2}, // reuses the first plan
		{4, []int64{-1, 2}, 3},
		{2, []int64{12, 1}, 4},
		{4, []int64{-1, 2}, 4},
	} {
		x := iota32(tc.rows * 6)
		out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x, "shape": rt.FromInt64(tc.shape, 2)})
		if err != nil {
			t.Fatalf("run %d (shape %v): %v", k, tc.shape, err)
		}
		want := []int{int(tc.shape[0]), int(tc.shape[1])}
		if want[0] < 0 {
			want[0] = tc.rows * 6 / want[1]
		}
		if got := out[y]; !slices.Equal(got.Shape, want) || !slices.Equal(got.Float32s(), x.Float32s()) {
			t.Errorf("run %d (shape %v): got %v %v, want %v %v", k, tc.shape, got.Shape, got.Float32s(), want, x.Float32s())
		}
		if n := engine.NumPlans(s); n != tc.plans {
			t.Errorf("run %d: %d plans, want %d", k, n, tc.plans)
		}
	}
	if info := s.Info(); !slices.Equal(info.OutputShapes[y], []int{12, 2}) {
		t.Errorf("Info().OutputShapes = %v after the last run", info.OutputShapes)
	}
	// A bad value fails its run, not the session.
	_, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": iota32(12), "shape": rt.FromInt64([]int64{5, 5}, 2)})
	if err == nil {
		t.Error("Reshape of 12 elements to [5 5] ran")
	}
	if _, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": iota32(12)}); !errors.Is(err, engine.ErrMissingInput) {
		t.Errorf("run without the shape input: %v, want ErrMissingInput", err)
	}
	if _, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": iota32(12), "shape": rt.FromInt64([]int64{6, 2}, 2)}); err != nil {
		t.Errorf("run after the errors: %v", err)
	}
}

// A value that planning needs but that the graph computes from small
// integer inputs (here a Concat of two [1] inputs) plans those inputs by
// value.
func TestRunPlansComputedValue(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 6)
	r := b.Input("rows", rt.I64, 1)
	c := b.Input("cols", rt.I64, 1)
	sh := b.Op("Concat", []string{r, c}, model.Attrs{"axis": 0})
	b.Output(b.Op("Reshape", []string{x, sh}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	y := m.Tensors[m.Outputs()[0]].Name
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {2, 6}}})
	for _, rc := range [][2]int64{{3, 4}, {2, 6}, {6, 2}} {
		x := iota32(12)
		out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x,
			"rows": rt.FromInt64([]int64{rc[0]}, 1), "cols": rt.FromInt64([]int64{rc[1]}, 1)})
		if err != nil {
			t.Fatalf("%v: %v", rc, err)
		}
		if got := out[y]; !slices.Equal(got.Shape, []int{int(rc[0]), int(rc[1])}) || !slices.Equal(got.Float32s(), x.Float32s()) {
			t.Errorf("%v: got %v", rc, got.Shape)
		}
	}
	if got := s.ValueInputs(); !slices.Equal(got, []string{"rows", "cols"}) {
		t.Errorf("ValueInputs() = %v, want [rows cols]", got)
	}
}

// A value computed from float data cannot be planned by value: New fails
// with the *NotConstantError, as before.
func TestNotConstantFromData(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 2, 6)
	f := b.Input("f", rt.F32, 2)
	sh := b.Op("Cast", []string{f}, model.Attrs{"to": int64(7)}) // to: ONNX INT64
	b.Output(b.Op("Reshape", []string{x, sh}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	_, err = engine.New(m, dev, engine.Options{})
	var nc *engine.NotConstantError
	if !errors.As(err, &nc) {
		t.Fatalf("New: %v, want a *NotConstantError", err)
	}
}

// Runs with different values from many goroutines at once (CI runs this
// under -race): every run gets its own value's output.
func TestRunValuesConcurrent(t *testing.T) {
	m := reshapeModel(t)
	y := m.Tensors[m.Outputs()[0]].Name
	s := session(t, m, engine.Options{Parallel: 2, Shapes: map[string][]int{"x": {2, 6}}})
	shapes := [][]int64{{3, 4}, {4, 3}, {2, 6}, {6, 2}, {12, 1}, {1, 12}}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < 12; r++ {
				sh := shapes[(g+r)%len(shapes)]
				x := iota32(12)
				out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x, "shape": rt.FromInt64(sh, 2)})
				if err == nil && (!slices.Equal(out[y].Shape, []int{int(sh[0]), int(sh[1])}) || !slices.Equal(out[y].Float32s(), x.Float32s())) {
					err = fmt.Errorf("got %v, want %v", out[y].Shape, sh)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, run %d, shape %v: %w", g, r, sh, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := engine.NumPlans(s); n != len(shapes) {
		t.Errorf("%d plans, want one per value (%d)", n, len(shapes))
	}
}
