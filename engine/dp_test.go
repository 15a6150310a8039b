package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/dist"
	"github.com/vrun-go/vrun/dist/nccl"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// dpModel is a two-layer classifier with a dynamic batch: x [N, 5] →
// Gemm → (BatchNormalization) → Relu → (Dropout 0.3) → Gemm → logits
// [N, 3], and the mean cross-entropy against onehot [N, 3] as "loss".
func dpModel(dt rt.DType, bn, dropout bool) (*model.Model, error) {
	return dpModelSized(dt, bn, dropout, 8, 0)
}

// dpModelSized is dpModel with hidden units, and with a second hidden
// layer of mid units when mid > 0.
func dpModelSized(dt rt.DType, bn, dropout bool, hidden, mid int) (*model.Model, error) {
	rng := rand.New(rand.NewPCG(5, 9))
	b := model.NewBuilder()
	b.Input("x", dt, -1, 5)
	b.Input("onehot", dt, -1, 3)
	w := func(name string, shape ...int) string {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = (rng.Float64()*2 - 1) * 0.6
		}
		return b.Weight(name, dt, shape64(shape...), rt.FromFloat64(dt, v, n).Data)
	}
	h := b.Op("Gemm", []string{"x", w("w1", hidden, 5), w("b1", hidden)}, model.Attrs{"transB": 1})
	if bn {
		ones := make([]float64, hidden)
		for i := range ones {
			ones[i] = 1
		}
		h = b.Op("BatchNormalization", []string{h, w("gamma", hidden), w("beta", hidden),
			b.Weight("rmean", dt, []int64{int64(hidden)}, make([]byte, hidden*dt.Size())),
			b.Weight("rvar", dt, []int64{int64(hidden)}, rt.FromFloat64(dt, ones, hidden).Data)}, nil)
	}
	h = b.Op("Relu", []string{h}, nil)
	if dropout {
		h = b.Op("Dropout", []string{h, b.Weight("ratio", dt, []int64{}, rt.FromFloat64(dt, []float64{0.3}).Data)}, nil)
	}
	if mid > 0 {
		h = b.Op("Relu", []string{b.Op("Gemm", []string{h, w("wm", mid, hidden), w("bm", mid)}, model.Attrs{"transB": 1})}, nil)
		hidden = mid
	}
	b.Node("logits", "Gemm", []string{h, w("w2", 3, hidden), w("b2", 3)}, []string{"logits"}, model.Attrs{"transB": 1})
	ls := b.Op("LogSoftmax", []string{"logits"}, model.Attrs{"axis": 1})
	s := b.Op("ReduceSum", []string{b.Op("Mul", []string{ls, "onehot"}, nil)}, model.Attrs{"axes": []int64{1}, "keepdims": 0})
	b.Node("loss", "Neg", []string{b.Op("ReduceMean", []string{s}, model.Attrs{"keepdims": 0})}, []string{"loss"}, nil)
	b.Output("loss", "logits")
	return b.Build()
}

// dpBatch is a random batch of n samples.
func dpBatch(dt rt.DType, n int, seed uint64) map[string]*rt.Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float64, n*5)
	for i := range x {
		x[i] = rng.Float64()*2 - 1 + 0.05
	}
	y := make([]float64, n*3)
	for i := range n {
		y[i*3+rng.IntN(3)] = 1
	}
	return map[string]*rt.Tensor{"x": rt.FromFloat64(dt, x, n, 5), "onehot": rt.FromFloat64(dt, y, n, 3)}
}

// dpDevices opens the devices of a list: "cpu" is a new logical CPU
// device each time; others go through the registry (skipped when they
// do not open), a selector listed twice opening a second VkDevice or
// cl_context on the same physical device.
// forEachBackend runs f as a subtest for the first device of each
// backend: cpu, vulkan:0, opencl:0 and cuda:0 (dpDevices skips those
// absent).
func forEachBackend(t *testing.T, f func(t *testing.T, spec string)) {
	for _, spec := range []string{"cpu", "vulkan:0", "opencl:0", "cuda:0"} {
		t.Run(spec, func(t *testing.T) { f(t, spec) })
	}
}

