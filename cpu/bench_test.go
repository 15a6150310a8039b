package cpu

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// benchOp records op on a fresh stream and times Submit.
func benchOp(b *testing.B, d rt.Device, op rt.Op) {
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Launch(op); err != nil {
		b.Fatal(err)
	}
	if err := s.Submit(); err != nil { // warm up
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.Submit(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBuf(b *testing.B, d rt.Device, dt rt.DType, n int) rt.Ref {
	buf, err := d.Alloc(int64(n * dt.Size()))
	if err != nil {
		b.Fatal(err)
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i%7) - 3
	}
	if err := d.Write(buf, 0, rt.FromFloat64(dt, v, n).Data); err != nil {
		b.Fatal(err)
	}
	return rt.Ref{Buf: buf, DType: dt, Shape: []int{n}}
}

func BenchmarkGEMM(b *testing.B) {
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, n := range []int{256, 512, 1024, 2048} {
			b.Run(fmt.Sprintf("%s/n=%d", dt, n), func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				op := &rt.MatMul{A: benchBuf(b, d, dt, n*n), B: benchBuf(b, d, dt, n*n), Y: benchBuf(b, d, dt, n*n),
					Batch: 1, M: n, N: n, K: n, Alpha: 1}
				benchOp(b, d, op)
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func BenchmarkGEMV(b *testing.B) {
	for _, tb := range []bool{false, true} {
		b.Run(fmt.Sprintf("f32/4096x4096/transB=%v", tb), func(b *testing.B) {
			n := 4096
			d := NewDevice()
			defer d.Close()
			op := &rt.MatMul{A: benchBuf(b, d, rt.F32, n), B: benchBuf(b, d, rt.F32, n*n), Y: benchBuf(b, d, rt.F32, n),
				Batch: 1, M: 1, N: n, K: n, TransB: tb, Alpha: 1}
			benchOp(b, d, op)
			b.ReportMetric(4*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

func BenchmarkConv2D(b *testing.B) {
	cases := []struct {
		name string
		c, k int
		g    int
	}{
		{"resnet3x3/1x64x56x56", 64, 64, 1},
		{"depthwise3x3/1x64x56x56", 64, 64, 64},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := NewDevice()
			defer d.Close()
			H := 56
			op := &rt.Conv{X: benchBuf(b, d, rt.F32, c.c*H*H), W: benchBuf(b, d, rt.F32, c.k*c.c/c.g*9),
				Bias: benchBuf(b, d, rt.F32, c.k), Y: benchBuf(b, d, rt.F32, c.k*H*H),
				N: 1, C: c.c, H: H, Width: H, K: c.k, OH: H, OW: H, KH: 3, KW: 3, StrideH: 1, StrideW: 1,
				PadT: 1, PadL: 1, DilH: 1, DilW: 1, Groups: c.g, Act: rt.Activation{Fn: rt.Relu}}
			benchOp(b, d, op)
			flops := 2 * float64(c.k*c.c/c.g*9*H*H)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkBinaryAdd(b *testing.B) {
	n := 1 << 20
	d := NewDevice()
	defer d.Close()
	x := benchBuf(b, d, rt.F32, n)
	benchOp(b, d, &rt.Binary{Fn: rt.Add, A: x, B: x, Y: benchBuf(b, d, rt.F32, n)})
	b.ReportMetric(12*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
