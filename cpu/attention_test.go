package cpu

import (
	"testing"

	"github.com/vrun-go/vrun/internal/attntest"
)

// TestAttention runs the shared rt.Attention table (internal/attntest):
// f32 through the GEMM path and the reference loop, f64 through the
// reference loop, against a float64 reference.
func TestAttention(t *testing.T) {
	attntest.Run(t, newEnv(t).dev)
}

// TestAttentionModels runs the transformer models fused and unfused
// (internal/attntest.Models).
func TestAttentionModels(t *testing.T) {
	attntest.Models(t, newEnv(t).dev, true)
}
