package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	_ "github.com/vrun-go/vrun/clshim"
	"github.com/vrun-go/vrun/cpu"
	_ "github.com/vrun-go/vrun/cudashim"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
	_ "github.com/vrun-go/vrun/rt/vulkan"
)

// mlpSizes are the MLP backprop benchmark sizes: batch, input, hidden,
// output (issue 9: batch 64 784-256-10, batch 256 1024-1024-10, batch
// 1024 4096-4096-1024).
var mlpSizes = [][4]int{{64, 784, 256, 10}, {256, 1024, 1024, 10}, {1024, 4096, 4096, 1024}}

// mlpBackpropModel builds Linear-ReLU-Linear with the sum-of-squares loss
// sum((y - target)^2); weights are [in, out] (x·W + b).
func mlpBackpropModel(dt rt.DType, s [4]int, rng *rand.Rand) (*model.Model, error) {
	bs, in, hid, out := s[0], s[1], s[2], s[3]
	b := model.NewBuilder()
	b.Input("x", dt, int64(bs), int64(in))
	b.Input("target", dt, int64(bs), int64(out))
	w := func(name string, scale float64, shape ...int) string {
		v := make([]float64, rt.NumElements(shape))
		for i := range v {
			v[i] = (2*rng.Float64() - 1) * scale
		}
		return b.Weight(name, dt, shape64(shape...), rt.FromFloat64(dt, v, shape...).Data)
	}
	h := b.Op("Relu", []string{b.Op("Gemm", []string{"x", w("w1", 1/float64(in), in, hid), w("b1", 0.1, hid)}, nil)}, nil)
	y := b.Op("Gemm", []string{h, w("w2", 1/float64(hid), hid, out), w("b2", 0.1, out)}, nil)
	loss := b.Op("ReduceSumSquare", []string{b.Op("Sub", []string{y, "target"}, nil)}, model.Attrs{"keepdims": 0})
	b.Node("loss", "Identity", []string{loss}, []string{"loss"}, nil)
	b.Output("loss")
	return b.Build()
}

// BenchmarkMLPBackprop times one training iteration of Linear-ReLU-Linear
// on the CPU backend, or on the device $VRUN_BENCH_DEVICE names (e.g.
// cuda:0, vulkan:0): "fwdbwd" is forward + backward (gradients of all
// four parameters), "sgd" adds the SGD update (one full training step).
// bench/backprop.py runs it side by side with PyTorch and NumPy.
func BenchmarkMLPBackprop(b *testing.B) {
	var dev rt.Device = cpu.NewDevice()
	if spec := os.Getenv("VRUN_BENCH_DEVICE"); spec != "" {
		d, err := rt.Open(spec, nil)
		if err != nil {
			b.Fatal(err)
		}
		dev.Close()
		dev = d
	}
	defer dev.Close()
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, s := range mlpSizes {
			for _, mode := range []string{"fwdbwd", "sgd"} {
				name := fmt.Sprintf("%s/b%d_%d-%d-%d/%s", dt, s[0], s[1], s[2], s[3], mode)
				b.Run(name, func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, 2))
					m, err := mlpBackpropModel(dt, s, rng)
					if err != nil {
						b.Fatal(err)
					}
					opts := engine.TrainOptions{Loss: "loss", Profile: os.Getenv("VRUN_BENCH_PROFILE") != ""}
					if mode == "sgd" {
						opts.Optimizer = &engine.Optimizer{Kind: engine.SGD, LR: 1e-4}
					}
					tr, err := engine.NewTrainer(m, dev, opts)
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Close()
					rnd := func(shape ...int) *rt.Tensor {
						v := make([]float64, rt.NumElements(shape))
						for i := range v {
							v[i] = 2*rng.Float64() - 1
						}
						return rt.FromFloat64(dt, v, shape...)
					}
					in := map[string]*rt.Tensor{"x": rnd(s[0], s[1]), "target": rnd(s[0], s[3])}
					ctx := context.Background()
					for i := 0; i < 2; i++ { // plan, record, warm up
						if _, err := tr.Step(ctx, in); err != nil {
							b.Fatal(err)
						}
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := tr.Step(ctx, in); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if opts.Profile {
						logProfile(b, tr.Profile())
					}
					// Forward 2·B·(in·hid + hid·out), backward twice that
					// less the input gradient (B·in·hid·2).
					bs, i, h, o := float64(s[0]), float64(s[1]), float64(s[2]), float64(s[3])
					flop := 2*bs*(i*h+h*o) + 2*bs*(i*h+2*h*o)
					b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// logProfile logs the slowest ops of a profiled step
// ($VRUN_BENCH_PROFILE=1).
func logProfile(b *testing.B, prof []engine.OpTime) {
	sort.Slice(prof, func(i, j int) bool { return prof[i].Time > prof[j].Time })
	var total float64
	for _, p := range prof {
		total += p.Time.Seconds()
	}
	b.Logf("profile: %d ops, %.3f ms of device time", len(prof), total*1e3)
	for _, p := range prof[:min(12, len(prof))] {
		b.Logf("  %8.3f ms  %-28s %s", p.Time.Seconds()*1e3, p.Op, p.Node)
	}
}
