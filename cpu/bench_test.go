package cpu

import (
	"fmt"
	"os"
	"testing"
	"time"

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
	b.ReportAllocs()
	b.ResetTimer()
	c0 := processCPU()
	for b.Loop() {
		if err := s.Submit(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0)
}

// reportCPU reports the process CPU time per op since c0 ("cpu-ns/op"):
// on a loaded machine it tracks the work done better than wall time.
func reportCPU(b *testing.B, c0 time.Duration) {
	if c := processCPU(); c > 0 && b.N > 0 {
		b.ReportMetric(float64(c-c0)/float64(b.N), "cpu-ns/op")
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

// BenchmarkGEMV: y = A·x ("Ax", dot products of A's rows, NumPy's a @ x)
// and y = x·A ("xA", NumPy's x @ a) for an n×n A, as MatMul with M = 1
// (TransB for Ax). GB/s counts the matrix once.
func BenchmarkGEMV(b *testing.B) {
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, n := range []int{256, 512, 1024, 2048, 4096} {
			for _, form := range []string{"Ax", "xA"} {
				b.Run(fmt.Sprintf("%s/n=%d/%s", dt, n, form), func(b *testing.B) {
					d := NewDevice()
					defer d.Close()
					op := &rt.MatMul{A: benchBuf(b, d, dt, n), B: benchBuf(b, d, dt, n*n), Y: benchBuf(b, d, dt, n),
						Batch: 1, M: 1, N: n, K: n, TransB: form == "Ax", Alpha: 1}
					benchOp(b, d, op)
					b.ReportMetric(float64(dt.Size())*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// benchOps records ops on a fresh stream and times Submit.
func benchOps(b *testing.B, d rt.Device, ops ...rt.Op) {
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, op := range ops {
		if err := s.Launch(op); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Submit(); err != nil { // warm up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := processCPU()
	for b.Loop() {
		if err := s.Submit(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0)
}

// BenchmarkBLAS1 is BLAS level 1 in primitive ops: AXPY (y += a·x) is
// Unary.Affine into scratch and Binary.Add into y, as NumPy's
// y += a * x; DOT is MatMul 1×n·n×1; NRM2 is Reduce.L2. GB/s counts
// the bytes each reads once (AXPY: x and y, and y written).
func BenchmarkBLAS1(b *testing.B) {
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, n := range []int{4096, 1 << 20} {
			sz := float64(dt.Size() * n)
			b.Run(fmt.Sprintf("AXPY/%s/n=%d", dt, n), func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				x, y, t := benchBuf(b, d, dt, n), benchBuf(b, d, dt, n), benchBuf(b, d, dt, n)
				benchOps(b, d, &rt.Unary{Fn: rt.Affine, Alpha: 0.5, X: x, Y: t}, &rt.Binary{Fn: rt.Add, A: y, B: t, Y: y})
				b.ReportMetric(3*sz*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("DOT/%s/n=%d", dt, n), func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				benchOps(b, d, &rt.MatMul{A: benchBuf(b, d, dt, n), B: benchBuf(b, d, dt, n), Y: benchBuf(b, d, dt, 1),
					Batch: 1, M: 1, N: 1, K: n, Alpha: 1})
				b.ReportMetric(2*sz*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("NRM2/%s/n=%d", dt, n), func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				benchOps(b, d, &rt.Reduce{Fn: rt.L2, X: benchBuf(b, d, dt, n), Y: benchBuf(b, d, dt, 1), Outer: 1, N: n, Inner: 1})
				b.ReportMetric(sz*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkOverhead is the cost of one op through a recorded stream: an
// empty op (a Fill of no elements), a 1-element Binary.Add and a
// 1-element Unary.Tanh, and a stream of 100 1-element adds (per op).
func BenchmarkOverhead(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		d := NewDevice()
		defer d.Close()
		y := benchBuf(b, d, rt.F32, 1)
		y.Shape = []int{0}
		benchOps(b, d, &rt.Fill{Y: y, Value: 1})
	})
	b.Run("add1", func(b *testing.B) {
		d := NewDevice()
		defer d.Close()
		x := benchBuf(b, d, rt.F32, 1)
		benchOps(b, d, &rt.Binary{Fn: rt.Add, A: x, B: x, Y: benchBuf(b, d, rt.F32, 1)})
	})
	b.Run("tanh1", func(b *testing.B) {
		d := NewDevice()
		defer d.Close()
		benchOps(b, d, &rt.Unary{Fn: rt.Tanh, X: benchBuf(b, d, rt.F32, 1), Y: benchBuf(b, d, rt.F32, 1)})
	})
	b.Run("add1x100", func(b *testing.B) {
		d := NewDevice()
		defer d.Close()
		x, y := benchBuf(b, d, rt.F32, 1), benchBuf(b, d, rt.F32, 1)
		ops := make([]rt.Op, 100)
		for i := range ops {
			ops[i] = &rt.Binary{Fn: rt.Add, A: x, B: y, Y: y}
		}
		benchOps(b, d, ops...)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/op-in-stream")
	})
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

// BenchmarkElementwise times elementwise ops on n f32 elements
// (contiguous), in GB/s of operand traffic.
func BenchmarkElementwise(b *testing.B) {
	for _, n := range []int{16384, 1 << 20} {
		for _, c := range []struct {
			name string
			op   func(x, y, z rt.Ref) rt.Op
			refs int
		}{
			{"relu", func(x, y, _ rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Relu, X: x, Y: y} }, 2},
			{"tanh", func(x, y, _ rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Tanh, X: x, Y: y} }, 2},
			{"exp", func(x, y, _ rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Exp, X: x, Y: y} }, 2},
			{"sigmoid", func(x, y, _ rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Sigmoid, X: x, Y: y} }, 2},
			{"gelu", func(x, y, _ rt.Ref) rt.Op { return &rt.Unary{Fn: rt.Gelu, X: x, Y: y} }, 2},
			{"add", func(x, y, z rt.Ref) rt.Op { return &rt.Binary{Fn: rt.Add, A: x, B: y, Y: z} }, 3},
			{"mul", func(x, y, z rt.Ref) rt.Op { return &rt.Binary{Fn: rt.Mul, A: x, B: y, Y: z} }, 3},
			{"greater", func(x, y, z rt.Ref) rt.Op {
				z.DType = rt.Bool
				return &rt.Binary{Fn: rt.Greater, A: x, B: y, Y: z}
			}, 3},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				d := NewDevice()
				defer d.Close()
				benchOps(b, d, c.op(benchBuf(b, d, rt.F32, n), benchBuf(b, d, rt.F32, n), benchBuf(b, d, rt.F32, n)))
				b.ReportMetric(float64(c.refs*4*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkSmallGEMM times the GEMM shapes of the small test models
// (LSTM steps, transformer projections and attention, classifier heads):
// M×N×K, B transposed or not, batched.
func BenchmarkSmallGEMM(b *testing.B) {
	for _, c := range []struct {
		batch, m, n, k int
		tb             bool
	}{
		{1, 2, 192, 48, true},
		{1, 32, 192, 32, true},
		{1, 32, 192, 64, false},
		{1, 32, 64, 128, false},
		{1, 64, 256, 784, true},
		{8, 16, 16, 16, false},
		{8, 16, 16, 16, true},
		{1, 2, 5, 48, true},
		{1, 64, 3025, 144, false},
		{1, 16, 3025, 128, false},
	} {
		b.Run(fmt.Sprintf("%dx%dx%dx%d/transB=%v", c.batch, c.m, c.n, c.k, c.tb), func(b *testing.B) {
			d := NewDevice()
			defer d.Close()
			op := &rt.MatMul{A: benchBuf(b, d, rt.F32, c.batch*c.m*c.k), B: benchBuf(b, d, rt.F32, c.batch*c.k*c.n),
				Y: benchBuf(b, d, rt.F32, c.batch*c.m*c.n), Batch: c.batch, M: c.m, N: c.n, K: c.k, TransB: c.tb, Alpha: 1,
				StrideA: c.m * c.k, StrideB: c.k * c.n, StrideY: c.m * c.n}
			benchOp(b, d, op)
			b.ReportMetric(2*float64(c.batch*c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkMaxPool: squeezenet's first max pool (64×111×111, 3×3 stride 2,
// ceil mode) and a 2×2 stride-2 pool, f32.
func BenchmarkMaxPool(b *testing.B) {
	for _, c := range []struct {
		name                 string
		nc, h, w, k, s, o, p int
	}{
		{"64x111x111/3x3s2", 64, 111, 111, 3, 2, 55, 0},
		{"128x55x55/3x3s2", 128, 55, 55, 3, 2, 27, 0},
		{"256x27x27/3x3s2", 256, 27, 27, 3, 2, 13, 0},
		{"8x15x13/2x2s2", 16, 15, 13, 2, 2, 7, 0},
		{"lenet/384x28x28/2x2s2", 384, 28, 28, 2, 2, 14, 0},
		{"lenet/1024x10x10/2x2s2", 1024, 10, 10, 2, 2, 5, 0},
		{"resnet/64x112x112/3x3s2p1", 64, 112, 112, 3, 2, 56, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := NewDevice()
			defer d.Close()
			ow := (c.w+2*c.p-c.k)/c.s + 1
			benchOp(b, d, &rt.Pool{Fn: rt.MaxPool, X: benchBuf(b, d, rt.F32, c.nc*c.h*c.w), Y: benchBuf(b, d, rt.F32, c.nc*c.o*ow),
				NC: c.nc, H: c.h, W: c.w, OH: c.o, OW: ow, KH: c.k, KW: c.k, StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, PadB: c.p, PadR: c.p, DilH: 1, DilW: 1})
		})
	}
}

// BenchmarkAvgPool times f32 AveragePools (inception's 3×3 stride 1,
// densenet's 2×2 stride 2) through avgPoolF32 and, /go, the float64 loops
// of poolT.
func BenchmarkAvgPool(b *testing.B) {
	for _, c := range []struct {
		name                 string
		nc, h, w, k, s, o, p int
	}{
		{"64x56x56/3x3s1p1", 64, 56, 56, 3, 1, 56, 1},
		{"128x56x56/2x2s2", 128, 56, 56, 2, 2, 28, 0},
	} {
		for _, lv := range []int{hwKernelLevel(), levelGo} {
			name := c.name
			if lv == levelGo {
				name += "/go"
			}
			b.Run(name, func(b *testing.B) {
				withLevel(lv, func() {
					d := NewDevice()
					defer d.Close()
					ow := (c.w+2*c.p-c.k)/c.s + 1
					benchOp(b, d, &rt.Pool{Fn: rt.AvgPool, X: benchBuf(b, d, rt.F32, c.nc*c.h*c.w), Y: benchBuf(b, d, rt.F32, c.nc*c.o*ow),
						NC: c.nc, H: c.h, W: c.w, OH: c.o, OW: ow, KH: c.k, KW: c.k, StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, PadB: c.p, PadR: c.p, DilH: 1, DilW: 1})
				})
			})
		}
	}
}

// BenchmarkConvShapes times convolutions of the test models: squeezenet's
// first layer (3→64, 3×3 stride 2), an expand 3×3 (16→64 on 55×55), a
// squeeze 1×1 (128→16 on 55×55), its classifier (512→1000 1×1 on 13×13),
// and the e2e CNN's first layer (3→8, 3×3 on 2×15×13).
func BenchmarkConvShapes(b *testing.B) {
	for _, c := range []struct {
		name                        string
		n, c, h, k, kk, s, p, oh, g int
	}{
		{"first/3-64/224/3x3s2", 1, 3, 224, 64, 3, 2, 0, 111, 1},
		{"expand3x3/16-64/55", 1, 16, 55, 64, 3, 1, 1, 55, 1},
		{"squeeze1x1/128-16/55", 1, 128, 55, 16, 1, 1, 0, 55, 1},
		{"classifier1x1/512-1000/13", 1, 512, 13, 1000, 1, 1, 0, 13, 1},
		{"e2e/3-8/15x15", 2, 3, 15, 8, 3, 1, 1, 15, 1},
		{"lenet1/64x1-6/28/5x5p2", 64, 1, 28, 6, 5, 1, 2, 28, 1},
		{"lenet2/64x6-16/14/5x5", 64, 6, 14, 16, 5, 1, 0, 10, 1},
		{"dw/32/112/3x3", 1, 32, 112, 32, 3, 1, 1, 112, 32},
		{"dw/96/112/3x3s2", 1, 96, 112, 96, 3, 2, 1, 56, 96},
		{"dw/144/56/3x3", 1, 144, 56, 144, 3, 1, 1, 56, 144},
		{"dw/960/7/3x3", 1, 960, 7, 960, 3, 1, 1, 7, 960},
		{"dw/384/14/3x3", 1, 384, 14, 384, 3, 1, 1, 14, 384},
		{"dw/192/28/3x3", 1, 192, 28, 192, 3, 1, 1, 28, 192},
		{"resnet/64/56/3x3", 1, 64, 56, 64, 3, 1, 1, 56, 1},
		{"resnet/128/28/3x3", 1, 128, 28, 128, 3, 1, 1, 28, 1},
		{"resnet/256/14/3x3", 1, 256, 14, 256, 3, 1, 1, 14, 1},
		{"resnet/512/7/3x3", 1, 512, 7, 512, 3, 1, 1, 7, 1},
		{"resnet/64-128/56/3x3s2", 1, 64, 56, 128, 3, 2, 1, 28, 1},
		{"resnet/128-256/28/3x3s2", 1, 128, 28, 256, 3, 2, 1, 14, 1},
		{"resnet/256-512/14/3x3s2", 1, 256, 14, 512, 3, 2, 1, 7, 1},
		{"fire/64-256/13/3x3", 1, 64, 13, 256, 3, 1, 1, 13, 1},
		{"fire/32-128/27/3x3", 1, 32, 27, 128, 3, 1, 1, 27, 1},
		{"fire/48-192/13/3x3", 1, 48, 13, 192, 3, 1, 1, 13, 1},
		{"down1x1/64-128/56s2", 1, 64, 56, 128, 1, 2, 0, 28, 1},
		{"stem/3-64/224/7x7s2", 1, 3, 224, 64, 7, 2, 3, 112, 1},
		{"pw/16-96/112", 1, 16, 112, 96, 1, 1, 0, 112, 1},
		{"pw/24-144/56", 1, 24, 56, 144, 1, 1, 0, 56, 1},
		{"pw/144-24/56", 1, 144, 56, 24, 1, 1, 0, 56, 1},
		{"pw/576-96/14", 1, 576, 14, 96, 1, 1, 0, 14, 1},
		{"pw/320-1280/7", 1, 320, 7, 1280, 1, 1, 0, 7, 1},
		{"mbv2/first/3-32/224/3x3s2p1", 1, 3, 224, 32, 3, 2, 1, 112, 1},
		{"mbv2/pw/32-16/112", 1, 32, 112, 16, 1, 1, 0, 112, 1},
		{"mbv2/pw/96-24/56", 1, 96, 56, 24, 1, 1, 0, 56, 1},
		{"mbv2/pw/960-320/7", 1, 960, 7, 320, 1, 1, 0, 7, 1},
		{"mbv2/pw/160-960/7", 1, 160, 7, 960, 1, 1, 0, 7, 1},
		{"mbv2/pw/960-160/7", 1, 960, 7, 160, 1, 1, 0, 7, 1},
		{"mbv2/pw/576-160/7", 1, 576, 7, 160, 1, 1, 0, 7, 1},
		{"mbv2/pw/96-576/14", 1, 96, 14, 576, 1, 1, 0, 14, 1},
		{"mbv2/pw/64-384/14", 1, 64, 14, 384, 1, 1, 0, 14, 1},
		{"mbv2/pw/384-64/14", 1, 384, 14, 64, 1, 1, 0, 14, 1},
		{"mbv2/pw/192-32/28", 1, 192, 28, 32, 1, 1, 0, 28, 1},
		{"mbv2/dw/960/7/3x3", 1, 960, 7, 960, 3, 1, 1, 7, 960},
	} {
		// 3×3 stride-1 convolutions run every path: the heuristic's
		// choice (auto), Winograd F(4,3) and F(2,3), the wide direct kernels and
		// im2col + GEMM; GFLOP/s counts the direct convolution's flops
		// for all of them. Other ungrouped ones run the heuristic's
		// choice, the wide direct kernels and the channels-in-lanes ones.
		paths := []string{""}
		if c.kk == 3 && c.s == 1 && c.g == 1 {
			paths = []string{"/auto", "/wino", "/wino2", "/direct", "/direct-noshare", "/im2col", "/ocw"}
		} else if c.g == 1 && c.c > 1 && c.kk == 1 {
			paths = []string{"", "/direct", "/panels", "/im2col", "/ocw"}
		} else if c.g == 1 && c.c > 1 {
			paths = []string{"", "/direct", "/ocw"}
		}
		for _, path := range paths {
			b.Run(c.name+path, func(b *testing.B) {
				saveW, saveD, saveO, saveP, saveS := winoMode, dcwOn, ocwMode, pwMode, dcwSharedPad
				defer func() { winoMode, dcwOn, ocwMode, pwMode, dcwSharedPad = saveW, saveD, saveO, saveP, saveS }()
				switch path {
				case "/wino":
					winoMode = 1
				case "/wino2":
					winoMode = 2
				case "/direct":
					winoMode, ocwMode, pwMode = -1, -1, -1
				case "/direct-noshare":
					// The phase rows with all their padding (dcwSharedPadWq).
					winoMode, ocwMode, pwMode, dcwSharedPad = -1, -1, -1, false
				case "/panels":
					winoMode, ocwMode, pwMode = -1, -1, 1
				case "/im2col":
					winoMode, dcwOn, ocwMode = -1, false, -1
				case "/ocw":
					winoMode, ocwMode = -1, 1
				}
				d := NewDevice()
				defer d.Close()
				op := &rt.Conv{X: benchBuf(b, d, rt.F32, c.n*c.c*c.h*c.h), W: benchBuf(b, d, rt.F32, c.k*c.c/c.g*c.kk*c.kk),
					Bias: benchBuf(b, d, rt.F32, c.k), Y: benchBuf(b, d, rt.F32, c.n*c.k*c.oh*c.oh),
					N: c.n, C: c.c, H: c.h, Width: c.h, K: c.k, OH: c.oh, OW: c.oh, KH: c.kk, KW: c.kk, StrideH: c.s, StrideW: c.s,
					PadT: c.p, PadL: c.p, DilH: 1, DilW: 1, Groups: c.g, Act: rt.Activation{Fn: rt.Relu}}
				if os.Getenv("VRUN_CPU_BENCH_NOCONST") == "" {
					// As the engine runs them: weights in a buffer marked constant.
					rt.MarkConstant(op.W.Buf)
					rt.MarkConstant(op.Bias.Buf)
				}
				benchOp(b, d, op)
				flops := 2 * float64(c.n*c.k*c.c/c.g*c.kk*c.kk*c.oh*c.oh)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkFused times an LSTM step's gate arithmetic on [2, 48] views of
// a [2, 192] gate buffer (the lstm test model's shape): one rt.Fused op
// against the seven Unary and Binary ops the engine emits without it.
func BenchmarkFused(b *testing.B) {
	const batch, h = 2, 48
	d := NewDevice()
	defer d.Close()
	gates := benchBuf(b, d, rt.F32, batch*4*h)
	col := func(k int) rt.Ref {
		r := gates
		r.Shape, r.Strides, r.Off = []int{batch, h}, []int{4 * h, 1}, int64(4*k*h)
		return r
	}
	iv, ov, fv, cv := col(0), col(1), col(2), col(3)
	c := benchBuf(b, d, rt.F32, batch*h)
	hn := benchBuf(b, d, rt.F32, batch*h)
	tmp := benchBuf(b, d, rt.F32, batch*h)
	c.Shape, hn.Shape, tmp.Shape = []int{batch, h}, []int{batch, h}, []int{batch, h}
	b.Run("fused", func(b *testing.B) {
		var p rt.FusedProgram
		gi, go_, gf, gc, cp := p.Input(iv), p.Input(ov), p.Input(fv), p.Input(cv), p.Input(c)
		cn := p.Binary(rt.Add, p.Binary(rt.Mul, p.Unary(rt.Sigmoid, 0, 0, gf), cp),
			p.Binary(rt.Mul, p.Unary(rt.Sigmoid, 0, 0, gi), p.Unary(rt.Tanh, 0, 0, gc)))
		p.Output(c, cn)
		p.Output(hn, p.Binary(rt.Mul, p.Unary(rt.Sigmoid, 0, 0, go_), p.Unary(rt.Tanh, 0, 0, cn)))
		benchOps(b, d, p.Op())
	})
	b.Run("unfused", func(b *testing.B) {
		iof := gates
		iof.Shape, iof.Strides = []int{batch, 3 * h}, []int{4 * h, 1}
		benchOps(b, d,
			&rt.Unary{Fn: rt.Sigmoid, X: iof, Y: iof},
			&rt.Unary{Fn: rt.Tanh, X: cv, Y: cv},
			&rt.Binary{Fn: rt.Mul, A: fv, B: c, Y: c},
			&rt.Binary{Fn: rt.Mul, A: iv, B: cv, Y: cv},
			&rt.Binary{Fn: rt.Add, A: c, B: cv, Y: c},
			&rt.Unary{Fn: rt.Tanh, X: c, Y: tmp},
			&rt.Binary{Fn: rt.Mul, A: ov, B: tmp, Y: hn})
	})
}

// BenchmarkFusedChain times a bias add and ReLU ([rows, n] plus a
// broadcast [n] bias), as one rt.Fused op and as two ops, at sizes from
// L1-resident to memory-bound.
func BenchmarkFusedChain(b *testing.B) {
	for _, sz := range [][2]int{{32, 128}, {64, 512}, {64, 1024}, {256, 1024}, {1024, 4096}} {
		rows, n := sz[0], sz[1]
		d := NewDevice()
		x := benchBuf(b, d, rt.F32, rows*n)
		y := benchBuf(b, d, rt.F32, rows*n)
		bias := benchBuf(b, d, rt.F32, n)
		x.Shape, y.Shape = []int{rows, n}, []int{rows, n}
		bias.Shape, bias.Strides = []int{rows, n}, []int{0, 1}
		name := fmt.Sprintf("%dx%d", rows, n)
		b.Run(name+"/fused", func(b *testing.B) {
			var p rt.FusedProgram
			p.Output(y, p.Unary(rt.Relu, 0, 0, p.Binary(rt.Add, p.Input(x), p.Input(bias))))
			benchOps(b, d, p.Op())
		})
		b.Run(name+"/unfused", func(b *testing.B) {
			benchOps(b, d, &rt.Binary{Fn: rt.Add, A: x, B: bias, Y: y}, &rt.Unary{Fn: rt.Relu, X: y, Y: y})
		})
		d.Close()
	}
}
