//go:build cgo

package vulkan

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// gemvSweep lists the gemv.comp geometries BenchmarkGEMVVariants runs
// per layout: row mode (W n×k, MatMul with TransB) varies the workgroup
// size, the rows per subgroup, the load width and the reduction; column
// mode (W k×n) the workgroup size, the output lanes, the K split (0 =
// automatic, 1 = none) and the load width. VRUN_VK_GEMV adds one more
// ("wg=256,rows=2,lanes=64,split=8,scalar=0,nosg=0").
func gemvSweep(column bool) []gemvConfig {
	var cs []gemvConfig
	if column {
		for _, wg := range []int{256, 512} {
			for _, lanes := range []int{32, 64, 128} {
				for _, split := range []int{0, 1, 8, 16} {
					cs = append(cs, gemvConfig{WG: wg, Rows: 2, Lanes: lanes, Split: split})
				}
			}
		}
		cs = append(cs, gemvConfig{WG: 256, Rows: 2, Lanes: 64, Scalar: true})
	} else {
		for _, wg := range []int{128, 256, 512} {
			for _, rows := range []int{1, 2, 4} {
				cs = append(cs, gemvConfig{WG: wg, Rows: rows, Lanes: 64})
			}
		}
		cs = append(cs, gemvConfig{WG: 256, Rows: 2, Lanes: 64, Scalar: true},
			gemvConfig{WG: 256, Rows: 2, Lanes: 64, NoSubgroup: true})
	}
	if c, ok := gemvEnvConfig(); ok {
		cs = append(cs, c)
	}
	return cs
}

// gemvEnvConfig parses VRUN_VK_GEMV (keys wg, rows, lanes, split, scalar,
// nosg; unset keys take gemvDefault's values).
func gemvEnvConfig() (gemvConfig, bool) {
	s := os.Getenv("VRUN_VK_GEMV")
	if s == "" {
		return gemvConfig{}, false
	}
	c := gemvDefault
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "wg":
			c.WG = n
		case "rows":
			c.Rows = n
		case "lanes":
			c.Lanes = n
		case "split":
			c.Split = n
		case "scalar":
			c.Scalar = n != 0
		case "nosg":
			c.NoSubgroup = n != 0
		}
	}
	return c, true
}

// BenchmarkGEMVVariants runs every gemvSweep geometry on the 4096×14336
// GEMV of BenchmarkGEMV in both layouts, f32 and f16: xW is x·W with W
// k×n (column mode), Wx is W·x with W n×k (MatMul M = 1 with TransB, row
// mode, the Linear layout; 1024×4096 on a CPU device). It reports the GB/s of reading W (gpu-GB/s
// from GPU timestamps, the split-K reduction pass included).
func BenchmarkGEMVVariants(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) && testing.Short() {
		b.Skip("short")
	}
	k, n := 4096, 14336
	if isCPU(d) {
		k, n = 1024, 4096 // lavapipe: within its 128 MiB binding range
	}
	defer func() { gemvForce = nil }()
	for _, dt := range []rt.DType{rt.F32, rt.F16} {
		w := make([]float64, k*n)
		for i := range w {
			w[i] = math.Sin(float64(i))
		}
		x := newBuf(b, d, dt, k, w[:k])
		wb := newBuf(b, d, dt, k*n, w)
		y := newBuf(b, d, dt, n, nil)
		for _, layout := range []string{"xW", "Wx"} {
			for _, cfg := range gemvSweep(layout == "xW") {
				cfg := cfg
				b.Run(dt.String()+"/"+layout+"/"+cfg.String(), func(b *testing.B) {
					gemvForce = &cfg
					op := &rt.MatMul{A: x.ref([]int{k}, nil), B: wb.ref([]int{k * n}, nil), Y: y.ref([]int{n}, nil),
						Batch: 1, M: 1, N: n, K: k, Alpha: 1, TransB: layout == "Wx"}
					benchOp(b, d, op, 0, float64(k*n*dt.Size()))
				})
			}
		}
	}
}

