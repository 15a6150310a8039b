package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

func randTensor(rng *rand.Rand, shape ...int) *rt.Tensor {
	v := make([]float32, rt.NumElements(shape))
	for i := range v {
		v[i] = float32(0.1+rng.Float64()) * float32(1-2*rng.IntN(2))
	}
	return rt.FromFloat32(v, shape...)
}

func session(t *testing.T, m *model.Model, opts engine.Options) *engine.Session {
	t.Helper()
	dev := cpu.NewDevice()
	t.Cleanup(func() { dev.Close() })
	s, err := engine.New(m, dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A chain of elementwise ops runs in place: the arena holds two tensors
// however long the chain, while the tensors add up to the chain length.
func TestArenaReuse(t *testing.T) {
	b := model.NewBuilder()
	h := b.Input("x", rt.F32, 64, 33)
	w := b.Weight("w", rt.F32, []int64{33, 33}, make([]float32, 33*33))
	h = b.Op("MatMul", []string{h, w}, nil) // x itself stays intact
	for i := 0; i < 10; i++ {
		h = b.Op([]string{"Relu", "Sigmoid", "Tanh"}[i%3], []string{h}, nil)
	}
	b.Output(h)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	info := s.Info()
	one := int64(64 * 33 * 4)
	if info.ArenaBytes > 2*((one+255)/256*256) {
		t.Errorf("arena %d bytes, want at most two tensors of %d", info.ArenaBytes, one)
	}
	if info.TensorBytes < 11*one {
		t.Errorf("tensor sum %d bytes, want at least %d", info.TensorBytes, 11*one)
	}
	// The in-place chain still computes the right thing.
	rng := rand.New(rand.NewPCG(1, 2))
	x := randTensor(rng, 64, 33)
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	got := out[h].Float64s()
	for i, v := range got {
		// MatMul with zero weights gives 0; Relu(0)=0, Sigmoid(0)=0.5, ...
		want := 0.0
		for k := 0; k < 10; k++ {
			want = []func(float64) float64{func(v float64) float64 { return math.Max(v, 0) },
				func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }, math.Tanh}[k%3](want)
		}
		if math.Abs(v-want) > 1e-6 {
			t.Fatalf("element %d = %v, want %v", i, v, want)
		}
	}
}

func mlp(t *testing.T) (*model.Model, string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 19)
	w1 := randTensor(rng, 19, 31)
	w2 := randTensor(rng, 31, 7)
	h := b.Op("MatMul", []string{x, b.Weight("w1", rt.F32, []int64{19, 31}, w1.Data)}, nil)
	h = b.Op("Tanh", []string{h}, nil)
	h = b.Op("MatMul", []string{h, b.Weight("w2", rt.F32, []int64{31, 7}, w2.Data)}, nil)
	y := b.Op("Softmax", []string{h}, nil)
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m, y
}

