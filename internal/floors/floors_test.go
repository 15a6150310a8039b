package floors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// recorder is a testing.TB that records Errorf and Logf calls.
type recorder struct {
	testing.TB
	errs, logs []string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Errorf(f string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }
func (r *recorder) Logf(f string, args ...any)   { r.logs = append(r.logs, fmt.Sprintf(f, args...)) }

var (
	cpuInfo      = rt.DeviceInfo{Backend: "cpu", Name: "Intel Xeon"}
	lavapipeInfo = rt.DeviceInfo{Backend: "vulkan", Name: "llvmpipe (LLVM 15.0.6, 256 bits)"}
	poclInfo     = rt.DeviceInfo{Backend: "opencl", Name: "pthread-skylake", Driver: "Portable Computing Language 3.1+debian"}
	gpuInfo      = rt.DeviceInfo{Backend: "cuda", Name: "NVIDIA H200"}
	// otherGPU is a device with no floor recorded.
	otherGPU = rt.DeviceInfo{Backend: "cuda", Name: "NVIDIA GeForce RTX 4090"}
)

func TestClass(t *testing.T) {
	for _, tc := range []struct {
		info rt.DeviceInfo
		want string
	}{
		{cpuInfo, CPU}, {lavapipeInfo, Lavapipe}, {poclInfo, Pocl}, {gpuInfo, "cuda/NVIDIA H200"},
		{rt.DeviceInfo{Backend: "vulkan", Name: "NVIDIA H200"}, "vulkan/NVIDIA H200"},
		{rt.DeviceInfo{Backend: "opencl", Name: "NVIDIA H200", Driver: "NVIDIA 580"}, "opencl/NVIDIA H200"},
	} {
		if got := Class(tc.info); got != tc.want {
			t.Errorf("Class(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}

// TestH200Floors checks the floors recorded for the H200 through each GPU
// backend.
func TestH200Floors(t *testing.T) {
	for _, tc := range []struct {
		suite Suite
		class string
		want  int
	}{
		{Conformance, H200CUDA, 272}, {Conformance, H200Vulkan, 272}, {Conformance, H200OpenCL, 272},
		{Gradients, H200CUDA, 436}, {Gradients, H200Vulkan, 436}, {Gradients, H200OpenCL, 436},
		{Vendored, H200Vulkan, 1229}, {Vendored, H200OpenCL, 1231},
	} {
		backend, name, _ := strings.Cut(tc.class, "/")
		if n, ok := Min(tc.suite, rt.DeviceInfo{Backend: backend, Name: name}); !ok || n != tc.want {
			t.Errorf("%s on %s: floor %d, %v; want %d", tc.suite, tc.class, n, ok, tc.want)
		}
	}
}

// TestTable checks that every suite has a floor for each device class CI
// runs, and that the floors are today's counts, not placeholders.
func TestTable(t *testing.T) {
	for _, s := range []Suite{Conformance, Gradients, Corpus, Vendored} {
		for _, c := range []rt.DeviceInfo{cpuInfo, lavapipeInfo, poclInfo} {
			n, ok := Min(s, c)
			if !ok || n < 200 {
				t.Errorf("%s on %s: floor %d, %v", s, Class(c), n, ok)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	min, _ := Min(Conformance, cpuInfo)
	for _, tc := range []struct {
		info       rt.DeviceInfo
		pass       int
		errs, logs int
	}{
		{cpuInfo, min, 0, 0},
		{cpuInfo, min + 5, 0, 0},
		{cpuInfo, min - 1, 1, 0},
		{cpuInfo, 0, 1, 0},
		{gpuInfo, min, 0, 0},
		{gpuInfo, min - 1, 1, 0},
		{otherGPU, 3, 0, 1}, // no floor recorded: logged
	} {
		r := &recorder{}
		Check(r, Conformance, tc.info, tc.pass)
		if len(r.errs) != tc.errs || len(r.logs) != tc.logs {
			t.Errorf("Check(%s, %d): errors %q, logs %q; want %d errors, %d logs", Class(tc.info), tc.pass, r.errs, r.logs, tc.errs, tc.logs)
		}
	}
}
