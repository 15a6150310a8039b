//go:build cgo

package clshim

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// BenchmarkGEMM times Submit+Wait of a recorded stream holding one f32
// n×n×n MatMul and reports TFLOP/s. n>1024 is skipped on CPU devices.
func BenchmarkGEMM(b *testing.B) {
	for _, info := range testDevices(b) {
		for _, n := range []int{1024, 2048, 4096, 8192} {
			b.Run(fmt.Sprintf("dev%d/n=%d", info.Index, n), func(b *testing.B) {
				if n > 1024 && info.Kind == rt.KindCPU {
					b.Skip("n>1024 skipped on a CPU device")
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
				op := &rt.MatMul{A: rt.Ref{Buf: a, DType: rt.F32, Shape: []int{n, n}}, B: rt.Ref{Buf: bb, DType: rt.F32, Shape: []int{n, n}},
					Y: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{n, n}}, Batch: 1, M: n, N: n, K: n, Alpha: 1}
				sec := timeOp(b, d, op, 1)
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)/sec/1e12, "TFLOP/s")
			})
		}
	}
}

// timeOp records op reps times into a stream of d, submits it once to
// warm up (the first launch compiles the work-group function on some
// drivers), then times b.N Submit+Wait rounds and returns the seconds per
// op.
func timeOp(b *testing.B, d rt.Device, op rt.Op, reps int) float64 {
	b.Helper()
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for r := 0; r < reps; r++ {
		if err := s.Launch(op); err != nil {
			b.Fatal(err)
		}
	}
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
	return b.Elapsed().Seconds() / float64(b.N) / float64(reps)
}

// BenchmarkGEMV times gemm.cl's gemv kernel on an LLM-like projection,
// y = x·W with W 4096 × n (column mode) and y = x·W^T with W n × 4096
// (row mode, the Linear layout), f32 and f16 weights (rt.HalfWeights),
// and reports the GB/s of reading W (Submit+Wait, so small sizes include
// the launch). Only n = 4096 runs on CPU devices.
func BenchmarkGEMV(b *testing.B) {
	const k = 4096
	for _, info := range testDevices(b) {
		for _, n := range []int{4096, 14336} {
			for _, tb := range []bool{false, true} {
				for _, wt := range []rt.DType{rt.F32, rt.F16} {
					mode := "xW"
					if tb {
						mode = "xWT"
					}
					b.Run(fmt.Sprintf("dev%d/%s/%dx%d/w%s", info.Index, mode, k, n, wt), func(b *testing.B) {
						if n > 4096 && info.Kind == rt.KindCPU {
							b.Skip("n>4096 skipped on a CPU device")
						}
						d, err := Backend{}.Open(info.Index)
						if err != nil {
							b.Fatal(err)
						}
						defer d.Close()
						ref := func(dt rt.DType, n int, v float64) rt.Ref {
							buf, err := d.Alloc(int64(dt.Size() * n))
							if err != nil {
								b.Fatal(err)
							}
							r := rt.Ref{Buf: buf, DType: dt, Shape: []int{n}}
							backendtest.Run(b, d, &rt.Fill{Y: r, Value: v})
							return r
						}
						op := &rt.MatMul{A: ref(rt.F32, k, 0.5), B: ref(wt, k*n, 0.25), Y: ref(rt.F32, n, 0),
							Batch: 1, M: 1, N: n, K: k, TransB: tb, Alpha: 1}
						sec := timeOp(b, d, op, 1)
						b.ReportMetric(float64(k*n*wt.Size())/sec/1e9, "GB/s")
					})
				}
			}
		}
	}
}

