package vrun_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// wideMLP is a compute-bound model for the scaling benchmark: x [batch,
// 512] -> 1024 -> Relu -> 1024 -> Relu -> 10 -> Softmax.
func wideMLP(b *testing.B) *model.Model {
	rng := rand.New(rand.NewPCG(9, 9))
	w := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Float64()*2-1) / 32
		}
		return v
	}
	bl := model.NewBuilder()
	x := bl.Input("x", rt.F32, -1, 512)
	bl.DimNames(x, "batch", "")
	h := x
	for i, d := range [][2]int{{512, 1024}, {1024, 1024}, {1024, 10}} {
		h = bl.Op("MatMul", []string{h, bl.Weight("w"+string(rune('0'+i)), rt.F32, []int64{int64(d[0]), int64(d[1])}, w(d[0]*d[1]))}, nil)
		if i < 2 {
			h = bl.Op("Relu", []string{h}, nil)
		}
	}
	bl.Node("sm", "Softmax", []string{h}, []string{"y"}, nil)
	bl.Output("y")
	m, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkDataParallelInference times a batch run on one device and split
// across device lists (rows/s is the throughput), evenly and, for the
// mixed lists, with 40 rows to the CPU for each row to the other device
// (Options.Shares). On one host the devices
// share its cores: the figures measure the split's overhead and the
// scaling the hardware allows, not that of separate GPUs (see
// docs/benchmarks.md).
func BenchmarkDataParallelInference(b *testing.B) {
	b.Setenv(rt.LogicalDevicesEnv, "cpu=4,vulkan=2,opencl=2")
	cnn, err := model.Load(filepath.Join(e2e.Dir(), "cnn.bin"))
	if err != nil {
		b.Fatal(err)
	}
	defer cnn.Close()
	models := []struct {
		name string
		g    *model.Model
		in   []int
	}{
		{"cnn", cnn, []int{64, 3, 15, 13}},
		{"wide-mlp", wideMLP(b), []int{256, 512}},
	}
	lists := []string{"cpu", "cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2,cpu:3", "opencl:0", "cpu,opencl:0", "cpu,opencl:0 shares 40,1",
		"opencl:0,opencl:1", "vulkan:0", "cpu,vulkan:0", "cpu,vulkan:0 shares 40,1", "vulkan:0,vulkan:1"}
	for _, mc := range models {
		rng := rand.New(rand.NewPCG(1, 1))
		x := randTensor(rng, mc.in...)
		for _, list := range lists {
			var shares []float64
			name := list
			if l, ok := strings.CutSuffix(list, " shares 40,1"); ok {
				list, shares = l, []float64{40, 1}
			}
			b.Run(mc.name+"/"+name, func(b *testing.B) {
				m, err := vrun.New(mc.g, vrun.Options{Device: list, Shares: shares, Shapes: map[string][]int{"x": mc.in}})
				if errors.Is(err, rt.ErrUnavailable) {
					b.Skip(err)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer closeDevices(m) // not m.Close: the graphs are closed once, above
				in := map[string]*rt.Tensor{"x": x}
				if _, err := m.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := m.Run(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*mc.in[0])/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
