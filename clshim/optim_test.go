//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/optimconf"
)

// TestOptimStep checks OptimStep against torch.optim (testdata/optimstep)
// on every OpenCL device.
func TestOptimStep(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { optimconf.Run(t, d) })
}