// BenchmarkConv times Submit+Wait of a recorded stream holding one f32
// Conv (bias and ReLU fused) of ResNet-18 and MobileNetV2 layers at
// batch 1, and reports TFLOP/s (2 flops per multiply-add). Only the
// first two shapes run on CPU devices.
func BenchmarkConv(b *testing.B) {
	type shape struct {
		name                 string
		c, h, k, kh, s, p, g int
	}
	shapes := []shape{
		{"r18_3x3_64_56", 64, 56, 64, 3, 1, 1, 1},
		{"mv2_dw_144_56", 144, 56, 144, 3, 1, 1, 144},
		{"r18_stem_7x7", 3, 224, 64, 7, 2, 3, 1},
		{"r18_3x3_128_28", 128, 28, 128, 3, 1, 1, 1},
		{"r18_3x3_256_14", 256, 14, 256, 3, 1, 1, 1},
		{"r18_3x3_512_7", 512, 7, 512, 3, 1, 1, 1},
		{"mv2_pw_96_112_24", 96, 56, 24, 1, 1, 0, 1},
		{"mv2_pw_960_7_160", 960, 7, 160, 1, 1, 0, 1},
	}
	for _, info := range testDevices(b) {
		for i, sh := range shapes {
			b.Run(fmt.Sprintf("dev%d/%s", info.Index, sh.name), func(b *testing.B) {
				if i > 1 && info.Kind == rt.KindCPU {
					b.Skip("skipped on a CPU device")
				}
				d, err := Backend{}.Open(info.Index)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				oh := (sh.h+2*sh.p-sh.kh)/sh.s + 1
				o := &rt.Conv{N: 1, C: sh.c, H: sh.h, Width: sh.h, K: sh.k, OH: oh, OW: oh, KH: sh.kh, KW: sh.kh,
					StrideH: sh.s, StrideW: sh.s, PadT: sh.p, PadL: sh.p, DilH: 1, DilW: 1, Groups: sh.g, Act: rt.Activation{Fn: rt.Relu}}
				alloc := func(n int, v float64) rt.Ref {
					buf, err := d.Alloc(int64(4 * n))
					if err != nil {
						b.Fatal(err)
					}
					r := rt.Ref{Buf: buf, DType: rt.F32, Shape: []int{n}}
					s, _ := d.NewStream(rt.StreamOptions{})
					s.Launch(&rt.Fill{Y: r, Value: v})
					s.Submit()
					s.Wait()
					s.Close()
					return r
				}
				o.X = alloc(sh.c*sh.h*sh.h, 0.5)
				o.W = alloc(sh.k*sh.c/sh.g*sh.kh*sh.kh, 0.01)
				o.Bias = alloc(sh.k, 0.1)
				o.Y = alloc(sh.k*oh*oh, 0)
				o.X.Shape = []int{1, sh.c, sh.h, sh.h}
				o.W.Shape = []int{sh.k, sh.c / sh.g, sh.kh, sh.kh}
				o.Y.Shape = []int{1, sh.k, oh, oh}
				sec := timeOp(b, d, o, 1)
				flops := 2 * float64(sh.k*oh*oh) * float64(sh.c/sh.g*sh.kh*sh.kh)
				b.ReportMetric(flops/sec/1e12, "TFLOP/s")
				b.ReportMetric(sec*1e6, "µs/op")
			})
		}
	}
}

// convRuleShapes are batch-1 convolutions of resnet18/50, squeezenet1_1
// and mobilenet_v2 that run on conv_gemm (rt/vulkan's convSweepShapes).
var convRuleShapes = []struct {
	name                     string
	c, h, k, kh, stride, pad int
}{
	{"r18conv1", 3, 224, 64, 7, 2, 3},
	{"r18l1", 64, 56, 64, 3, 1, 1},
	{"r18l2a", 64, 56, 128, 3, 2, 1},
	{"r18l2", 128, 28, 128, 3, 1, 1},
	{"r18l2ds", 64, 56, 128, 1, 2, 0},
	{"r18l3a", 128, 28, 256, 3, 2, 1},
	{"r18l3", 256, 14, 256, 3, 1, 1},
	{"r18l4a", 256, 14, 512, 3, 2, 1},
	{"r18l4", 512, 7, 512, 3, 1, 1},
	{"r50l4a", 2048, 7, 512, 1, 1, 0},
	{"r50l4b", 512, 7, 2048, 1, 1, 0},
	{"r50l3a", 1024, 14, 256, 1, 1, 0},
	{"r50l3b", 256, 14, 1024, 1, 1, 0},
	{"sqexp3", 64, 13, 256, 3, 1, 1},
	{"sqexp1", 64, 13, 256, 1, 1, 0},
	{"sqsq13", 512, 13, 64, 1, 1, 0},
	{"sqcls", 512, 13, 1000, 1, 1, 0},
	{"sqexp3b", 32, 27, 128, 3, 1, 1},
	{"mbpw7a", 160, 7, 960, 1, 1, 0},
	{"mbpw7b", 960, 7, 160, 1, 1, 0},
	{"mbpw14a", 96, 14, 576, 1, 1, 0},
	{"mbpw14b", 576, 14, 96, 1, 1, 0},
	{"mbpw28", 192, 28, 32, 1, 1, 0},
}

