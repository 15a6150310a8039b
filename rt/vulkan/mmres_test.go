//go:build cgo

package vulkan

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/internal/mmres"
)

// TestMatMulRes runs the shared MatMul-with-residual table
// (internal/mmres) against its float64 reference: the residual added in
// matmul.comp's epilogue with the default tile and with the smallest one
// forced, and in splitk.comp's reduction with split-K forced.
func TestMatMulRes(t *testing.T) {
	d := testDevice(t)
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	for _, c := range []struct {
		tile  string
		split int
	}{{"", 0}, {"u", 0}, {"", 3}} {
		t.Run(fmt.Sprintf("tile=%s/split=%d", c.tile, c.split), func(t *testing.T) {
			forceGemmTile, forceSplitK = c.tile, c.split
			mmres.Run(t, d)
		})
	}
}
