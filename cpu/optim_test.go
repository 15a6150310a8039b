package cpu

import (
	"testing"

	"github.com/vrun-go/vrun/internal/optimconf"
)

// TestOptimStep checks OptimStep against torch.optim (testdata/optimstep).
func TestOptimStep(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	optimconf.Run(t, d)
}