// BenchmarkConvRule times each convRuleShapes layer (f32, batch 1, bias
// and ReLU, a residual where named "res") under pickConv's rule ("auto":
// narrow tiles and shallow split-K) and the former one ("wide",
// VRUN_CL_CONV=wide), each recorded 16 times into one stream so that the
// GPU stays busy as inside a model; it reports µs per convolution, the
// tile and split as tm x tn / S, and TFLOP/s. GPU devices only.
func BenchmarkConvRule(b *testing.B) {
	const reps = 16
	for _, info := range testDevices(b) {
		if info.Kind == rt.KindCPU {
			continue
		}
		d, err := Backend{}.Open(info.Index)
		if err != nil {
			b.Fatal(err)
		}
		dev := d.(*device)
		alloc := func(n int, v float64, shape ...int) rt.Ref {
			buf, err := d.Alloc(int64(4 * n))
			if err != nil {
				b.Fatal(err)
			}
			r := rt.Ref{Buf: buf, DType: rt.F32, Shape: []int{n}}
			s, _ := d.NewStream(rt.StreamOptions{})
			s.Launch(&rt.Fill{Y: r, Value: v})
			s.Submit()
			s.Wait()
			s.Close()
			r.Shape = shape
			return r
		}
		for _, sh := range convRuleShapes {
			for _, res := range []bool{false, true} {
				oh := (sh.h+2*sh.pad-sh.kh)/sh.stride + 1
				o := &rt.Conv{N: 1, C: sh.c, H: sh.h, Width: sh.h, K: sh.k, OH: oh, OW: oh, KH: sh.kh, KW: sh.kh,
					StrideH: sh.stride, StrideW: sh.stride, PadT: sh.pad, PadL: sh.pad, DilH: 1, DilW: 1, Groups: 1,
					Act: rt.Activation{Fn: rt.Relu}}
				o.X = alloc(sh.c*sh.h*sh.h, 0.5, 1, sh.c, sh.h, sh.h)
				o.W = alloc(sh.k*sh.c*sh.kh*sh.kh, 0.01, sh.k, sh.c, sh.kh, sh.kh)
				o.Bias = alloc(sh.k, 0.1, sh.k)
				o.Y = alloc(sh.k*oh*oh, 0, 1, sh.k, oh, oh)
				name := sh.name
				if res {
					o.Res = alloc(sh.k*oh*oh, 0.2, 1, sh.k, oh, oh)
					name += "res"
				}
				flops := 2 * float64(sh.k*oh*oh) * float64(sh.c*sh.kh*sh.kh)
				for _, rule := range []string{"auto", "wide"} {
					b.Run(fmt.Sprintf("dev%d/%s/%s", info.Index, name, rule), func(b *testing.B) {
						dev.convRule = rule
						defer func() { dev.convRule = "" }()
						tile, split := dev.pickConv(rt.F32, sh.k, oh*oh, 1, sh.c*sh.kh*sh.kh)
						sec := timeOp(b, d, o, reps)
						b.ReportMetric(sec*1e6, "µs/conv")
						b.ReportMetric(flops/sec/1e12, "TFLOP/s")
						b.ReportMetric(float64(tile.tm), "tm")
						b.ReportMetric(float64(tile.tn), "tn")
						b.ReportMetric(float64(split), "splits")
					})
				}
				for _, r := range []rt.Ref{o.X, o.W, o.Bias, o.Y, o.Res} {
					if r.Buf != nil {
						r.Buf.Free()
					}
				}
			}
		}
		d.Close()
	}
}