func dpDevices(t testing.TB, specs string) []rt.Device {
	var out []rt.Device
	for _, spec := range strings.Split(specs, ",") {
		var d rt.Device
		if spec == "cpu" {
			d = cpu.NewDevice()
		} else {
			var err error
			if d, err = rt.Open(spec, nil); err != nil {
				t.Skipf("%s: %v", spec, err)
			}
		}
		t.Cleanup(func() { d.Close() })
		out = append(out, d)
	}
	return out
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / (1e-3 + math.Abs(want)) }

// TestDataParallelTrajectory trains on N devices and on one, from the
// same weights with the same batches (of sizes not divisible by N), and
// compares the losses step by step, the joined outputs and the final
// weights; it also checks that the replicas stay identical.
func TestDataParallelTrajectory(t *testing.T) {
	sgd := &engine.Optimizer{Kind: engine.SGD, LR: 0.2, Momentum: 0.9}
	adam := &engine.Optimizer{Kind: engine.Adam, LR: 0.02, ClipNorm: 0.5}
	for _, tc := range []struct {
		name    string
		devs    string
		dt      rt.DType
		opt     *engine.Optimizer
		dropout bool
		batches []int
		bucket  int64
		tol     float64
	}{
		{"2cpu-sgd", "cpu,cpu", rt.F64, sgd, false, []int{7, 7, 5, 9, 2}, 0, 1e-10},
		{"3cpu-adam-clip-buckets", "cpu,cpu,cpu", rt.F64, adam, false, []int{10, 11, 4, 3, 10}, 40, 1e-10},
		{"3cpu-dropout", "cpu,cpu,cpu", rt.F64, sgd, true, []int{8, 13, 5, 8}, 0, 1e-10},
		{"4cpu-f32-adam", "cpu,cpu,cpu,cpu", rt.F32, adam, false, []int{9, 6, 17, 4}, 64, 2e-5},
		{"cpu+vulkan", "cpu,vulkan:0", rt.F32, sgd, false, []int{7, 9, 5, 7}, 0, 1e-4},
		{"cpu+vulkan-dropout", "cpu,vulkan:0", rt.F32, adam, true, []int{9, 5, 9}, 0, 1e-4},
		{"cpu+opencl", "cpu,opencl:0", rt.F32, sgd, false, []int{7, 9, 5, 7}, 0, 1e-4},
		{"cpu+opencl+vulkan-adam", "cpu,opencl:0,vulkan:0", rt.F32, adam, false, []int{11, 7, 4}, 100, 1e-4},
		{"2vulkan-VkDevices", "vulkan:0,vulkan:0", rt.F32, adam, true, []int{9, 7}, 0, 1e-4},
		{"2opencl-contexts", "opencl:0,opencl:0", rt.F32, sgd, false, []int{9, 7}, 0, 1e-4},
		// Two GPUs: NCCL for the even batches, the host for the 9.
		{"2cuda-nccl", "cuda:0,cuda:1", rt.F32, adam, true, []int{8, 8, 9, 6}, 64, 1e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := dpModel(tc.dt, false, tc.dropout)
			if err != nil {
				t.Fatal(err)
			}
			devs := dpDevices(t, tc.devs)
			opts := engine.TrainOptions{Loss: "loss", Optimizer: tc.opt, Seed: 17, BucketBytes: tc.bucket,
				Shapes: map[string][]int{"x": {tc.batches[0], 5}, "onehot": {tc.batches[0], 3}}}
			if tc.dropout {
				opts.Frozen = []string{"ratio"}
			}
			dp, err := engine.NewDataParallel(m, devs, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			ref := cpu.NewDevice()
			defer ref.Close()
			one, err := engine.NewTrainer(m, ref, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			for s, n := range tc.batches {
				in := dpBatch(tc.dt, n, uint64(s+1))
				got, err := dp.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := one.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if e := relErr(got.Loss, want.Loss); e > tc.tol {
					t.Fatalf("step %d (batch %d): loss %.12g, one device %.12g (rel %.3g)", s+1, n, got.Loss, want.Loss, e)
				}
				gl, wl := got.Outputs["logits"], want.Outputs["logits"]
				if gl.Shape[0] != n {
					t.Fatalf("step %d: joined logits have shape %v", s+1, gl.Shape)
				}
				for i := range wl.Len() {
					if e := relErr(gl.Float64(i), wl.Float64(i)); e > tc.tol {
						t.Fatalf("step %d: logits[%d] %g, one device %g", s+1, i, gl.Float64(i), wl.Float64(i))
					}
				}
			}
			gw, err := dp.Weights()
			if err != nil {
				t.Fatal(err)
			}
			ww, err := one.Weights()
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range ww {
				for i := range w.Len() {
					if e := relErr(gw[name].Float64(i), w.Float64(i)); e > tc.tol*10 {
						t.Fatalf("weight %s[%d] = %g, one device %g", name, i, gw[name].Float64(i), w.Float64(i))
					}
				}
			}
			for k := 1; k < len(devs); k++ {
				rw, err := engine.ReplicaWeights(dp, k)
				if err != nil {
					t.Fatal(err)
				}
				for name, w := range gw {
					if string(rw[name].Data) != string(w.Data) {
						t.Fatalf("replica %d (%s) holds another %s than device 0", k, devs[k].Info().Spec(), name)
					}
				}
			}
		})
	}
}

// TestDataParallelBatchNorm checks the per-share BatchNormalization
// semantics (DDP without SyncBatchNorm) against an independent float64
// reference: gradients of each share on one device, their mean weighted
// by share size, a plain SGD update, and device 0's running statistics.
func TestDataParallelBatchNorm(t *testing.T) {
	const lr = 0.1
	for _, tc := range []struct {
		name    string
		devs    string
		batches []int
	}{
		{"2cpu", "cpu,cpu", []int{7, 9, 5}},
		{"3cpu", "cpu,cpu,cpu", []int{10, 8, 13}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := dpModel(rt.F64, true, false)
			if err != nil {
				t.Fatal(err)
			}
			devs := dpDevices(t, tc.devs)
			shapes := map[string][]int{"x": {tc.batches[0], 5}, "onehot": {tc.batches[0], 3}}
			dp, err := engine.NewDataParallel(m, devs, engine.TrainOptions{Loss: "loss", Shapes: shapes, Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: lr}})
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			ref := cpu.NewDevice()
			defer ref.Close()
			g, err := engine.NewTrainer(m, ref, engine.TrainOptions{Loss: "loss", Shapes: shapes}) // gradients only
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w, err := g.Weights()
			if err != nil {
				t.Fatal(err)
			}
			for s, n := range tc.batches {
				in := dpBatch(rt.F64, n, uint64(s+20))
				got, err := dp.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				rows := dist.Split(n, len(devs))
				sum := map[string][]float64{}
				loss := 0.0
				var stats map[string]*rt.Tensor
				at := 0
				for k, r := range rows {
					if err := g.SetWeights(w); err != nil {
						t.Fatal(err)
					}
					share := map[string]*rt.Tensor{}
					for name, x := range in {
						per := x.Len() / n
						share[name] = rt.FromFloat64(rt.F64, x.Float64s()[at*per:(at+r)*per], r, per)
					}
					at += r
					res, err := g.Step(context.Background(), share)
					if err != nil {
						t.Fatal(err)
					}
					loss += float64(r) / float64(n) * res.Loss
					gr, err := g.Grads()
					if err != nil {
						t.Fatal(err)
					}
					for name, v := range gr {
						if sum[name] == nil {
							sum[name] = make([]float64, v.Len())
						}
						for i := range sum[name] {
							sum[name][i] += float64(r) / float64(n) * v.Float64(i)
						}
					}
					if k == 0 {
						if stats, err = g.Weights(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if e := relErr(got.Loss, loss); e > 1e-10 {
					t.Fatalf("step %d: loss %.12g, reference %.12g", s+1, got.Loss, loss)
				}
				dg, err := dp.Grads() // the reduced gradient, on device 0
				if err != nil {
					t.Fatal(err)
				}
				if len(dg) != len(sum) {
					t.Fatalf("step %d: %d gradients, want %d", s+1, len(dg), len(sum))
				}
				for name, want := range sum {
					for i, v := range want {
						if e := relErr(dg[name].Float64(i), v); e > 1e-10 {
							t.Fatalf("step %d: gradient of %s[%d] = %.12g, reference %.12g", s+1, name, i, dg[name].Float64(i), v)
						}
					}
				}
				for name := range w {
					if gv, ok := sum[name]; ok {
						v := w[name].Float64s()
						for i := range v {
							v[i] -= lr * gv[i]
						}
						w[name] = rt.FromFloat64(rt.F64, v, w[name].Shape...)
					} else { // running statistics: device 0's share
						w[name] = stats[name]
					}
				}
				dw, err := dp.Weights()
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range w {
					for i := range v.Len() {
						if e := relErr(dw[name].Float64(i), v.Float64(i)); e > 1e-10 {
							t.Fatalf("step %d: %s[%d] = %.12g, reference %.12g", s+1, name, i, dw[name].Float64(i), v.Float64(i))
						}
					}
				}
				for k := 1; k < len(devs); k++ {
					rw, err := engine.ReplicaWeights(dp, k)
					if err != nil {
						t.Fatal(err)
					}
					for _, name := range []string{"rmean", "rvar", "w1"} {
						if string(rw[name].Data) != string(dw[name].Data) {
							t.Fatalf("step %d: replica %d holds another %s", s+1, k, name)
						}
					}
				}
			}
		})
	}
}

// TestDataParallelErrors checks the bad inputs.
func TestDataParallelErrors(t *testing.T) {
	m, err := dpModel(rt.F64, false, false)
	if err != nil {
		t.Fatal(err)
	}
	devs := dpDevices(t, "cpu,cpu,cpu")
	opts := engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.1},
		Shapes: map[string][]int{"x": {6, 5}, "onehot": {6, 3}}}
	for _, tc := range []struct {
		name, want string
		f          func() error
	}{
		{"twice", "listed twice", func() error {
			_, err := engine.NewDataParallel(m, []rt.Device{devs[0], devs[1], devs[0]}, opts)
			return err
		}},
		{"shapes smaller than devices", "cannot be split over 3 devices", func() error {
			o := opts
			o.Shapes = map[string][]int{"x": {2, 5}, "onehot": {2, 3}}
			_, err := engine.NewDataParallel(m, devs, o)
			return err
		}},
		{"batch smaller than devices", "cannot be split over 3 devices", func() error {
			tr, err := engine.NewDataParallel(m, devs, opts)
			if err != nil {
				return err
			}
			defer tr.Close()
			_, err = tr.Step(context.Background(), dpBatch(rt.F64, 2, 1))
			return err
		}},
		{"input grads", "InputGrads", func() error {
			o := opts
			o.InputGrads = []string{"x"}
			_, err := engine.NewDataParallel(m, devs, o)
			return err
		}},
	} {
		err := tc.f()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if strings.Contains(tc.name, "smaller") && !errors.Is(err, engine.ErrBatchTooSmall) {
			t.Errorf("%s: error %v does not match ErrBatchTooSmall", tc.name, err)
		}
	}
}

