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

// TestAttnTiled checks that the tiled variant needs its shared memory
// (the rule itself is internal/attnrule's TestTiled).
func TestAttnTiled(t *testing.T) {
	defer func(f string) { attnForce = f }(attnForce)
	attnForce = ""
	o := &rt.Attention{B: 8, H: 12, Lq: 128, Lk: 128, D: 64, Dv: 64}
	for _, c := range []struct {
		lim  uint32
		want bool
		wg   int
	}{
		{49152, true, 128},
		{attnTiledShared, true, 128},
		{attnTiledShared - 1, false, 0},
		{16384, false, 0},
	} {
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
