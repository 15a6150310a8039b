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
