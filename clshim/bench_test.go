//go:build cgo

package clshim

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// BenchmarkGEMM times Submit+Wait of a recorded stream holding one f32
// n×n×n MatMul and reports GFLOP/s. n=4096 is skipped on CPU devices.
func BenchmarkGEMM(b *testing.B) {
	for _, info := range testDevices(b) {
		for _, n := range []int{1024, 4096} {
			b.Run(fmt.Sprintf("dev%d/n=%d", info.Index, n), func(b *testing.B) {
				if n > 1024 && info.Kind == rt.KindCPU {
					b.Skip("n=4096 skipped on a CPU device")
				}
				d, err := Backend{}.Open(info.Index)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				sz := int64(4 * n * n)
				a, _ := d.Alloc(sz)
				bb, _ := d.Alloc(sz)
				y, err := d.Alloc(sz)
				if err != nil {
					b.Fatal(err)
				}
				for _, op := range []rt.Op{
					&rt.Fill{Y: rt.Ref{Buf: a, DType: rt.F32, Shape: []int{n * n}}, Value: 0.5},
					&rt.Fill{Y: rt.Ref{Buf: bb, DType: rt.F32, Shape: []int{n * n}}, Value: 0.25},
				} {
					s, _ := d.NewStream(rt.StreamOptions{})
					s.Launch(op)
					s.Submit()
					s.Wait()
					s.Close()
				}
				s, err := d.NewStream(rt.StreamOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				op := &rt.MatMul{A: rt.Ref{Buf: a, DType: rt.F32, Shape: []int{n, n}}, B: rt.Ref{Buf: bb, DType: rt.F32, Shape: []int{n, n}},
					Y: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n, n}}, Batch: 1, M: n, N: n, K: n, Alpha: 1}
				if err := s.Launch(op); err != nil {
					b.Fatal(err)
				}
				// Warm up (first launch compiles the work-group function on some drivers).
				if err := s.Submit(); err != nil {
					b.Fatal(err)
				}
				if err := s.Wait(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Submit(); err != nil {
						b.Fatal(err)
					}
					if err := s.Wait(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)/sec/1e9, "GFLOP/s")
			})
		}
	}
}
