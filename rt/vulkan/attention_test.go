//go:build cgo

package vulkan

import (
	"testing"

	"github.com/vrun-go/vrun/internal/attntest"
)

// TestAttention runs the shared rt.Attention table (internal/attntest)
// against its float64 reference: f32 and, where the device stores f16,
// f16; f64 is not implemented (Supports refuses it and the case skips).
func TestAttention(t *testing.T) {
	attntest.Run(t, testDevice(t))
}

// TestAttentionModels runs the transformer models fused (one Attention op
// per layer) and unfused on the device and compares them
// (internal/attntest.Models; BERT too with $VRUN_MODELS_DIR).
func TestAttentionModels(t *testing.T) {
	attntest.Models(t, testDevice(t), true)
}
