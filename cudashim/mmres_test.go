//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/mmres"
)

// TestMatMulRes runs the shared MatMul-with-residual table
// (internal/mmres) against its float64 reference (cuBLAS, with the bias
// and the residual summed into Y first).
func TestMatMulRes(t *testing.T) {
	mmres.Run(t, openTest(t, true))
}
