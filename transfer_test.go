package vrun_test

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// BenchmarkTransfer measures the copies of every available device (every
// registered backend's devices, opened through the registry), in bytes
// per second (the MB/s column): host to device (H2D) and device to host
// (D2H) from ordinary Go memory ("pageable") and from the device's pinned
// memory (rt.AllocHost, "pinned"), and device to device (D2D,
// rt.CopyBuffer). Each copy is synchronous. Select one device with
// -bench 'Transfer/vulkan:0'. docs/benchmarks.md lists the results.
func BenchmarkTransfer(b *testing.B) {
	for _, l := range rt.ListDevices() {
		for _, info := range l.Devices {
			spec := info.Spec()
			b.Run(spec, func(b *testing.B) {
				dev, err := rt.Open(spec, nil)
				if err != nil {
					b.Skipf("%s: %v", spec, err)
				}
				defer dev.Close()
				for _, size := range []int64{1 << 20, 64 << 20} {
					backendtest.Transfers(b, dev, size)
				}
			})
		}
	}
}
