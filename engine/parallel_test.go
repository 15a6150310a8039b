package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// cpuDevices opens n logical CPU devices.
func cpuDevices(t *testing.T, n int) []rt.Device {
	t.Helper()
	t.Setenv("VRUN_CPU_DEVICES", "8")
	var specs []string
	for i := 0; i < n; i++ {
		specs = append(specs, "cpu:"+string(rune('0'+i)))
	}
	devs, err := rt.OpenList(strings.Join(specs, ","), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.CloseAll(devs) })
	return devs
}

func buildModel(t *testing.T, f func(b *model.Builder)) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	f(b)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mlpModel: x [batch, 5] -> MatMul, Add, Relu, MatMul, Softmax -> y
// [batch, 3]; ids [batch, 2] i64 -> Gather of an embedding -> e [batch,
// 2, 4]. Two batched inputs of different dtypes and a weight shared by
// every row.
func mlpModel(t *testing.T) *model.Model {
	rng := rand.New(rand.NewPCG(1, 2))
	w := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Float64()*2 - 1)
		}
		return v
	}
	return buildModel(t, func(b *model.Builder) {
		x := b.Input("x", rt.F32, -1, 5)
		b.DimNames(x, "batch", "")
		ids := b.Input("ids", rt.I64, -1, 2)
		b.DimNames(ids, "batch", "")
		h := b.Op("MatMul", []string{x, b.Weight("w1", rt.F32, []int64{5, 7}, w(35))}, nil)
		h = b.Op("Relu", []string{b.Op("Add", []string{h, b.Weight("b1", rt.F32, []int64{7}, w(7))}, nil)}, nil)
		h = b.Op("MatMul", []string{h, b.Weight("w2", rt.F32, []int64{7, 3}, w(21))}, nil)
		b.Node("sm", "Softmax", []string{h}, []string{"y"}, model.Attrs{"axis": -1})
		b.Node("emb", "Gather", []string{b.Weight("E", rt.F32, []int64{6, 4}, w(24)), ids}, []string{"e"}, nil)
		b.Output("y", "e")
	})
}

func mlpInputs(rng *rand.Rand, n int) map[string]*rt.Tensor {
	ids := make([]int64, 2*n)
	for i := range ids {
		ids[i] = int64(rng.IntN(6))
	}
	return map[string]*rt.Tensor{"x": randTensor(rng, n, 5), "ids": rt.FromInt64(ids, n, 2)}
}

// Data-parallel runs on 1 to 5 logical CPU devices, with even and uneven
// splits, give each device's rows exactly as that device alone gives
// them, and agree with one device given the whole batch within f32
// rounding; concurrent Runs share the devices.
func TestParallelSessionCPU(t *testing.T) {
	m := mlpModel(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ devices, rows int }{
		{1, 3}, {2, 2}, {2, 7}, {3, 3}, {3, 10}, {4, 5}, {5, 13},
	} {
		devs := cpuDevices(t, c.devices)
		dp, err := engine.NewParallelSession(m, devs, engine.Options{Dims: map[string]int{"batch": c.rows}})
		if err != nil {
			t.Fatalf("%d devices: %v", c.devices, err)
		}
		ref := session(t, m, engine.Options{Dims: map[string]int{"batch": c.rows}})
		in := mlpInputs(rng, c.rows)
		var wg sync.WaitGroup
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := dp.Run(context.Background(), in)
				if err != nil {
					t.Errorf("%d devices, %d rows: %v", c.devices, c.rows, err)
					return
				}
				want, err := ref.Run(context.Background(), in)
				if err != nil {
					t.Error(err)
					return
				}
				for _, name := range []string{"y", "e"} {
					g, w := got[name], want[name]
					if !sameShape(g.Shape, w.Shape) || g.DType != w.DType {
						t.Errorf("%d devices, %d rows: %s is %v %v, want %v %v", c.devices, c.rows, name, g.DType, g.Shape, w.DType, w.Shape)
						continue
					}
					for i := 0; i < g.Len(); i++ {
						if d := g.Float64(i) - w.Float64(i); d > 1e-6 || d < -1e-6 {
							t.Errorf("%d devices, %d rows: %s[%d] = %v, want %v", c.devices, c.rows, name, i, g.Float64(i), w.Float64(i))
							break
						}
					}
				}
				if !bytes.Equal(got["e"].Data, want["e"].Data) {
					t.Errorf("%d devices, %d rows: the gathered embedding differs", c.devices, c.rows)
				}
			}()
		}
		wg.Wait()
		if err := dp.Close(); err != nil {
			t.Error(err)
		}
	}
}

