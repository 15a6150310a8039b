package vrun_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// The device lists of data-parallel inference, on the hardware there is:
// logical CPU devices, the CPU with pocl or lavapipe, and two logical
// devices (two VkDevices, two cl_contexts) on one lavapipe or pocl device.
var parallelLists = []string{
	"cpu:0,cpu:1,cpu:2",
	"cpu,opencl:0",
	"cpu,vulkan:0",
	"vulkan:0,vulkan:1",
	"opencl:0,opencl:1",
	"vulkan:1,cpu:1,opencl:0",
}

func randTensor(rng *rand.Rand, shape ...int) *rt.Tensor {
	v := make([]float32, rt.NumElements(shape))
	for i := range v {
		v[i] = float32(0.1+rng.Float64()) * float32(1-2*rng.IntN(2))
	}
	return rt.FromFloat32(v, shape...)
}

// The e2e models split across each device list give NumPy's outputs,
// and each device's rows are bit for bit what that device alone gives.
func TestDataParallelE2E(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=3,vulkan=2,opencl=2")
	for _, list := range parallelLists {
		t.Run(list, func(t *testing.T) {
			available(t, list)
			devs, err := rt.OpenList(list, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := rt.CloseAll(devs); err != nil {
					t.Error(err)
				}
			}()
			e2e.DataParallel(t, devs)
		})
	}
}

// vrun.Load with a device list: Run splits the batch, and the outputs
// match one device's within f32 rounding, for even and uneven batches.
func TestLoadDeviceList(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=3,vulkan=2,opencl=2")
	path := filepath.Join(e2e.Dir(), "mlp.bin")
	ref, err := vrun.Load(path, vrun.Options{Device: "cpu", Dims: map[string]int{"batch": 7}})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, list := range parallelLists {
		t.Run(list, func(t *testing.T) {
			available(t, list)
			m, err := vrun.Load(path, vrun.Options{Device: list, Dims: map[string]int{"batch": 7}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := m.Close(); err != nil {
					t.Error(err)
				}
			}()
			if got := m.DeviceSpecs(); got != strings.ReplaceAll(list, "cpu,", "cpu:0,") {
				t.Errorf("DeviceSpecs = %q for %q", got, list)
			}
			if m.Split == nil || len(m.Devices) != strings.Count(list, ",")+1 {
				t.Fatalf("%q: Split %v, %d devices", list, m.Split, len(m.Devices))
			}
			for _, rows := range []int{7, 3, 10} {
				x := randTensor(rng, rows, 37)
				got, err := m.Run(context.Background(), map[string]*rt.Tensor{"x": x})
				if err != nil {
					t.Fatalf("%d rows: %v", rows, err)
				}
				want, err := ref.Run(context.Background(), map[string]*rt.Tensor{"x": x})
				if err != nil {
					t.Fatal(err)
				}
				if err := e2e.Compare(got["y"], want["y"], 2*e2e.RelTol, e2e.AbsTol); err != nil {
					t.Errorf("%d rows: %v", rows, err)
				}
			}
			_, err = m.Run(context.Background(), map[string]*rt.Tensor{"x": randTensor(rng, 1, 37)})
			if !errors.Is(err, vrun.ErrBatchTooSmall) || !strings.Contains(err.Error(), "a batch of 1 rows") {
				t.Errorf("one row on %s: %v, want ErrBatchTooSmall", list, err)
			}
		})
	}
}

// Models that cannot be split say so when they are loaded on a list:
// the test models with a fixed batch.
func TestDeviceListNotSplittable(t *testing.T) {
	t.Setenv("VRUN_CPU_DEVICES", "2")
	for _, c := range []struct{ model, why string }{
		{"squeezenet1_1.onnx", "no input has a dynamic leading (batch) dim; inputs: x [1 3 224 224]"},
		{"transformer.onnx", "no input has a dynamic leading (batch) dim; inputs: x [2 16]"},
	} {
		path := filepath.Join(filepath.Dir(e2e.Dir()), "models", c.model)
		_, err := vrun.Load(path, vrun.Options{Device: "cpu:0,cpu:1"})
		if !errors.Is(err, vrun.ErrNotSplittable) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s on cpu:0,cpu:1: %v, want ErrNotSplittable with %q", c.model, err, c.why)
		}
	}
}

