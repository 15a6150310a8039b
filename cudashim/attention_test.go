//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/attntest"
)

// TestAttention runs the shared rt.Attention table (internal/attntest)
// against its float64 reference: f32 and f16 (f64 is not implemented:
// Supports refuses it and the case skips), with the default choice of
// kernel and with each kind forced (the tiled ones take head sizes up to
// 64).
func TestAttention(t *testing.T) {
	d := openTest(t, true)
	defer func(f string) { attnForce = f }(attnForce)
	for _, force := range []string{"", "rows", "tiled64", "tiled128"} {
		t.Run("kernel="+force, func(t *testing.T) {
			attnForce = force
			attntest.Run(t, d)
		})
	}
}

// TestAttentionModels runs the transformer models fused and unfused
// (internal/attntest.Models; BERT too with $VRUN_MODELS_DIR).
func TestAttentionModels(t *testing.T) {
	attntest.Models(t, openTest(t, true), true)
}
