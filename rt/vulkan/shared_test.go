//go:build cgo

package vulkan

import (
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

// TestConcurrency runs the end-to-end models from many goroutines, two
// sessions with Parallel 3 on the one device (CI runs it under -race).
func TestConcurrency(t *testing.T) { e2e.Concurrent(t, testDevice(t)) }

// TestONNXCorpus runs the ONNX backend node tests on the Vulkan device:
// the whole corpus when it is present (../shared/onnx-node-tests.tgz or
// $VRUN_ONNX_CORPUS), else the vendored cases. A case fails only on a
// wrong answer or an unexpected error; cases whose ops the device does not
// implement are skipped with the reason, and fewer passes than the floor
// in internal/floors fail the test.
func TestONNXCorpus(t *testing.T) { onnxcorpus.RunTest(t, testDevice(t)) }

// TestRealModels runs the exported PyTorch models (squeezenet, transformer,
// LSTM) on the Vulkan device against PyTorch and onnxruntime outputs.
func TestRealModels(t *testing.T) { realmodels.Check(t, testDevice(t)) }