// TestDataParallelProfile checks that a data-parallel step profiles
// device 0's forward, backward and optimizer: with one stream, and in
// segments (small buckets: the reduction overlapped with backward), the
// same ops.
func TestDataParallelProfile(t *testing.T) {
	m, err := dpModel(rt.F32, false, false)
	if err != nil {
		t.Fatal(err)
	}
	var lists [][]string
	for _, bucket := range []int64{0, 48} {
		tr, err := engine.NewDataParallel(m, dpDevices(t, "cpu,cpu"), engine.TrainOptions{Loss: "loss", Profile: true, BucketBytes: bucket,
			Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.01}, Shapes: map[string][]int{"x": {5, 5}, "onehot": {5, 3}}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.Step(context.Background(), dpBatch(rt.F32, 5, 1)); err != nil {
			t.Fatal(err)
		}
		if g := engine.OverlapGroups(tr); (bucket > 0) != (len(g) > 1) {
			t.Errorf("buckets of %d bytes: %d groups overlap", bucket, len(g))
		}
		var ops []string
		for _, o := range tr.Profile() {
			ops = append(ops, o.Node)
		}
		for _, want := range []string{"optimizer", "logits"} {
			found := false
			for _, o := range ops {
				found = found || o == want
			}
			if !found {
				t.Errorf("buckets of %d bytes: profile %v lacks %q", bucket, ops, want)
			}
		}
		slices.Sort(ops) // the profile lists the slowest first
		lists = append(lists, ops)
	}
	if fmt.Sprint(lists[0]) != fmt.Sprint(lists[1]) {
		t.Errorf("profile in segments %v, in one stream %v", lists[1], lists[0])
	}
}

// lostDevice fails every stream's Wait with rt.ErrDeviceLost once lost is
// set.
type lostDevice struct {
	rt.Device
	lost *atomic.Bool
}

type lostStream struct {
	rt.Stream
	lost *atomic.Bool
}

func (d lostDevice) NewStream(o rt.StreamOptions) (rt.Stream, error) {
	s, err := d.Device.NewStream(o)
	return lostStream{s, d.lost}, err
}

func (s lostStream) Wait() error {
	if err := s.Stream.Wait(); err != nil {
		return err
	}
	if s.lost.Load() {
		return fmt.Errorf("lost in a test: %w", rt.ErrDeviceLost)
	}
	return nil
}

// TestDataParallelDeviceLost loses device 1 in the middle of a run: the
// step's error names it and matches rt.ErrDeviceLost, and every device's
// work is released (Close returns). With small buckets the step runs
// overlapped, in segments.
func TestDataParallelDeviceLost(t *testing.T) {
	m, err := dpModel(rt.F64, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []int64{0, 64} {
		devs := dpDevices(t, "cpu,cpu,cpu")
		var lost atomic.Bool
		devs[1] = lostDevice{devs[1], &lost}
		tr, err := engine.NewDataParallel(m, devs, engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.1},
			BucketBytes: bucket, Shapes: map[string][]int{"x": {6, 5}, "onehot": {6, 3}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Step(context.Background(), dpBatch(rt.F64, 6, 1)); err != nil {
			t.Fatal(err)
		}
		if g := engine.OverlapGroups(tr); (bucket > 0) != (len(g) > 1) {
			t.Errorf("buckets of %d bytes: %d groups overlap", bucket, len(g))
		}
		lost.Store(true)
		_, err = tr.Step(context.Background(), dpBatch(rt.F64, 7, 2))
		if err == nil || !errors.Is(err, rt.ErrDeviceLost) || !strings.Contains(err.Error(), "device 1") {
			t.Fatalf("buckets of %d bytes: error %v, want rt.ErrDeviceLost naming device 1", bucket, err)
		}
		done := make(chan error, 1)
		go func() { done <- tr.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("buckets of %d bytes: Close hangs: a device's run was not released", bucket)
		}
	}
}

// BenchmarkDataParallel measures training steps per second (Adam, batch
// 256) on one CPU device and on N logical CPU devices, of a tiny MLP
// (5-8-3: overhead-bound) and a wide one (5-512-512-3, 1 MiB of
// gradients). Logical devices share this machine's cores, so the figures
// show the cost of splitting and of the host-path reduction, not a
// speed-up.
func BenchmarkDataParallel(b *testing.B) {
	for _, size := range []struct {
		name        string
		hidden, mid int
	}{{"tiny", 8, 0}, {"wide", 512, 512}} {
		for _, n := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/cpu*%d", size.name, n), func(b *testing.B) {
				m, err := dpModelSized(rt.F32, false, false, size.hidden, size.mid)
				if err != nil {
					b.Fatal(err)
				}
				devs := dpDevices(b, strings.TrimSuffix(strings.Repeat("cpu,", n), ","))
				tr, err := engine.NewDataParallel(m, devs, engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.01},
					Shapes: map[string][]int{"x": {256, 5}, "onehot": {256, 3}}})
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				in := dpBatch(rt.F32, 256, 1)
				if _, err := tr.Step(context.Background(), in); err != nil { // records the streams
					b.Fatal(err)
				}
				c0 := processCPU()
				for b.Loop() {
					if _, err := tr.Step(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
			})
		}
	}
}

