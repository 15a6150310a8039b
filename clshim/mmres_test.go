//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/mmres"
)

// TestMatMulRes checks that the OpenCL backend refuses a MatMul with a
// residual (it adds none; the engine keeps the Add).
func TestMatMulRes(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { mmres.Refused(t, d) })
}
