package cpu

import (
	"testing"

	"github.com/vrun-go/vrun/internal/mmres"
)

// TestMatMulRes checks that the CPU backend refuses a MatMul with a
// residual (it adds none; the engine keeps the Add).
func TestMatMulRes(t *testing.T) {
	mmres.Refused(t, newEnv(t).dev)
}