// TestDataParallelGradBuckets checks a trainer's gradient buckets: whole
// parameters, the last ones first, within BucketBytes unless one
// parameter is larger, tiling the gradient block; and that a run with
// many small buckets follows the one with one bucket.
func TestDataParallelGradBuckets(t *testing.T) {
	m, err := dpModelSized(rt.F64, false, false, 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]int{"x": {9, 5}, "onehot": {9, 3}}
	bk := func(off, n int64) dist.Bucket { return dist.Bucket{Off: off, Len: n} }
	// Parameters in block order: w1 8×5, b1 8, wm 6×8, bm 6, w2 3×6, b2 3.
	sizes := map[string]int64{"w1": 320, "b1": 64, "wm": 384, "bm": 48, "w2": 144, "b2": 24}
	for _, tc := range []struct {
		bucket int64
		want   []dist.Bucket
	}{
		{0, []dist.Bucket{{Off: 0, Len: 984}}},                                                 // 25 MB: one bucket
		{200, []dist.Bucket{bk(816, 168), bk(768, 48), bk(384, 384), bk(320, 64), bk(0, 320)}}, // b2+w2, bm, wm, b1, w1
		{400, []dist.Bucket{bk(768, 216), bk(384, 384), bk(0, 384)}},                           // b2+w2+bm, wm, b1+w1
	} {
		devs := dpDevices(t, "cpu,cpu")
		tr, err := engine.NewDataParallel(m, devs, engine.TrainOptions{Loss: "loss", BucketBytes: tc.bucket, Shapes: shapes,
			Optimizer: &engine.Optimizer{Kind: engine.SGD, LR: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := tr.State()
		if err != nil {
			t.Fatal(err)
		}
		var off int64
		bounds := map[int64]bool{0: true}
		for _, name := range st.Params {
			off += sizes[name]
			bounds[off] = true
		}
		if off != 984 {
			t.Fatalf("parameters %v: %d bytes, want 984", st.Params, off)
		}
		got := tr.GradBuckets()
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("bucket bytes %d: buckets %v, want %v", tc.bucket, got, tc.want)
		}
		for _, b := range got {
			if !bounds[b.Off] || !bounds[b.Off+b.Len] {
				t.Errorf("bucket %v splits a parameter", b)
			}
		}
		if c := tr.Collective(); c != "host" {
			t.Errorf("collective %q on CPU devices, want host", c)
		}
		tr.Close()
	}
	// The trajectory with one bucket and with many.
	run := func(bucket int64) []float64 {
		tr, err := engine.NewDataParallel(m, dpDevices(t, "cpu,cpu,cpu"), engine.TrainOptions{Loss: "loss", BucketBytes: bucket, Shapes: shapes,
			Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.02}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var losses []float64
		for s, n := range []int{9, 7, 12, 5} {
			r, err := tr.Step(context.Background(), dpBatch(rt.F64, n, uint64(s+30)))
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, r.Loss)
		}
		return losses
	}
	one, many := run(0), run(56)
	for s := range one {
		if e := relErr(many[s], one[s]); e > 1e-12 {
			t.Errorf("step %d: loss %.15g with small buckets, %.15g with one", s+1, many[s], one[s])
		}
	}
}

// TestDataParallelNCCLOneRank runs the NCCL path on one GPU (a one-rank
// communicator: NCCL refuses two ranks on one GPU) and checks it against
// the host path on two CPU devices, against a plain trainer on the same
// GPU and against the NCCL path without overlap (NoOverlap); the
// overlapped steps must have enqueued the all-reduce of every bucket
// group between segments of backward. It skips without CUDA or NCCL.
func TestDataParallelNCCLOneRank(t *testing.T) {
	devs := dpDevices(t, "cuda:0")
	m, err := dpModelSized(rt.F32, false, false, 16, 12)
	if err != nil {
		t.Fatal(err)
	}
	opts := engine.TrainOptions{Loss: "loss", Collective: "nccl", BucketBytes: 400, Shapes: map[string][]int{"x": {8, 5}, "onehot": {8, 3}},
		Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.02, ClipNorm: 0.5}}
	dp, err := engine.NewDataParallel(m, devs, opts)
	if errors.Is(err, rt.ErrUnavailable) {
		t.Skipf("NCCL: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if c, n := dp.Collective(), len(dp.GradBuckets()); c != "nccl" || n < 3 {
		t.Fatalf("collective %q with %d buckets, want nccl with several", c, n)
	}
	var enqueued atomic.Int64 // all-reduces of bucket groups enqueued between segments
	engine.SetOverlapHook(dp, func(kind string, dev, seg int) {
		if kind == "enqueued" {
			enqueued.Add(1)
		}
	})
	so := opts
	so.NoOverlap = true
	serial, err := engine.NewDataParallel(m, devs, so)
	if err != nil {
		t.Fatal(err)
	}
	defer serial.Close()
	ho := opts
	ho.Collective = "host"
	host, err := engine.NewDataParallel(m, dpDevices(t, "cpu,cpu"), ho)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	po := opts
	po.Collective = ""
	plain, err := engine.NewTrainer(m, devs[0], po)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	const tol = 1e-4 // f32, TF32-free GEMMs of a few hundred terms
	for s, n := range []int{8, 6, 10, 8, 4} {
		in := dpBatch(rt.F32, n, uint64(s+50))
		got, err := dp.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := host.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		same, err := plain.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		ser, err := serial.Step(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(got.Loss, ser.Loss); e > 1e-6 {
			t.Fatalf("step %d: NCCL loss %.9g overlapped, %.9g with NoOverlap (rel %.3g)", s+1, got.Loss, ser.Loss, e)
		}
		if e := relErr(got.Loss, want.Loss); e > tol {
			t.Fatalf("step %d: NCCL loss %.9g, host path %.9g (rel %.3g)", s+1, got.Loss, want.Loss, e)
		}
		if e := relErr(got.Loss, same.Loss); e > 1e-6 {
			t.Fatalf("step %d: NCCL loss %.9g, plain trainer on the GPU %.9g (rel %.3g)", s+1, got.Loss, same.Loss, e)
		}
		gg, err := dp.Grads()
		if err != nil {
			t.Fatal(err)
		}
		hg, err := host.Grads()
		if err != nil {
			t.Fatal(err)
		}
		for name, g := range hg {
			for i := range g.Len() {
				if e := relErr(gg[name].Float64(i), g.Float64(i)); e > 10*tol {
					t.Fatalf("step %d: NCCL gradient %s[%d] = %g, host path %g", s+1, name, i, gg[name].Float64(i), g.Float64(i))
				}
			}
		}
	}
	if g, n := len(engine.OverlapGroups(dp)), enqueued.Load(); g < 2 || n != int64(5*g) {
		t.Errorf("%d all-reduces enqueued between segments over 5 steps of %d bucket groups: the NCCL steps did not overlap", n, g)
	}
	gw, err := dp.Weights()
	if err != nil {
		t.Fatal(err)
	}
	hw, err := host.Weights()
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range hw {
		for i := range w.Len() {
			if e := relErr(gw[name].Float64(i), w.Float64(i)); e > 10*tol {
				t.Fatalf("weight %s[%d]: NCCL %g, host path %g", name, i, gw[name].Float64(i), w.Float64(i))
			}
		}
	}
}

// TestDataParallelCollectiveErrors checks the errors of Collective.
func TestDataParallelCollectiveErrors(t *testing.T) {
	m, err := dpModel(rt.F64, false, false)
	if err != nil {
		t.Fatal(err)
	}
	two := &nccl.Launch{Rank: 1, NRanks: 2, Root: "127.0.0.1:1"}
	for _, tc := range []struct {
		devs, mode string
		launch     *nccl.Launch
		want       string
	}{
		{"cpu,cpu", "nccl", nil, "not a CUDA device"},
		{"cpu", "nccl", nil, "not a CUDA device"},
		{"cpu,cpu", "mpi", nil, `collective "mpi"`},
		{"cpu", "", two, "not a CUDA device"},
		{"cpu,cpu", "", two, "one device per process"},
		{"cpu", "host", two, `needs collective "nccl"`},
	} {
		_, err := engine.NewDataParallel(m, dpDevices(t, tc.devs), engine.TrainOptions{Loss: "loss", Collective: tc.mode, NCCL: tc.launch,
			Shapes: map[string][]int{"x": {4, 5}, "onehot": {4, 3}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %q: error %v, want %q", tc.devs, tc.mode, err, tc.want)
		}
	}
}
