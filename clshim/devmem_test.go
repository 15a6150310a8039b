//go:build cgo

package clshim

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
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
// in a Concat's output) on the device's own choice of conv kernels
// (conv_gemm, and conv_direct for few channels per group), then again on a
// small forced tile with the GEMM depth split in three (split-K's
// epilogue writes Y).
func TestConvStrideY(t *testing.T) {
	forEachDevice(t, func(t *testing.T, d *device) {
		// The shared check accepts a refusal; this backend must not refuse.
		op := &rt.Conv{N: 2, C: 4, H: 3, Width: 3, K: 8, OH: 3, OW: 3, KH: 1, KW: 1, StrideH: 1, StrideW: 1,
			DilH: 1, DilW: 1, Groups: 1, StrideY: 100,
			X: rt.Ref{DType: rt.F32, Shape: []int{72}}, W: rt.Ref{DType: rt.F32, Shape: []int{32}},
			Y: rt.Ref{DType: rt.F32, Shape: []int{172}}}
		if err := d.Supports(op); err != nil {
			t.Fatalf("Supports of a Conv with StrideY: %v, want nil", err)
		}
		backendtest.ConvStrideY(t, d)
		t.Run("split3", func(t *testing.T) {
			defer func() { d.gemmForce, d.splitForce = nil, 0 }()
			d.gemmForce, d.splitForce = &gemmShape{32, 32, 16, 4, 4}, 3
			backendtest.ConvStrideY(t, d)
		})
	})
}