func sameShape(a, b []int) bool {
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

// Bad input to data parallelism gets an error that says what is wrong.
func TestParallelSessionErrors(t *testing.T) {
	w := func(shape []int64) []float32 { return make([]float32, rt.NumElements(intShape(shape))) }
	for _, c := range []struct {
		name    string
		m       func(b *model.Builder)
		devices int
		dims    map[string]int
		runRows int // rows given to Run (0: no Run)
		is      error
		err     string
	}{
		{name: "fixed batch", devices: 2, is: engine.ErrNotSplittable, err: "no input has a dynamic leading (batch) dim",
			m: func(b *model.Builder) { b.Output(b.Op("Relu", []string{b.Input("x", rt.F32, 4, 3)}, nil)) }},
		{name: "batch not leading", devices: 2, is: engine.ErrNotSplittable, err: "no input has a dynamic leading (batch) dim; inputs: x [3 ?]",
			m: func(b *model.Builder) { b.Output(b.Op("Relu", []string{b.Input("x", rt.F32, 3, -1)}, nil)) }},
		{name: "sum over the batch", devices: 2, dims: map[string]int{"batch": 4}, is: engine.ErrNotSplittable, err: "works along the batch's axis",
			m: func(b *model.Builder) {
				x := b.Input("x", rt.F32, -1, 3)
				b.DimNames(x, "batch", "")
				b.Output(b.Op("ReduceSum", []string{x, b.Weight("ax", rt.I64, []int64{1}, []int64{0})}, nil))
			}},
		{name: "transpose moves the batch", devices: 3, dims: map[string]int{"batch": 6}, is: engine.ErrNotSplittable, err: "moves the batch's axis",
			m: func(b *model.Builder) {
				x := b.Input("x", rt.F32, -1, 3)
				b.DimNames(x, "batch", "")
				b.Output(b.Op("Transpose", []string{x}, model.Attrs{"perm": []int64{1, 0}}))
			}},
		{name: "softmax across rows", devices: 2, dims: map[string]int{"batch": 3}, is: engine.ErrNotSplittable, err: "(Softmax) works along the batch's axis",
			m: func(b *model.Builder) {
				x := b.Input("x", rt.F32, -1, 3)
				b.DimNames(x, "batch", "")
				b.Output(b.Op("Softmax", []string{b.Op("Add", []string{x, b.Weight("a", rt.F32, []int64{3}, w([]int64{3}))}, nil)}, model.Attrs{"axis": 0}))
			}},
		{name: "batch smaller than devices at New", devices: 3, dims: map[string]int{"batch": 2}, is: engine.ErrBatchTooSmall, err: "a batch of 2 rows is smaller than the 3 devices cpu:0,cpu:1,cpu:2",
			m: func(b *model.Builder) {
				x := b.Input("x", rt.F32, -1, 3)
				b.DimNames(x, "batch", "")
				b.Output(b.Op("Relu", []string{x}, nil))
			}},
		{name: "batch smaller than devices at Run", devices: 4, runRows: 3, is: engine.ErrBatchTooSmall, err: `a batch of 3 rows (dim "batch") is smaller than the 4 devices cpu:0,cpu:1,cpu:2,cpu:3; give at least 4 rows`,
			m: func(b *model.Builder) {
				x := b.Input("x", rt.F32, -1, 3)
				b.DimNames(x, "batch", "")
				b.Output(b.Op("Relu", []string{x}, nil))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := buildModel(t, c.m)
			devs := cpuDevices(t, c.devices)
			dp, err := engine.NewParallelSession(m, devs, engine.Options{Dims: c.dims})
			if err == nil && c.runRows > 0 {
				defer dp.Close()
				_, err = dp.Run(context.Background(), map[string]*rt.Tensor{"x": randTensor(rand.New(rand.NewPCG(1, 1)), c.runRows, 3)})
			} else if err == nil {
				dp.Close()
			}
			if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want %v with %q", err, c.is, c.err)
			}
		})
	}
}

func intShape(s []int64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

// noF64 is a CPU device that says it has no f64.
type noF64 struct{ rt.Device }

func (d noF64) Info() rt.DeviceInfo {
	i := d.Device.Info()
	i.FP64, i.Backend = false, "fake"
	return i
}

// Devices that disagree on a dtype the model uses are refused, naming the
// dtype and the devices.
func TestParallelSessionDTypes(t *testing.T) {
	m := buildModel(t, func(b *model.Builder) {
		x := b.Input("x", rt.F64, -1, 3)
		b.DimNames(x, "batch", "")
		b.Output(b.Op("Relu", []string{x}, nil))
	})
	devs := cpuDevices(t, 2)
	_, err := engine.NewParallelSession(m, []rt.Device{devs[0], noF64{devs[1]}}, engine.Options{Dims: map[string]int{"batch": 4}})
	if err == nil || !strings.Contains(err.Error(), "disagree on f64, which the model needs: cpu:0 support it, fake:1 do not") {
		t.Fatalf("got %v, want the devices' disagreement on f64", err)
	}
}

// countDev records a CPU device's buffers, and can be lost: its streams
// then fail Submit and Wait with rt.ErrDeviceLost (as a driver reports a
// reset), the fault the backends' device-loss tests inject.
type countDev struct {
	rt.Device
	mu   sync.Mutex
	bufs []rt.Buffer
	lost atomic.Bool
}

func (d *countDev) Alloc(n int64) (rt.Buffer, error) {
	b, err := d.Device.Alloc(n)
	if err == nil {
		d.mu.Lock()
		d.bufs = append(d.bufs, b)
		d.mu.Unlock()
	}
	return b, err
}

// live counts the buffers not yet freed.
func (d *countDev) live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, b := range d.bufs {
		if b.(*cpu.Buffer).Bytes() != nil {
			n++
		}
	}
	return n
}

