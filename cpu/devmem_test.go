package cpu

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
)

func TestMemory(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	backendtest.Memory(t, d, 1<<62)
}

func TestMemPool(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	backendtest.MemPool(t, d)
}

// TestConvStrideY runs the shared check of rt.Conv.StrideY (images apart
// in a Concat's output), which this backend refuses.
func TestConvStrideY(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	backendtest.ConvStrideY(t, d)
}
