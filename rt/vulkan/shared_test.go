//go:build cgo

package vulkan

import (
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/internal/conformance"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/gradconf"
	"github.com/vrun-go/vrun/internal/onnxcorpus"
	"github.com/vrun-go/vrun/internal/realmodels"
)

// TestConformance runs the shared op conformance table (NumPy references)
// through the engine on the Vulkan device.
func TestConformance(t *testing.T) { conformance.Run(t, testDevice(t)) }

// TestGradients checks the Trainer's gradients of every differentiable op
// (PyTorch references) on the Vulkan device.
func TestGradients(t *testing.T) { gradconf.Run(t, testDevice(t)) }

// TestModels runs the end-to-end MLP and CNN models on the Vulkan device.
func TestModels(t *testing.T) { e2e.Check(t, testDevice(t)) }

// TestONNXCorpus runs the ONNX backend node tests on the Vulkan device:
// the vendored cases always, the whole corpus when it is present
// (../shared/onnx-node-tests.tgz or $VRUN_ONNX_CORPUS). A case fails only
// on a wrong answer or an unexpected error; cases whose ops the device
// does not implement are skipped with the reason.
func TestONNXCorpus(t *testing.T) {
	dev := testDevice(t)
	corpus, err := onnxcorpus.OpenDir(filepath.Join("..", "..", "testdata", "onnx", "node"))
	if err != nil {
		t.Fatal(err)
	}
	minPass := 700
	if p, ok := onnxcorpus.Find(); ok && !testing.Short() {
		if corpus, err = onnxcorpus.Open(p); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("ONNX corpus not found at %s: running the vendored cases only", p)
	}
	rep := onnxcorpus.Run(corpus, dev, nil)
	for _, r := range rep.Results {
		if r.Status == onnxcorpus.Fail {
			if why, known := onnxcorpus.KnownFailures[r.Case]; !known {
				t.Errorf("%s: %s (ops %v)", r.Case, r.Reason, r.Ops)
			} else {
				t.Logf("%s: known failure: %s", r.Case, why)
			}
		}
	}
	t.Logf("ONNX node tests on %s (%s): %s", dev.Info().Spec(), dev.Info().Name, rep.Summary())
	if n := rep.Count(onnxcorpus.Pass); n < minPass {
		t.Errorf("%d cases pass, want at least %d", n, minPass)
	}
	if testing.Verbose() {
		t.Log(rep.String())
	}
}

// TestRealModels runs the exported PyTorch models (squeezenet, transformer,
// LSTM) on the Vulkan device against PyTorch and onnxruntime outputs.
func TestRealModels(t *testing.T) { realmodels.Check(t, testDevice(t)) }
