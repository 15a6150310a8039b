//go:build cgo

package vulkan

import (
	"testing"

	"github.com/vrun-go/vrun/rt"

	"github.com/vrun-go/vrun/internal/attntest"
)

// TestAttention runs the shared rt.Attention table (internal/attntest)
// against its float64 reference: f32 and, where the device stores f16,
// f16; f64 is not implemented (Supports refuses it and the case skips).
// It runs with the default choice of kernel, and with each variant of
// attention.comp forced (the tiled one, at both workgroup sizes, takes
// head sizes up to 64).
func TestAttention(t *testing.T) {
	d := testDevice(t)
	defer func(f string) { attnForce = f }(attnForce)
	for _, force := range []string{"", "rows", "tiled64", "tiled128"} {
		t.Run("kernel="+force, func(t *testing.T) {
			attnForce = force
			attntest.Run(t, d)
		})
	}
}

// TestAttnTiled checks which shapes take the tiled variant and its
// workgroup size.
func TestAttnTiled(t *testing.T) {
	for _, c := range []struct {
		b, h, lq, d, dv int
		lim             uint32
		want            bool
		wg              int
	}{
		{8, 12, 128, 64, 64, 49152, true, 128}, // BERT-base at batch 8: 384 workgroups of 32 rows
		{1, 12, 128, 64, 64, 49152, true, 64},  // batch 1: 48 of 32 rows, so 96 of 16
		{2, 3, 37, 24, 24, 49152, true, 64},
		{1, 12, 128, 96, 64, 49152, false, 0}, // D > 64
		{1, 12, 128, 64, 128, 49152, false, 0},
		{3, 2, 1, 64, 64, 49152, false, 0},  // decoding: one query row
		{1, 2, 15, 64, 64, 49152, false, 0}, // under 16 rows
		{1, 2, 16, 64, 64, 49152, true, 64},
		{8, 12, 128, 64, 64, 16384, false, 0}, // 16 KiB of shared memory
	} {
		o := &rt.Attention{B: c.b, H: c.h, Lq: c.lq, Lk: c.lq, D: c.d, Dv: c.dv}
		ok, wg := attnTiled(o, c.lim)
		if ok != c.want || wg != c.wg {
			t.Errorf("%+v: attnTiled = %v, %d; want %v, %d", c, ok, wg, c.want, c.wg)
		}
	}
}

// TestAttentionModels runs the transformer models fused (one Attention op
// per layer) and unfused on the device and compares them
// (internal/attntest.Models; BERT too with $VRUN_MODELS_DIR).
func TestAttentionModels(t *testing.T) {
	attntest.Models(t, testDevice(t), true)
}
