package floors

import (
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// Suite names a shared test suite.
type Suite string

// The suites with floors.
const (
	// Conformance is the op conformance table (internal/conformance,
	// testdata/conformance, NumPy references).
	Conformance Suite = "conformance"
	// Gradients is the gradient table (internal/gradconf, PyTorch
	// references).
	Gradients Suite = "gradients"
	// Corpus is the whole ONNX backend node-test corpus, read from its
	// .tgz (internal/onnxcorpus.Find).
	Corpus Suite = "onnx corpus"
	// Vendored is the corpus cases copied into testdata/onnx/node, which a
	// fresh clone (and CI) runs when the .tgz is absent.
	Vendored Suite = "onnx vendored"
)

// Device classes of the table.
const (
	CPU      = "cpu"             // the pure-Go CPU backend
	Lavapipe = "vulkan/lavapipe" // Mesa's llvmpipe Vulkan driver
	Pocl     = "opencl/pocl"     // the Portable Computing Language CPU driver

	// The NVIDIA H200 through each GPU backend (driver r580): the lead's
	// GPU machine, not CI.
	H200CUDA   = "cuda/NVIDIA H200"
	H200Vulkan = "vulkan/NVIDIA H200"
	H200OpenCL = "opencl/NVIDIA H200"
)

// table holds the floors by suite and device class. The counts of CPU,
// Lavapipe and Pocl were measured on Debian 12 (Mesa 22.3.6, pocl 3.1)
// with the corpus of ../shared/onnx-node-tests.tgz (1884 cases); those of
// the H200 classes from the test binaries' logs on the H200 machine
// (driver 580.159.04, 2026-12-03; conformance 272 of 272 on each GPU
// backend at 16fffd8), which ran no corpus, and no vendored
// cases through CUDA.
var table = map[Suite]map[string]int{
	Conformance: {CPU: 272, Lavapipe: 272, Pocl: 272, H200CUDA: 272, H200Vulkan: 272, H200OpenCL: 272},
	Gradients:   {CPU: 436, Lavapipe: 436, Pocl: 436, H200CUDA: 436, H200Vulkan: 436, H200OpenCL: 436},
	Corpus:      {CPU: 1258, Lavapipe: 1261, Pocl: 1258},
	Vendored:    {CPU: 1231, Lavapipe: 1229, Pocl: 1231, H200Vulkan: 1229, H200OpenCL: 1231},
}

// Class returns the device class of info: [CPU], [Lavapipe], [Pocl], or
// "backend/name" for any other device.
func Class(info rt.DeviceInfo) string {
	switch {
	case info.Backend == "cpu":
		return CPU
	case info.Backend == "vulkan" && strings.HasPrefix(info.Name, "llvmpipe"):
		return Lavapipe
	case info.Backend == "opencl" && strings.Contains(info.Driver, "Portable Computing Language"):
		return Pocl
	}
	return info.Backend + "/" + info.Name
}

// Min returns the floor of suite on the device, and whether one is
// recorded.
func Min(suite Suite, info rt.DeviceInfo) (int, bool) {
	n, ok := table[suite][Class(info)]
	return n, ok
}

// Check fails t when fewer than the floor of suite pass on the device
// (pass is the number of cases that passed), and logs the count when the
// device has no recorded floor.
func Check(t testing.TB, suite Suite, info rt.DeviceInfo, pass int) {
	t.Helper()
	min, ok := Min(suite, info)
	switch {
	case !ok:
		t.Logf("%s on %s: %d cases pass; no floor is recorded for %q (add it to internal/floors)", suite, info.Spec(), pass, Class(info))
	case pass < min:
		t.Errorf("%s on %s (%s): %d cases pass, fewer than the floor of %d: cases that passed now skip or fail", suite, info.Spec(), Class(info), pass, min)
	}
}

// Run runs a suite on dev: run gets the folder that dir returns and
// returns how many cases passed, which [Check] then holds to the suite's
// floor. The conformance and gradient tables' Run functions are this.
func Run(t *testing.T, suite Suite, dev rt.Device, dir func() (string, error), run func(*testing.T, rt.Device, string) int) {
	t.Helper()
	d, err := dir()
	if err != nil {
		t.Fatal(err)
	}
	Check(t, suite, dev.Info(), run(t, dev, d))
}
