//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/attntest"
)

// TestAttention runs the shared rt.Attention table (internal/attntest)
// against its float64 reference: f32 and f16 (f64 is not implemented:
// Supports refuses it and the case skips).
func TestAttention(t *testing.T) {
	attntest.Run(t, openTest(t, true))
}

// TestAttentionModels runs the transformer models fused and unfused
// (internal/attntest.Models; BERT too with $VRUN_MODELS_DIR).
func TestAttentionModels(t *testing.T) {
	attntest.Models(t, openTest(t, true), true)
}