func (d *countDev) NewStream(o rt.StreamOptions) (rt.Stream, error) {
	s, err := d.Device.NewStream(o)
	if err != nil {
		return nil, err
	}
	return &lossStream{Stream: s, d: d}, nil
}

type lossStream struct {
	rt.Stream
	d *countDev
}

func (s *lossStream) Submit() error {
	if s.d.lost.Load() {
		return fmt.Errorf("fake: vkQueueSubmit: %w", rt.ErrDeviceLost)
	}
	return s.Stream.Submit()
}

func (s *lossStream) Wait() error {
	if s.d.lost.Load() {
		return fmt.Errorf("fake: vkWaitForFences: %w", rt.ErrDeviceLost)
	}
	return s.Stream.Wait()
}

// A device lost in the middle of a data-parallel run: the error names the
// device, every session is closed so the other devices hold no buffers of
// the model any more, and later runs fail with the same error.
func TestParallelSessionDeviceLost(t *testing.T) {
	m := mlpModel(t)
	base := cpuDevices(t, 3)
	devs := make([]rt.Device, 3)
	cds := make([]*countDev, 3)
	for i, d := range base {
		cds[i] = &countDev{Device: d}
		devs[i] = cds[i]
	}
	dp, err := engine.NewParallelSession(m, devs, engine.Options{Dims: map[string]int{"batch": 9}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	in := mlpInputs(rand.New(rand.NewPCG(5, 6)), 9)
	if _, err := dp.Run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	cds[1].lost.Store(true)
	_, err = dp.Run(context.Background(), in)
	var de *engine.DeviceError
	if !errors.Is(err, rt.ErrDeviceLost) || !errors.As(err, &de) || de.Device != "cpu:1" || de.Index != 1 || de.Rows != [2]int{3, 6} {
		t.Fatalf("got %v (%+v), want a DeviceError for cpu:1, rows 3-5, matching rt.ErrDeviceLost", err, de)
	}
	if !strings.Contains(err.Error(), "device cpu:1 (list position 1, rows 3-5)") {
		t.Errorf("error %q does not name the device", err)
	}
	for i, d := range cds {
		if n := d.live(); n != 0 {
			t.Errorf("cpu:%d holds %d buffers after the loss, want 0 (released)", i, n)
		}
	}
	if _, err2 := dp.Run(context.Background(), in); !errors.Is(err2, rt.ErrDeviceLost) || err2.Error() != err.Error() {
		t.Errorf("run after the loss: %v, want %v", err2, err)
	}
}

// SetShares splits the batch by the given proportions (outputs still the
// single device's), and refuses bad shares.
func TestParallelSessionShares(t *testing.T) {
	m := mlpModel(t)
	devs := cpuDevices(t, 3)
	dp, err := engine.NewParallelSession(m, devs, engine.Options{Dims: map[string]int{"batch": 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	ref := session(t, m, engine.Options{Dims: map[string]int{"batch": 16}})
	in := mlpInputs(rand.New(rand.NewPCG(8, 8)), 16)
	want, err := ref.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, shares := range [][]float64{{1, 2, 5}, {100, 1, 1}, nil} {
		if err := dp.SetShares(shares); err != nil {
			t.Fatal(err)
		}
		got, err := dp.Run(context.Background(), in)
		if err != nil {
			t.Fatalf("shares %v: %v", shares, err)
		}
		if !bytes.Equal(got["e"].Data, want["e"].Data) {
			t.Errorf("shares %v: the embedding differs", shares)
		}
		for i := 0; i < got["y"].Len(); i++ {
			if d := got["y"].Float64(i) - want["y"].Float64(i); d > 1e-6 || d < -1e-6 {
				t.Fatalf("shares %v: y[%d] = %v, want %v", shares, i, got["y"].Float64(i), want["y"].Float64(i))
			}
		}
	}
	for _, c := range []struct {
		shares []float64
		err    string
	}{
		{[]float64{1, 2}, "2 shares for the 3 devices cpu:0,cpu:1,cpu:2"},
		{[]float64{1, 0, 1}, "share 0 of device cpu:1: want a positive number"},
		{[]float64{1, 1, math.NaN()}, "share NaN of device cpu:2"},
	} {
		if err := dp.SetShares(c.shares); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("SetShares(%v) = %v, want %q", c.shares, err, c.err)
		}
	}
}
