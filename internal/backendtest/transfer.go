package backendtest

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// Transfers benchmarks the copies of dev at one size, as sub-benchmarks
// of b in bytes per second: host to device (H2D) and device to host (D2H)
// from ordinary Go memory ("pageable") and from rt.AllocHost memory
// ("pinned"), and device to device (D2D, rt.CopyBuffer). Every buffer is
// written once before the timing, so that first-touch page faults are
// not measured.
func Transfers(b *testing.B, dev rt.Device, size int64) {
	x, err := dev.Alloc(size)
	if err != nil {
		b.Skip(err)
	}
	defer x.Free()
	y, err := dev.Alloc(size)
	if err != nil {
		b.Skip(err)
	}
	defer y.Free()
	pageable := make([]byte, size)
	for i := range pageable {
		pageable[i] = byte(i*7 + 1)
	}
	hb, err := rt.AllocHost(dev, size)
	if err != nil {
		b.Skip(err)
	}
	defer hb.Free()
	pinned := hb.Bytes()[:size]
	copy(pinned, pageable)
	for _, f := range []func() error{
		func() error { return dev.Write(x, 0, pageable) }, func() error { return dev.Write(y, 0, pinned) },
		func() error { return dev.Read(pageable, y, 0) }, func() error { return dev.Read(pinned, x, 0) },
	} {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	mib := fmt.Sprintf("%dMiB", size>>20)
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"H2D/pageable", func() error { return dev.Write(x, 0, pageable) }},
		{"H2D/pinned", func() error { return dev.Write(x, 0, pinned) }},
		{"D2H/pageable", func() error { return dev.Read(pageable, x, 0) }},
		{"D2H/pinned", func() error { return dev.Read(pinned, x, 0) }},
		{"D2D", func() error { return rt.CopyBuffer(dev, y, 0, x, 0, size) }},
	} {
		b.Run(c.name+"/"+mib, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
