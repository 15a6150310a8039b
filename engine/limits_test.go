package engine_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// limitDev is the CPU device reporting other limits, as a GPU would.
type limitDev struct {
	rt.Device
	info rt.DeviceInfo
}

func (d *limitDev) Info() rt.DeviceInfo { return d.info }

func newLimitDev(t *testing.T, f func(*rt.DeviceInfo)) *limitDev {
	dev := cpu.NewDevice()
	t.Cleanup(func() { dev.Close() })
	d := &limitDev{Device: dev, info: dev.Info()}
	f(&d.info)
	return d
}

func build(t *testing.T, f func(b *model.Builder) string) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	b.Output(f(b))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// New plans dynamic dims as 1, or as Options.Dims names them.
func TestDynamicDims(t *testing.T) {
	m := build(t, func(b *model.Builder) string {
		x := b.Input("x", rt.F32, -1, 3)
		b.DimNames(x, "batch", "")
		y := b.Input("y", rt.F32, -1, -1)
		b.DimNames(y, "batch", "")
		return b.Op("Add", []string{b.Op("ReduceSum", []string{y}, model.Attrs{"axes": []int{1}, "keepdims": 1}), x}, nil)
	})
	for _, tc := range []struct {
		name   string
		opts   engine.Options
		x, y   []int
		err    error
		errMsg string
	}{
		{"defaults", engine.Options{}, []int{1, 3}, []int{1, 1}, nil, ""},
		{"dims", engine.Options{Dims: map[string]int{"batch": 4}}, []int{4, 3}, []int{4, 1}, nil, ""},
		{"shapes win", engine.Options{Dims: map[string]int{"batch": 4}, Shapes: map[string][]int{"y": {4, 7}}}, []int{4, 3}, []int{4, 7}, nil, ""},
		{"unknown dim", engine.Options{Dims: map[string]int{"seq": 4}}, nil, nil, engine.ErrUnknownInput, `Options.Dims names the dim "seq", which no input has (named dims: batch)`},
		{"negative dim", engine.Options{Dims: map[string]int{"batch": -2}}, nil, nil, engine.ErrShape, "-2"},
		{"unknown input", engine.Options{Shapes: map[string][]int{"z": {1}}}, nil, nil, engine.ErrUnknownInput, `"z", which is not a model input`},
		{"bad rank", engine.Options{Shapes: map[string][]int{"x": {1}}}, nil, nil, engine.ErrShape, `input "x": got shape [1] in Options.Shapes, model wants [-1 3] (batch 3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := cpu.NewDevice()
			defer dev.Close()
			s, err := engine.New(m, dev, tc.opts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("got %v, want %v containing %q", err, tc.err, tc.errMsg)
				}
				var ie *engine.InputError
				if !errors.As(err, &ie) {
					t.Errorf("%v is not an *InputError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in := s.Info().InputShapes
			if !equalInts(in["x"], tc.x) || !equalInts(in["y"], tc.y) {
				t.Errorf("planned %v, want x %v y %v", in, tc.x, tc.y)
			}
			// A run with other shapes re-plans.
			out, err := s.Run(context.Background(), map[string]*rt.Tensor{
				"x": rt.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3), "y": rt.FromFloat32([]float32{1, 1, 2, 2}, 2, 2)})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := out[m.Tensors[m.Outputs()[0]].Name].Float32s(), []float32{3, 4, 5, 8, 9, 10}; !equalF32(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Input errors match errors.Is and errors.As.
func TestInputErrorsMatch(t *testing.T) {
	m, _ := mlp(t)
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {2, 19}}})
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name   string
		inputs map[string]*rt.Tensor
		is     error
		input  string
	}{
		{"missing", map[string]*rt.Tensor{}, engine.ErrMissingInput, "x"},
		{"nil", map[string]*rt.Tensor{"x": nil}, engine.ErrMissingInput, "x"},
		{"dtype", map[string]*rt.Tensor{"x": rt.FromSlice(make([]float64, 38), 2, 19)}, engine.ErrDType, "x"},
		{"dtype is rt's", map[string]*rt.Tensor{"x": rt.FromSlice(make([]int64, 38), 2, 19)}, rt.ErrDType, "x"},
		{"shape", map[string]*rt.Tensor{"x": randTensor(rng, 2, 18)}, engine.ErrShape, "x"},
		{"rank", map[string]*rt.Tensor{"x": randTensor(rng, 38)}, engine.ErrShape, "x"},
		{"unknown", map[string]*rt.Tensor{"x": randTensor(rng, 2, 19), "z": randTensor(rng, 1)}, engine.ErrUnknownInput, "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Run(context.Background(), tc.inputs)
			if !errors.Is(err, tc.is) {
				t.Fatalf("got %v, want %v", err, tc.is)
			}
			var ie *engine.InputError
			if !errors.As(err, &ie) || ie.Input != tc.input {
				t.Fatalf("%v: not an *InputError for %q", err, tc.input)
			}
			if strings.Count(err.Error(), "engine:") != 1 {
				t.Errorf("%q repeats its prefix", err)
			}
		})
	}
}

// Plans larger than the device or the host fail before allocating, with
// errors that name what and the sizes.
func TestSizeLimits(t *testing.T) {
	relu := func(shape ...int64) func(*model.Builder) string {
		return func(b *model.Builder) string { return b.Op("Relu", []string{b.Input("x", rt.F32, shape...)}, nil) }
	}
	mlp := func(b *model.Builder) string {
		x := b.Input("x", rt.F32, -1, 37)
		w := b.Weight("w", rt.F32, []int64{37, 5}, make([]float32, 185))
		return b.Op("MatMul", []string{x, w}, nil)
	}
	for _, tc := range []struct {
		name  string
		model func(*model.Builder) string
		opts  engine.Options
		limit func(*rt.DeviceInfo)
		want  []string
	}{
		{"static [2^28 37]", relu(1<<28, 37), engine.Options{}, func(i *rt.DeviceInfo) { i.Memory = 16 << 30 },
			[]string{"the plan (arena ", "needs 74.0 GiB, more than the 16.0 GiB of memory on cpu:0", "no input has a dynamic leading dim"}},
		{"[2^20 2^20] on the host", relu(1<<20, 1<<20), engine.Options{}, func(i *rt.DeviceInfo) {},
			[]string{"needs 8.0 TiB"}},
		{"shape 1e11x37", mlp, engine.Options{Shapes: map[string][]int{"x": {100000000000, 37}}}, func(i *rt.DeviceInfo) {},
			[]string{"the plan (arena 15.3 TiB", "nor can it run in chunks of the batch: storing the outputs of the whole batch needs 1.8 TiB"}},
		{"overflow", mlp, engine.Options{Shapes: map[string][]int{"x": {1 << 62, 37}}}, func(i *rt.DeviceInfo) {},
			[]string{`input "x": shape [4611686018427387904 37] in Options.Shapes`, "needs more than 8 EiB"}},
		{"max alloc", relu(1024, 1024), engine.Options{}, func(i *rt.DeviceInfo) { i.MaxAlloc = 1 << 20 },
			[]string{"the arena of intermediate tensors needs 8.0 MiB, more than the 1.0 MiB that cpu:0"}},
		{"weights", func(b *model.Builder) string {
			return b.Op("MatMul", []string{b.Input("x", rt.F32, 1, 1024), b.Weight("w", rt.F32, []int64{1024, 1024}, make([]float32, 1<<20))}, nil)
		}, engine.Options{}, func(i *rt.DeviceInfo) { i.MaxAlloc = 1 << 20 }, []string{"the weights needs 4.0 MiB"}},
		{"parallel arenas", relu(1024, 1024), engine.Options{Parallel: 4}, func(i *rt.DeviceInfo) { i.Memory = 16 << 20 },
			[]string{"× 4 parallel runs", "more than the 16.0 MiB of memory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := build(t, tc.model)
			dev := newLimitDev(t, tc.limit)
			s, err := engine.New(m, dev, tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("planned")
			}
			if !errors.Is(err, rt.ErrTooLarge) {
				t.Errorf("%v is not rt.ErrTooLarge", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// A batch whose ops span more than the device's MaxRange, or whose arena
// exceeds its memory or its largest buffer, runs in chunks through one
// recording and gives NumPy's outputs (the e2e batches repeated to 200
// rows: the model keeps rows apart, so the reference rows repeat too).
func TestChunkedRunMatchesNumPy(t *testing.T) {
	dir := e2e.Dir()
	repeat := func(x *rt.Tensor, rows int) *rt.Tensor {
		rb := len(x.Data) / x.Shape[0]
		out := &rt.Tensor{DType: x.DType, Shape: append([]int{rows}, x.Shape[1:]...), Data: make([]byte, rows*rb)}
		for r := 0; r < rows; r++ {
			copy(out.Data[r*rb:], x.Data[(r%x.Shape[0])*rb:(r%x.Shape[0]+1)*rb])
		}
		return out
	}
	for _, name := range e2e.Models {
		m, err := model.Load(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		x, err := npy.ReadFile(filepath.Join(dir, name, "x.npy"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := npy.ReadFile(filepath.Join(dir, name, "y.npy"))
		if err != nil {
			t.Fatal(err)
		}
		const rows = 200
		x, want = repeat(x, rows), repeat(want, rows)
		whole := session(t, m, engine.Options{Shapes: map[string][]int{"x": x.Shape}}).Info()
		for _, lim := range []struct {
			name string
			f    func(*rt.DeviceInfo)
		}{
			{"range", func(i *rt.DeviceInfo) { i.MaxRange = 16 << 10 }},
			{"memory", func(i *rt.DeviceInfo) { i.Memory = whole.WeightBytes + whole.ArenaBytes/3 }},
			{"alloc", func(i *rt.DeviceInfo) { i.MaxAlloc = whole.ArenaBytes / 3 }},
		} {
			t.Run(name+"/"+lim.name, func(t *testing.T) {
				s, err := engine.New(m, newLimitDev(t, lim.f), engine.Options{Shapes: map[string][]int{"x": x.Shape}})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				info := s.Info()
				if info.ChunkRows < 1 || info.ChunkRows >= rows || info.Rows != rows || !strings.Contains(info.ChunkReason, "more than") {
					t.Fatalf("not chunked: %+v", info)
				}
				t.Logf("%d rows in chunks of %d: %s", rows, info.ChunkRows, info.ChunkReason)
				if got := info.OutputShapes["y"]; !equalInts(got, want.Shape) {
					t.Errorf("Info output shape %v, want %v", got, want.Shape)
				}
				for run := 0; run < 2; run++ { // the second run replays the cached chunking
					out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": x})
					if err != nil {
						t.Fatal(err)
					}
					if !equalInts(out["y"].Shape, want.Shape) {
						t.Fatalf("shape %v, want %v", out["y"].Shape, want.Shape)
					}
					if err := e2e.Compare(out["y"], want, e2e.RelTol, e2e.AbsTol); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
}

// Models that mix the rows of their batch are not split: the error says
// which node stops it. Those that keep rows apart run in chunks and give
// the whole batch's result.
func TestChunkRules(t *testing.T) {
	const n, f = 40, 24 // 40 rows of 24 floats: 3840 bytes; MaxRange 1 KiB
	w := func(b *model.Builder, name string, shape ...int64) string {
		k := 1
		for _, d := range shape {
			k *= int(d)
		}
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(i%7) - 3
		}
		return b.Weight(name, rt.F32, shape, v)
	}
	i64 := func(b *model.Builder, name string, v ...int64) string {
		return b.Weight(name, rt.I64, []int64{int64(len(v))}, v)
	}
	for _, tc := range []struct {
		name   string
		model  func(b *model.Builder, x string) string
		refuse string // "" if it runs in chunks
	}{
		{"softmax rows", func(b *model.Builder, x string) string {
			return b.Op("Softmax", []string{x}, model.Attrs{"axis": 1})
		}, ""},
		{"softmax across rows", func(b *model.Builder, x string) string {
			return b.Op("Softmax", []string{x}, model.Attrs{"axis": 0})
		}, "works along the batch's axis"},
		{"matmul and bias", func(b *model.Builder, x string) string {
			return b.Op("Add", []string{b.Op("MatMul", []string{x, w(b, "w", f, 8)}, nil), w(b, "b", 8)}, nil)
		}, ""},
		{"gemm", func(b *model.Builder, x string) string {
			return b.Op("Gemm", []string{x, w(b, "w", 8, f), w(b, "b", 8)}, model.Attrs{"transB": 1})
		}, ""},
		{"batched bias", func(b *model.Builder, x string) string {
			return b.Op("Add", []string{x, w(b, "b", n, 1)}, nil)
		}, "cannot broadcast shapes [[9 24] [40 1]]"}, // a chunk cannot add a bias of one row per batch row
		{"mean over the batch", func(b *model.Builder, x string) string {
			return b.Op("Sub", []string{x, b.Op("ReduceMean", []string{x, i64(b, "axes", 0)}, model.Attrs{"keepdims": 1})}, nil)
		}, "works along the batch's axis"},
		{"mean over features", func(b *model.Builder, x string) string {
			return b.Op("Sub", []string{x, b.Op("ReduceMean", []string{x, i64(b, "axes", -1)}, model.Attrs{"keepdims": 1})}, nil)
		}, ""},
		{"transpose", func(b *model.Builder, x string) string {
			return b.Op("Transpose", []string{x}, model.Attrs{"perm": []int{1, 0}})
		}, "moves the batch's axis"},
		{"flatten all", func(b *model.Builder, x string) string {
			return b.Op("Relu", []string{b.Op("Reshape", []string{x, i64(b, "s", -1)}, nil)}, nil)
		}, "not the batch as its leading dim"},
		{"reshape rows", func(b *model.Builder, x string) string {
			return b.Op("Relu", []string{b.Op("Reshape", []string{x, i64(b, "s", -1, 4, 6)}, nil)}, nil)
		}, ""},
		{"divide by the batch size", func(b *model.Builder, x string) string {
			sh := b.Op("Shape", []string{x}, nil)
			nb := b.Op("Cast", []string{b.Op("Gather", []string{sh, i64(b, "i", 0)}, nil)}, model.Attrs{"to": 1})
			return b.Op("Div", []string{x, nb}, nil)
		}, "depends on the batch size"},
		{"reshape by the batch size", func(b *model.Builder, x string) string {
			sh := b.Op("Shape", []string{x}, nil)
			nb := b.Op("Gather", []string{sh, i64(b, "i", 0)}, nil)
			s := b.Op("Concat", []string{nb, i64(b, "r", 4, 6)}, model.Attrs{"axis": 0})
			return b.Op("Relu", []string{b.Op("Reshape", []string{x, s}, nil)}, nil)
		}, ""},
		{"concat rows", func(b *model.Builder, x string) string {
			return b.Op("Concat", []string{x, b.Op("Neg", []string{x}, nil)}, model.Attrs{"axis": 0})
		}, "joins along the batch's axis"},
		{"concat features", func(b *model.Builder, x string) string {
			return b.Op("Concat", []string{x, b.Op("Neg", []string{x}, nil)}, model.Attrs{"axis": 1})
		}, ""},
		{"unknown to the rules", func(b *model.Builder, x string) string {
			return b.Op("Einsum", []string{x}, model.Attrs{"equation": "ij->ij"})
		}, "may mix the rows"},
		{"topk", func(b *model.Builder, x string) string {
			return b.OpN("TopK", []string{x, i64(b, "k", 3)}, 2, nil)[0]
		}, ""},
		{"slice features", func(b *model.Builder, x string) string {
			return b.Op("Slice", []string{x, i64(b, "st", 2), i64(b, "en", 9), i64(b, "ax", 1)}, nil)
		}, ""},
		{"slice rows", func(b *model.Builder, x string) string {
			return b.Op("Slice", []string{b.Op("Relu", []string{x}, nil), i64(b, "st", 2), i64(b, "en", 9), i64(b, "ax", 0)}, nil)
		}, "slices the batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := model.NewBuilder()
			x := b.Input("x", rt.F32, -1, f)
			b.DimNames(x, "batch", "")
			b.Output(tc.model(b, x))
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			out := m.Tensors[m.Outputs()[0]].Name
			v := make([]float32, n*f)
			for i := range v {
				v[i] = float32(math.Sin(float64(i)))
			}
			in := map[string]*rt.Tensor{"x": rt.FromFloat32(v, n, f)}
			ref := session(t, m, engine.Options{Shapes: map[string][]int{"x": {n, f}}})
			want, err := ref.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			s, err := engine.New(m, newLimitDev(t, func(i *rt.DeviceInfo) { i.MaxRange = 1 << 10 }), engine.Options{Shapes: map[string][]int{"x": {n, f}}})
			if err == nil {
				defer s.Close()
			}
			var got map[string]*rt.Tensor
			if err == nil {
				got, err = s.Run(context.Background(), in)
			}
			if tc.refuse != "" {
				if err == nil || !errors.Is(err, rt.ErrTooLarge) || !strings.Contains(err.Error(), tc.refuse) || !strings.Contains(err.Error(), "nor can it run in chunks") {
					t.Fatalf("got %v, want a refusal containing %q", err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Info().ChunkRows == 0 {
				t.Fatalf("not chunked: %+v", s.Info())
			}
			if err := e2e.Compare(got[out], want[out], 1e-6, 1e-7); err != nil || !equalInts(got[out].Shape, want[out].Shape) {
				t.Errorf("shape %v, want %v: %v", got[out].Shape, want[out].Shape, err)
			}
		})
	}
}

// gateDev is the CPU device whose streams' Wait blocks until the test
// opens the gate, as a long GPU run would.
type gateDev struct {
	rt.Device
	waiting chan struct{} // receives one value when a Wait starts
	gate    chan struct{} // closed to let the Waits finish
	waits   atomic.Int32
}

func (d *gateDev) NewStream(o rt.StreamOptions) (rt.Stream, error) {
	st, err := d.Device.NewStream(o)
	if err != nil {
		return nil, err
	}
	return &gateStream{Stream: st, d: d}, nil
}

type gateStream struct {
	rt.Stream
	d *gateDev
}

func (s *gateStream) Wait() error {
	s.d.waits.Add(1)
	s.d.waiting <- struct{}{}
	<-s.d.gate
	return s.Stream.Wait()
}

func TestRunContext(t *testing.T) {
	m, _ := mlp(t)
	x := map[string]*rt.Tensor{"x": randTensor(rand.New(rand.NewPCG(1, 1)), 2, 19)}
	newGate := func() (*gateDev, *engine.Session) {
		dev := cpu.NewDevice()
		t.Cleanup(func() { dev.Close() })
		d := &gateDev{Device: dev, waiting: make(chan struct{}, 8), gate: make(chan struct{})}
		s, err := engine.New(m, d, engine.Options{Shapes: map[string][]int{"x": {2, 19}}})
		if err != nil {
			t.Fatal(err)
		}
		return d, s
	}

	t.Run("cancelled before", func(t *testing.T) {
		d, s := newGate()
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Run(ctx, x); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if d.waits.Load() != 0 {
			t.Error("a cancelled run waited on the device")
		}
	})

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled},
		{"deadline while waiting", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := newGate()
			ctx, cancel := tc.ctx()
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := s.Run(ctx, x)
				errc <- err
			}()
			<-d.waiting // the run is on the device
			if tc.want == context.Canceled {
				cancel()
			}
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) {
					t.Errorf("got %v, want %v", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return when its context ended")
			}
			// Close waits for the device work of the interrupted run.
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			select {
			case <-closed:
				t.Fatal("Close returned while a run was on the device")
			case <-time.After(50 * time.Millisecond):
			}
			close(d.gate)
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(context.Background(), x); !errors.Is(err, rt.ErrClosed) {
				t.Errorf("Run after Close: %v, want rt.ErrClosed", err)
			}
		})
	}
}

// Close waits for runs in flight; runs waiting for a context fail with
// rt.ErrClosed.
func TestCloseWaitsForRuns(t *testing.T) {
	m, _ := mlp(t)
	x := map[string]*rt.Tensor{"x": randTensor(rand.New(rand.NewPCG(1, 1)), 2, 19)}
	dev := cpu.NewDevice()
	defer dev.Close()
	d := &gateDev{Device: dev, waiting: make(chan struct{}, 8), gate: make(chan struct{})}
	s, err := engine.New(m, d, engine.Options{Shapes: map[string][]int{"x": {2, 19}}})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), x)
		first <- err
	}()
	<-d.waiting
	second := make(chan error, 1)
	go func() { // waits for the one context (Parallel 1)
		_, err := s.Run(context.Background(), x)
		second <- err
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := <-second; !errors.Is(err, rt.ErrClosed) {
		t.Errorf("waiting run: %v, want rt.ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a run was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(d.gate)
	if err := <-first; err != nil {
		t.Errorf("the run in flight failed: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// A trainer has no default for dynamic dims: its error names Options.Shapes.
func TestTrainerDynamicDims(t *testing.T) {
	m := build(t, func(b *model.Builder) string {
		x := b.Input("x", rt.F64, -1, 2)
		w := b.Weight("w", rt.F64, []int64{2, 1}, []float64{1, 2})
		return b.Op("ReduceSum", []string{b.Op("MatMul", []string{x, w}, nil)}, model.Attrs{"keepdims": 0})
	})
	dev := cpu.NewDevice()
	defer dev.Close()
	_, err := engine.NewTrainer(m, dev, engine.TrainOptions{Loss: m.Tensors[m.Outputs()[0]].Name})
	if err == nil || !strings.Contains(err.Error(), "dim 0 (?) is dynamic; give its shape in Options.Shapes") || !errors.Is(err, engine.ErrShape) {
		t.Errorf("got %v", err)
	}
}

// Shapes computed from hostile constants are errors, not overflows or
// crashes.
func TestShapeArithmeticOverflow(t *testing.T) {
	i64 := func(b *model.Builder, name string, v ...int64) string {
		return b.Weight(name, rt.I64, []int64{int64(len(v))}, v)
	}
	f32 := func(b *model.Builder, name string, v float32) string {
		return b.Weight(name, rt.F32, nil, []float32{v})
	}
	for _, tc := range []struct {
		name  string
		model func(b *model.Builder) string
		want  string
	}{
		{"tile", func(b *model.Builder) string {
			return b.Op("Tile", []string{b.Input("x", rt.F32, 1<<20, 1<<20), i64(b, "r", 1<<31, 1<<31)}, nil)
		}, "are too large"},
		{"reshape", func(b *model.Builder) string {
			return b.Op("Reshape", []string{b.Input("x", rt.F32, 4), i64(b, "s", 1<<40, 1<<40, 1<<40, -1)}, nil)
		}, "is too large"},
		{"range", func(b *model.Builder) string {
			return b.Op("Range", []string{f32(b, "a", 0), f32(b, "l", 3e38), f32(b, "d", 1e-30)}, nil)
		}, "is too large"},
		{"range NaN", func(b *model.Builder) string {
			return b.Op("Range", []string{f32(b, "a", 0), f32(b, "l", float32(math.NaN())), f32(b, "d", 1)}, nil)
		}, "is too large"},
		{"constant of shape", func(b *model.Builder) string {
			return b.Op("ConstantOfShape", []string{i64(b, "s", 1<<31, 1<<31, 1<<31)}, nil)
		}, "has invalid shape [2147483648 2147483648 2147483648]"},
		{"expand", func(b *model.Builder) string {
			return b.Op("Expand", []string{b.Input("x", rt.F32, 1, 1), i64(b, "s", 1<<40, 1<<40)}, nil)
		}, "shape [1099511627776 1099511627776] is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := build(t, tc.model)
			dev := cpu.NewDevice()
			defer dev.Close()
			s, err := engine.New(m, dev, engine.Options{})
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
