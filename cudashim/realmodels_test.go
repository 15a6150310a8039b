//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/realmodels"
)

// TestRealModels runs the exported PyTorch models (squeezenet, transformer,
// LSTM) on the GPU against PyTorch and onnxruntime outputs.
func TestRealModels(t *testing.T) { realmodels.Check(t, openTest(t, true)) }
