//go:build cgo

package vulkan

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestMemory runs the memory conformance checks twice: on the device as
// it is (on lavapipe: unified, mapped buffers) and with buffers forced
// into unmapped memory, the staging and pinned paths of a discrete GPU.
func TestMemory(t *testing.T) {
	testDevice(t) // skips without a device
	for _, mode := range []string{"native", "staging", "rebar"} {
		t.Run(mode, func(t *testing.T) {
			staging, rebar := mode == "staging", mode == "rebar"
			forceStaging, forceDiscrete = staging, rebar
			defer func() { forceStaging, forceDiscrete = false, false }()
			b, _ := rt.Lookup("vulkan")
			d, err := b.Open(testIndex())
			if err != nil {
				t.Fatal(err)
			}
			if (staging || rebar) && rt.MapBuffer(d, mustAlloc(t, d)) != nil {
				t.Errorf("%s: Map gives the host a view of device buffers", mode)
			}
			backendtest.Memory(t, d, 1<<62)
			backendtest.MemPool(t, d)
			// Host buffers still alive at Close are freed by it.
			if _, err := d.(rt.HostAllocator).AllocHost(12345); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustAlloc(t *testing.T, d rt.Device) rt.Buffer {
	b, err := d.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

// BenchmarkTransferStaging measures the copies with device buffers forced
// into unmapped memory: on lavapipe, the staging paths of a discrete GPU
// (pageable memory goes through the staging buffer, pinned memory is
// copied by the device directly). The root package's BenchmarkTransfer
// measures the device as it is.
func BenchmarkTransferStaging(b *testing.B) {
	testDevice(b)
	forceStaging = true
	bk, _ := rt.Lookup("vulkan")
	d, err := bk.Open(testIndex())
	forceStaging = false
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for _, size := range []int64{1 << 20, 64 << 20} {
		backendtest.Transfers(b, d, size)
	}
}
