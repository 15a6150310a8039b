//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vrun-go/vrun/rt"
)

// benchOps records ops on one profiled stream, replays it b.N times and
// reports the wall-clock and summed GPU-timestamp time per replay
// ("us/run", "gpu-us/run") and, when flop > 0, the GPU TFLOP/s.
func benchOps(b *testing.B, d rt.Device, flop float64, ops ...rt.Op) {
	for _, op := range ops {
		if err := d.Supports(op); err != nil {
			b.Skip(err)
		}
	}
	s, err := d.NewStream(rt.StreamOptions{Profile: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, op := range ops {
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
	var gpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Submit(); err != nil {
			b.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			b.Fatal(err)
		}
		for _, t := range s.Timings() {
			gpu += t
		}
	}
	nb := float64(b.N)
	b.ReportMetric(b.Elapsed().Seconds()/nb*1e6, "us/run")
	if gpu > 0 {
		b.ReportMetric(gpu.Seconds()/nb*1e6, "gpu-us/run")
		if flop > 0 {
			b.ReportMetric(flop*nb/gpu.Seconds()/1e12, "gpu-TFLOP/s")
		}
	}
}

// BenchmarkAttention compares the fused rt.Attention (attention.comp)
// with the unfused MatMul, Softmax, MatMul that the engine emits without
// it, at the BERT-base shape (12 heads, 128 tokens, head size 64) for
// batch 1 and 8, f32: go test -run XXX -bench Attention ./rt/vulkan.
func BenchmarkAttention(b *testing.B) {
	d := testDevice(b)
	const h, l, hd = 12, 128, 64
	for _, batch := range []int{1, 8} {
		g := batch * h
		n := g * l * hd
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = math.Sin(float64(i)) * 0.5
		}
		q, k, v := newBuf(b, d, rt.F32, n, vals), newBuf(b, d, rt.F32, n, vals), newBuf(b, d, rt.F32, n, vals)
		y := newBuf(b, d, rt.F32, n, nil)
		sc := newBuf(b, d, rt.F32, g*l*l, nil)
		shape := []int{batch, h, l, hd}
		scale := 1 / math.Sqrt(hd)
		flop := 4 * float64(g) * l * l * hd
		b.Run(fmt.Sprintf("b%d/fused", batch), func(b *testing.B) {
			benchOps(b, d, flop, &rt.Attention{Q: q.ref(shape, nil), K: k.ref(shape, nil), V: v.ref(shape, nil), Y: y.ref(shape, nil),
				B: batch, H: h, Lq: l, Lk: l, D: hd, Dv: hd, Scale: scale})
		})
		b.Run(fmt.Sprintf("b%d/unfused", batch), func(b *testing.B) {
			s := sc.ref([]int{g * l * l}, nil)
			benchOps(b, d, flop,
				&rt.MatMul{A: q.ref([]int{n}, nil), B: k.ref([]int{n}, nil), Y: s, Batch: g, M: l, N: l, K: hd, TransB: true,
					StrideA: l * hd, StrideB: l * hd, StrideY: l * l, Alpha: scale},
				&rt.Softmax{X: s, Y: s, Outer: g * l, N: l, Inner: 1},
				&rt.MatMul{A: s, B: v.ref([]int{n}, nil), Y: y.ref([]int{n}, nil), Batch: g, M: l, N: hd, K: l,
					StrideA: l * l, StrideB: l * hd, StrideY: l * hd, Alpha: 1})
		})
	}
}

// BenchmarkGEMMSmallM sweeps the f32 GEMMs of a BERT-base layer (M = 128
// tokens at batch 1, 1024 at batch 8; N x K = 2304 x 768 in-projection,
// 768 x 768 out-projection, 3072 x 768 and 768 x 3072 feed-forward) over
// the default choice ("auto"), and every tile (alternatives included)
// forced with split-K forced to 1 (none), 2, 4 and 8 slices, to tune
// pickTile and splitFor where the tiles are fewer than the GPU's compute
// units. Each GEMM is recorded 16 times into one stream (one alone left
// the GPU idle enough to read 0.3-1.5 TFLOP/s):
// go test -run XXX -bench GEMMSmallM -benchtime 200x ./rt/vulkan.
func BenchmarkGEMMSmallM(b *testing.B) {
	d := testDevice(b)
	if isCPU(d) {
		b.Skip("a GPU sweep")
	}
	defer func() { forceGemmTile, forceSplitK = "", 0 }()
	for _, m := range []int{128, 1024} {
		for _, nk := range [][2]int{{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}} {
			n, k := nk[0], nk[1]
			vals := make([]float64, max(m*k, k*n))
			for i := range vals {
				vals[i] = math.Sin(float64(i))
			}
			a, w, y := newBuf(b, d, rt.F32, m*k, vals), newBuf(b, d, rt.F32, k*n, vals), newBuf(b, d, rt.F32, m*n, nil)
			op := &rt.MatMul{A: a.ref([]int{m * k}, nil), B: w.ref([]int{k * n}, nil), Y: y.ref([]int{m * n}, nil),
				Batch: 1, M: m, N: n, K: k, Alpha: 1}
			flop := 2 * float64(m) * float64(n) * float64(k)
			name := fmt.Sprintf("M%d_N%d_K%d", m, n, k)
			const reps = 16 // keep the GPU busy, as inside a model
			ops := make([]rt.Op, reps)
			for i := range ops {
				ops[i] = op
			}
			b.Run(name+"/auto", func(b *testing.B) { benchOps(b, d, flop*reps, ops...) })
			for _, t := range gemmTiles {
				for _, s := range []int{1, 2, 4, 8} {
					b.Run(fmt.Sprintf("%s/%s/k%d", name, t.name, s), func(b *testing.B) {
						forceGemmTile, forceSplitK = t.name, s
						defer func() { forceGemmTile, forceSplitK = "", 0 }()
						benchOps(b, d, flop*reps, ops...)
					})
				}
			}
		}
	}
}