// Concurrent runs from many goroutines give the same answers as serial
// runs, with one arena (serialised) and with several.
func TestConcurrentRuns(t *testing.T) {
	m, y := mlp(t)
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := make([]*rt.Tensor, 16)
	for i := range inputs {
		inputs[i] = randTensor(rng, 1+i%3, 19)
	}
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprintf("parallel=%d", par), func(t *testing.T) {
			s := session(t, m, engine.Options{Parallel: par, Shapes: map[string][]int{"x": {1, 19}}})
			want := make([][]float32, len(inputs))
			for i, x := range inputs {
				out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x})
				if err != nil {
					t.Fatal(err)
				}
				want[i] = out[y].Float32s()
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for r := 0; r < 20; r++ {
						i := (g*7 + r) % len(inputs)
						out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": inputs[i]})
						if err != nil {
							errs <- err
							return
						}
						for k, v := range out[y].Float32s() {
							if v != want[i][k] {
								errs <- fmt.Errorf("goroutine %d run %d: element %d = %v, want %v", g, r, k, v, want[i][k])
								return
							}
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	m, _ := mlp(t)
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {2, 19}}})
	rng := rand.New(rand.NewPCG(7, 8))
	f64 := rt.FromFloat64(rt.F64, make([]float64, 38), 2, 19)
	for _, tc := range []struct {
		name   string
		inputs map[string]*rt.Tensor
		want   string
	}{
		{"missing", map[string]*rt.Tensor{}, `missing input "x"`},
		{"dtype", map[string]*rt.Tensor{"x": f64}, `input "x" has dtype f64, model wants f32`},
		{"extra", map[string]*rt.Tensor{"x": randTensor(rng, 2, 19), "z": randTensor(rng, 1)}, `"z" is not a model input`},
		{"shape", map[string]*rt.Tensor{"x": randTensor(rng, 2, 18)}, `input "x": got shape [2 18], model wants [-1 19]`},
		{"short data", map[string]*rt.Tensor{"x": {DType: rt.F32, Shape: []int{2, 19}, Data: make([]byte, 7)}}, "data bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Run(context.Background(), tc.inputs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *model.Builder) string
		want  string
		is    error
	}{
		{"broadcast", func(b *model.Builder) string {
			return b.Op("Add", []string{b.Input("a", rt.F32, 3, 4), b.Input("b", rt.F32, 5)}, nil)
		}, "cannot broadcast shapes [[3 4] [5]]", engine.ErrShape},
		{"unknown op", func(b *model.Builder) string {
			return b.Op("FancyNewOp", []string{b.Input("a", rt.F32, 3)}, nil)
		}, `unsupported op: op "FancyNewOp"`, engine.ErrUnsupportedOp},
		{"matmul", func(b *model.Builder) string {
			return b.Op("MatMul", []string{b.Input("a", rt.F32, 3, 4), b.Input("b", rt.F32, 5, 6)}, nil)
		}, "inner dims 4 != 5", engine.ErrShape},
		{"reshape from data", func(b *model.Builder) string {
			// A shape fed as an integer input is planned by value at Run
			// (TestRunPlansShapeInputByValue); one computed from float
			// data cannot be.
			s := b.Op("Cast", []string{b.Input("f", rt.F32, 2)}, model.Attrs{"to": int64(7)}) // to: ONNX INT64
			return b.Op("Reshape", []string{b.Input("a", rt.F32, 6), s}, nil)
		}, "must be a constant", nil},
		{"reshape size", func(b *model.Builder) string {
			return b.Op("Reshape", []string{b.Input("a", rt.F32, 6), b.Weight("s", rt.I64, []int64{2}, []int64{4, 2})}, nil)
		}, "cannot reshape [6] (6 elements) into [4 2]", engine.ErrShape},
		{"conv channels", func(b *model.Builder) string {
			return b.Op("Conv", []string{b.Input("a", rt.F32, 1, 3, 8, 8), b.Weight("w", rt.F32, []int64{4, 2, 3, 3}, make([]float32, 72))}, nil)
		}, "X has 3 channels", nil},
		{"gather index", func(b *model.Builder) string {
			return b.Op("Gather", []string{b.Input("a", rt.F32, 4, 2), b.Weight("i", rt.I64, []int64{2}, []int64{1, 4})}, nil)
		}, "index 4 out of range", engine.ErrShape},
		{"dynamic", func(b *model.Builder) string {
			// New plans a dynamic dim as 1 (TestDynamicDims), which cannot
			// reshape to [4 1]: the error says how to give the shapes.
			x := b.Input("a", rt.F32, -1, 2)
			return b.Op("Reshape", []string{x, b.Weight("s", rt.I64, []int64{2}, []int64{4, 2})}, nil)
		}, "set to 1; give input shapes in Options.Shapes", engine.ErrShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := model.NewBuilder()
			out := tc.build(b)
			b.Output(out)
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			dev := cpu.NewDevice()
			defer dev.Close()
			_, err = engine.New(m, dev, engine.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// A dynamic batch dim binds per run: each new shape gets its own plan.
func TestDynamicBatch(t *testing.T) {
	m, y := mlp(t)
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {1, 19}}})
	rng := rand.New(rand.NewPCG(9, 10))
	big := randTensor(rng, 5, 19)
	outBig, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": big})
	if err != nil {
		t.Fatal(err)
	}
	if got := outBig[y].Shape; got[0] != 5 || got[1] != 7 {
		t.Fatalf("output shape %v, want [5 7]", got)
	}
	// Row 3 alone must give row 3 of the batch.
	row := rt.FromFloat32(big.Float32s()[3*19:4*19], 1, 19)
	outRow, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": row})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range outRow[y].Float32s() {
		if w := outBig[y].Float32s()[3*7+k]; math.Abs(float64(v-w)) > 1e-6 {
			t.Fatalf("element %d: %v alone, %v in a batch", k, v, w)
		}
	}
}

// The shape subgraph PyTorch export emits (Shape→Gather→Unsqueeze→Concat→
// Reshape) folds at plan time: only the compute ops remain.
func TestShapeSubgraphFolds(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 2, 3, 4)
	sh := b.Op("Shape", []string{x}, nil)
	d0 := b.Op("Gather", []string{sh, b.Weight("zero", rt.I64, []int64{}, []int64{0})}, model.Attrs{"axis": 0})
	u := b.Op("Unsqueeze", []string{d0, b.Weight("ax", rt.I64, []int64{1}, []int64{0})}, nil)
	shape := b.Op("Concat", []string{u, b.Weight("rest", rt.I64, []int64{1}, []int64{-1})}, model.Attrs{"axis": 0})
	r := b.Op("Reshape", []string{x, shape}, nil)
	shape2 := b.Op("Cast", []string{b.Op("Mul", []string{shape, b.Weight("two", rt.I64, []int64{1}, []int64{1})}, nil)}, model.Attrs{"to": 7})
	y := b.Op("Relu", []string{b.Op("Reshape", []string{r, shape2}, nil)}, nil)
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	info := s.Info()
	if info.Ops != 1 || info.OpCounts["Unary.Relu"] != 1 {
		t.Errorf("plan has ops %v, want only the Relu", info.OpCounts)
	}
	if got := info.OutputShapes[y]; len(got) != 2 || got[0] != 2 || got[1] != 12 {
		t.Errorf("output shape %v, want [2 12]", got)
	}
}

func TestUnsqueezeSqueeze(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 2, 3, 6, 8)
	u := b.Op("Unsqueeze", []string{x, b.Weight("ax", rt.I64, []int64{2}, []int64{2, -1})}, nil)
	s := b.Op("Squeeze", []string{u, b.Weight("ax2", rt.I64, []int64{1}, []int64{5})}, nil)
	b.Output(u, s)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	info := session(t, m, engine.Options{}).Info()
	if got := fmt.Sprint(info.OutputShapes[u]); got != "[2 3 1 6 8 1]" {
		t.Errorf("Unsqueeze shape %s, want [2 3 1 6 8 1]", got)
	}
	if got := fmt.Sprint(info.OutputShapes[s]); got != "[2 3 1 6 8]" {
		t.Errorf("Squeeze shape %s, want [2 3 1 6 8]", got)
	}
}
