package attnrule

import (
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestTiled is the rule's table: which shapes and knob values take the
// tiled kernel, and at which workgroup size.
func TestTiled(t *testing.T) {
	for _, c := range []struct {
		b, h, lq, d, dv int
		force           string
		want            bool
		wg              int
	}{
		{8, 12, 128, 64, 64, "", true, 128}, // BERT-base at batch 8: 384 workgroups of 32 rows
		{1, 12, 128, 64, 64, "", false, 0},  // batch 1: 96 workgroups of 16 rows, under 264
		{2, 12, 128, 64, 64, "", false, 0},  // 192
		{3, 12, 128, 64, 64, "", true, 64},  // 288 of 16 rows, 144 of 32
		{6, 12, 128, 64, 64, "", true, 128}, // 288 of 32 rows
		{2, 3, 37, 24, 24, "", false, 0},
		{1, 12, 128, 96, 64, "", false, 0}, // D > 64
		{8, 12, 128, 64, 128, "", false, 0},
		{3, 2, 1, 64, 64, "", false, 0},     // decoding: one query row
		{64, 2, 15, 64, 64, "", false, 0},   // under 16 rows
		{132, 2, 16, 64, 64, "", true, 128}, // 16 rows: 264 workgroups of either size
		{131, 2, 16, 64, 64, "", false, 0},  // 262
		{1, 12, 128, 64, 64, "tiled", true, 64},
		{8, 12, 128, 64, 64, "rows", false, 0},
		{8, 12, 128, 64, 64, "tiled64", true, 64},
		{1, 2, 15, 64, 64, "tiled128", true, 128},
		{1, 2, 15, 64, 64, "tiled", true, 64},
		{1, 2, 15, 96, 64, "tiled64", false, 0}, // no knob lifts the head-size bound
	} {
		o := &rt.Attention{B: c.b, H: c.h, Lq: c.lq, Lk: c.lq, D: c.d, Dv: c.dv}
		ok, wg := Tiled(o, c.force)
		if ok != c.want || wg != c.wg {
			t.Errorf("%+v: Tiled = %v, %d; want %v, %d", c, ok, wg, c.want, c.wg)
		}
	}
}
