//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/optimconf"
	"github.com/vrun-go/vrun/internal/optimref"
)

// TestOptimStep checks OptimStep against torch.optim (testdata/optimstep)
// on every OpenCL device.
func TestOptimStep(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { optimconf.Run(t, d) })
}

// TestOptimizers trains every optimizer configuration of testdata/optim
// for 20 steps on every OpenCL device and compares the weights after each
// step with torch.optim's.
func TestOptimizers(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { optimref.Check(t, d) })
}
