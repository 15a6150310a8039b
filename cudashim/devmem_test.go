//go:build cgo

package cudashim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
)

// TestMemory runs the memory conformance checks (pageable and pinned
// transfers, stream copies from AllocHost memory, device Copy, the pool)
// on the CUDA device. It skips without one.
func TestMemory(t *testing.T) {
	d := openTest(t, false)
	backendtest.Memory(t, d, 1<<62)
	backendtest.MemPool(t, d)
}

// TestConvStrideY runs the shared check of rt.Conv.StrideY (images apart
// in a Concat's output), which this backend refuses.
func TestConvStrideY(t *testing.T) {
	backendtest.ConvStrideY(t, openTest(t, false))
}
