//go:build cgo

package clshim

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/vrun-go/vrun/internal/conformance"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/gradconf"
	"github.com/vrun-go/vrun/internal/onnxcorpus"
	"github.com/vrun-go/vrun/rt"
)

// DeviceEnv selects one device index for the tests (e.g. NVIDIA's on a
// machine that also has pocl).
const DeviceEnv = "VRUN_OPENCL_DEVICE"

func TestMain(m *testing.M) {
	// Program binaries go to a fresh directory per test run unless the
	// caller chose one.
	var tmp string
	if os.Getenv(CacheDirEnv) == "" {
		var err error
		tmp, err = os.MkdirTemp("", "vrun-opencl-test-")
		if err == nil {
			os.Setenv(CacheDirEnv, tmp)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// testDevices returns the device indices to test, or skips the test with
// one line when there is no OpenCL device.
func testDevices(t testing.TB) []rt.DeviceInfo {
	t.Helper()
	infos, err := Backend{}.Devices()
	if err != nil {
		if errors.Is(err, rt.ErrUnavailable) {
			t.Skipf("no OpenCL platform/device: %v", err)
		}
		t.Fatal(err)
	}
	if s := os.Getenv(DeviceEnv); s != "" {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || i >= len(infos) {
			t.Fatalf("%s=%q: want a device index below %d", DeviceEnv, s, len(infos))
		}
		return infos[i : i+1]
	}
	return infos
}

// forEachDevice runs f in a subtest per device, with the device open.
func forEachDevice(t *testing.T, f func(t *testing.T, d *device)) {
	for _, info := range testDevices(t) {
		t.Run(fmt.Sprintf("dev%d", info.Index), func(t *testing.T) {
			dev, err := Backend{}.Open(info.Index)
			if err != nil {
				t.Fatalf("open %s (%s): %v", info.Spec(), info.Name, err)
			}
			defer dev.Close()
			f(t, dev.(*device))
		})
	}
}

func TestDevices(t *testing.T) {
	for _, info := range testDevices(t) {
		t.Logf("%s: %s [%s] driver %q, %d MiB, fp16=%v fp64=%v unified=%v", info.Spec(), info.Name, info.Kind, info.Driver, info.Memory>>20, info.FP16, info.FP64, info.Unified)
		for _, kv := range info.Details {
			t.Logf("    %s: %s", kv[0], kv[1])
		}
	}
	if _, ok := rt.Lookup(BackendName); !ok {
		t.Fatal("backend not registered")
	}
}

func TestConformance(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { conformance.Run(t, d) })
}

// TestConformanceSplit runs the conformance table with one kernel per
// program and the GEMM activations fixed at build time (what GPUs get),
// on every device: pocl builds whole files otherwise.
func TestConformanceSplit(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) {
		d.split = true
		conformance.Run(t, d)
	})
}

// TestGradients checks the Trainer's gradients of every differentiable op
// (PyTorch references) on every OpenCL device.
func TestGradients(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { gradconf.Run(t, d) })
}

// TestONNXCorpus runs the ONNX backend node tests on every OpenCL device:
// the whole corpus when it is present (../shared/onnx-node-tests.tgz or
// $VRUN_ONNX_CORPUS), else the vendored cases, with the floor of passes
// that internal/floors records for the device.
func TestONNXCorpus(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { onnxcorpus.RunTest(t, d) })
}

func TestE2E(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { e2e.Check(t, d) })
}

// TestStressGC opens, uses and closes each device again and again in two
// goroutines under GOGC=1 with forced collections (e2e.StressGC); the
// shim passes Go memory to C on every call. VRUN_CL_STRESS sets the
// cycles per goroutine (default 10).
func TestStressGC(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cycles := 10
	if n, err := strconv.Atoi(os.Getenv("VRUN_CL_STRESS")); err == nil && n > 0 {
		cycles = n
	}
	for _, info := range testDevices(t) {
		t.Run(fmt.Sprintf("dev%d", info.Index), func(t *testing.T) {
			e2e.StressGC(t, func() (rt.Device, error) { return Backend{}.Open(info.Index) }, 2, cycles)
		})
	}
}

// TestConcurrency runs the end-to-end models from many goroutines, two
// sessions with Parallel 3 on each device (CI runs it under -race).
func TestConcurrency(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { e2e.Concurrent(t, d) })
}