// BenchmarkBandwidth measures bandwidth-bound kernels in GB/s of bytes
// read plus written, counted as bench/torch_baseline.py's bandwidth
// does (its PyTorch twin): the device copy (rt.CopyBuffer, vkCmdCopyBuffer,
// wall-clock only since it is not a stream op; and the copy kernel,
// Unary Copy), Add and Relu of 8192×8192 f32, Softmax, Normalize (layer
// norm; both also with the row-in-registers path off, -nocache) and
// Reduce Sum over its rows, and MaxPool 3×3/2 pad 1 on
// 32×64×112×112 (input plus output). The GEMVs are BenchmarkGEMVVariants.
func BenchmarkBandwidth(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) && testing.Short() {
		b.Skip("short")
	}
	rows, cols := 8192, 8192
	if isCPU(d) {
		rows, cols = 512, 1024 // lavapipe: keep it short
	}
	ne := rows * cols
	nb := float64(ne * 4)
	vals := make([]float64, ne)
	for i := range vals {
		vals[i] = math.Sin(float64(i))
	}
	dt := rt.F32
	xa := newBuf(b, d, dt, ne, vals)
	xb := newBuf(b, d, dt, ne, vals)
	y := newBuf(b, d, dt, ne, nil)
	flat := func(t *tbuf) rt.Ref { return t.ref([]int{ne}, nil) }
	mat := func(t *tbuf) rt.Ref { return t.ref([]int{rows, cols}, nil) }
	b.Run("copy-buffer", func(b *testing.B) {
		if err := rt.CopyBuffer(d, y.buf, guard, xa.buf, guard, int64(nb)); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := rt.CopyBuffer(d, y.buf, guard, xa.buf, guard, int64(nb)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2*nb*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
	})
	b.Run("copy-kernel", func(b *testing.B) {
		benchOp(b, d, &rt.Unary{Fn: rt.Copy, X: flat(xa), Y: flat(y)}, 0, 2*nb)
	})
	b.Run("add", func(b *testing.B) {
		benchOp(b, d, &rt.Binary{Fn: rt.Add, A: flat(xa), B: flat(xb), Y: flat(y)}, 0, 3*nb)
	})
	b.Run("relu", func(b *testing.B) {
		benchOp(b, d, &rt.Unary{Fn: rt.Relu, X: flat(xa), Y: flat(y)}, 0, 2*nb)
	})
	b.Run("softmax-rows", func(b *testing.B) {
		benchOp(b, d, &rt.Softmax{X: mat(xa), Y: mat(y), Outer: rows, N: cols, Inner: 1}, 0, 2*nb)
	})
	b.Run("softmax-rows-nocache", func(b *testing.B) {
		noRowCache = true
		defer func() { noRowCache = false }()
		benchOp(b, d, &rt.Softmax{X: mat(xa), Y: mat(y), Outer: rows, N: cols, Inner: 1}, 0, 2*nb)
	})
	b.Run("layernorm-rows", func(b *testing.B) {
		benchOp(b, d, &rt.Normalize{X: mat(xa), Y: mat(y), Outer: rows, N: cols, Eps: 1e-5}, 0, 2*nb)
	})
	b.Run("layernorm-rows-nocache", func(b *testing.B) {
		noRowCache = true
		defer func() { noRowCache = false }()
		benchOp(b, d, &rt.Normalize{X: mat(xa), Y: mat(y), Outer: rows, N: cols, Eps: 1e-5}, 0, 2*nb)
	})
	b.Run("sum-rows", func(b *testing.B) {
		benchOp(b, d, &rt.Reduce{Fn: rt.Sum, X: mat(xa), Y: y.ref([]int{rows}, nil), Outer: rows, N: cols, Inner: 1}, 0, nb)
	})
	b.Run("maxpool-3x3s2", func(b *testing.B) {
		nc, h, w := 32*64, 112, 112
		if isCPU(d) {
			nc = 8
		}
		oh, ow := 56, 56
		in := newBuf(b, d, dt, nc*h*w, vals[:min(ne, nc*h*w)])
		out := newBuf(b, d, dt, nc*oh*ow, nil)
		op := &rt.Pool{Fn: rt.MaxPool, X: in.ref([]int{nc, h, w}, nil), Y: out.ref([]int{nc, oh, ow}, nil),
			NC: nc, H: h, W: w, OH: oh, OW: ow, KH: 3, KW: 3, StrideH: 2, StrideW: 2,
			PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}
		benchOp(b, d, op, 0, float64(nc*h*w*4)*5/4)
	})
}
