//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/realmodels"
)

// TestRealModels runs the exported PyTorch models (squeezenet, transformer,
// LSTM) on every OpenCL device against PyTorch and onnxruntime outputs.
func TestRealModels(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { realmodels.Check(t, d) })
}
