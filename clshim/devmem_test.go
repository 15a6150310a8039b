//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
)

func TestMemory(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) {
		backendtest.Memory(t, d, 1<<62)
		backendtest.MemPool(t, d)
		// Host buffers still alive at Close are freed by it.
		if _, err := d.AllocHost(4097); err != nil {
			t.Fatal(err)
		}
		if u := d.MemoryUsage(); u.HostBuffers != 1 {
			t.Errorf("usage %+v, want one host buffer", u)
		}
	})
}

// TestConvStrideY runs the shared check of rt.Conv.StrideY (images apart
// in a Concat's output), which this backend refuses.
func TestConvStrideY(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) { backendtest.ConvStrideY(t, d) })
}