// dynamicBatch makes a model's first input's leading dim a dynamic
// "batch" dim (the test ONNX models are exported with a fixed batch).
func dynamicBatch(t *testing.T, name string) *model.Model {
	t.Helper()
	g, err := vrun.LoadGraph(filepath.Join(filepath.Dir(e2e.Dir()), "models", name+".onnx"))
	if err != nil {
		t.Fatal(err)
	}
	mt := &g.Tensors[g.Inputs()[0]]
	mt.Shape[0] = -1
	mt.DimNames = make([]string, len(mt.Shape))
	mt.DimNames[0] = "batch"
	return g
}

// SqueezeNet with a dynamic batch splits across devices: three images on
// two logical CPUs and on the CPU with pocl give PyTorch's output for the
// reference image and one CPU device's for all three. The LSTM and the
// transformer have their batch size baked into constants (an Expand's
// shape, a Reshape's), so they cannot be split even with a dynamic batch
// dim, and say so.
func TestDataParallelRealModels(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Setenv("VRUN_CPU_DEVICES", "2")
	dir := filepath.Join(filepath.Dir(e2e.Dir()), "models")
	x1, err := npy.ReadFile(filepath.Join(dir, "squeezenet1_1.x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want1, err := npy.ReadFile(filepath.Join(dir, "squeezenet1_1.torch.npy"))
	if err != nil {
		t.Fatal(err)
	}
	// Three images: the reference, it scaled by 0.5, and it negated.
	v := x1.Float32s()
	x := make([]float32, 0, 3*len(v))
	x = append(x, v...)
	for _, s := range []float32{0.5, -1} {
		for _, e := range v {
			x = append(x, s*e)
		}
	}
	in := map[string]*rt.Tensor{"x": rt.FromFloat32(x, append([]int{3}, x1.Shape[1:]...)...)}
	g := dynamicBatch(t, "squeezenet1_1")
	defer g.Close()
	ref, err := vrun.New(g, vrun.Options{Device: "cpu", Shapes: map[string][]int{"x": in["x"].Shape}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(context.Background(), in)
	closeDevices(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{"cpu:0,cpu:1", "cpu,opencl:0"} {
		t.Run(list, func(t *testing.T) {
			available(t, list)
			m, err := vrun.New(g, vrun.Options{Device: list, Shapes: map[string][]int{"x": in["x"].Shape}})
			if err != nil {
				t.Fatal(err)
			}
			defer closeDevices(m)
			out, err := m.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			y := out["y"]
			if rel, i, err := realmodels.MaxError(y, want["y"]); err != nil || !(rel <= realmodels.Tol) {
				t.Errorf("against one CPU device: %.3g of max|want| at %d (%v), tolerance %g", rel, i, err, realmodels.Tol)
			}
			row0 := &rt.Tensor{DType: y.DType, Shape: append([]int{1}, y.Shape[1:]...), Data: y.Data[:len(y.Data)/3]}
			if rel, i, err := realmodels.MaxError(row0, want1); err != nil || !(rel <= realmodels.Tol) {
				t.Errorf("image 0 against PyTorch: %.3g of max|want| at %d (%v), tolerance %g", rel, i, err, realmodels.Tol)
			}
		})
	}
	for _, c := range []struct{ name, why string }{
		{"lstm", "planning the whole batch"},
		{"transformer", "planning the whole batch"},
	} {
		g := dynamicBatch(t, c.name)
		sh := []int{3, 16}
		_, err := vrun.New(g, vrun.Options{Device: "cpu:0,cpu:1", Shapes: map[string][]int{"x": sh}})
		g.Close()
		if !errors.Is(err, vrun.ErrNotSplittable) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s with a dynamic batch on cpu:0,cpu:1: %v, want ErrNotSplittable (%s)", c.name, err, c.why)
		}
	}
}

// closeDevices closes a model's sessions and devices but not its graph,
// which the test shares between models.
func closeDevices(m *vrun.Model) {
	if m.Split != nil {
		m.Split.Close()
	} else {
		m.Session.Close()
	}
	rt.CloseAll(m.Devices)
}
