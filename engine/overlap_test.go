package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// overlapShapes are the planned shapes of the overlap tests.
func overlapShapes(n int) map[string][]int { return map[string][]int{"x": {n, 5}, "onehot": {n, 3}} }

// TestDataParallelOverlap trains the same model three ways from the same
// weights with the same batches (of sizes that do not divide by the
// device count): data-parallel with the gradient reduction overlapped
// with backward (the default), data-parallel with NoOverlap, and on one
// CPU device. Small buckets give several groups, so backward runs in
// several segments. The overlapped run must equal the non-overlapped one
// (bit for bit on the CPU, whose kernels and host reduction are
// deterministic; to 1e-6 relative on GPUs) and follow the single device
// (1e-10 relative in f64, the dtype's tolerance in f32), losses step by
// step and final weights; and every group must have been reduced in
// every step.
func TestDataParallelOverlap(t *testing.T) {
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
		same    float64 // overlapped against NoOverlap
		tol     float64 // against one CPU device
	}{
		{"2cpu-f64-sgd", "cpu,cpu", rt.F64, sgd, false, []int{7, 7, 5, 9}, 256, 0, 1e-10},
		{"3cpu-f64-adam-clip-dropout", "cpu,cpu,cpu", rt.F64, adam, true, []int{10, 11, 4, 9}, 256, 0, 1e-10},
		{"4cpu-f32-adam", "cpu,cpu,cpu,cpu", rt.F32, adam, false, []int{9, 6, 17, 4}, 128, 0, 2e-5},
		{"cpu+vulkan", "cpu,vulkan:0", rt.F32, sgd, false, []int{7, 9, 5}, 128, 1e-6, 1e-4},
		{"2vulkan-VkDevices", "vulkan:0,vulkan:0", rt.F32, adam, true, []int{9, 7, 8}, 128, 1e-6, 1e-4},
		{"2opencl-contexts", "opencl:0,opencl:0", rt.F32, sgd, false, []int{9, 7}, 128, 1e-6, 1e-4},
		// Logical devices on one GPU: the host path (NCCL refuses two
		// ranks on one GPU); two GPUs: NCCL for the even batches.
		{"2cuda-logical", "cuda:0,cuda:0", rt.F32, adam, true, []int{9, 8, 6}, 128, 1e-6, 1e-4},
		{"2cuda-nccl", "cuda:0,cuda:1", rt.F32, adam, true, []int{8, 8, 9, 6}, 128, 1e-6, 1e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := dpModelSized(tc.dt, false, tc.dropout, 16, 12)
			if err != nil {
				t.Fatal(err)
			}
			opts := engine.TrainOptions{Loss: "loss", Optimizer: tc.opt, Seed: 23, BucketBytes: tc.bucket, Shapes: overlapShapes(tc.batches[0])}
			if tc.dropout {
				opts.Frozen = []string{"ratio"}
			}
			dp, err := engine.NewDataParallel(m, dpDevices(t, tc.devs), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			// The hook runs each step in lock step, the reduction of a
			// group before any device starts the next segment: the
			// order in which a gradient that a later segment still
			// touched would be reduced wrong (timing alone would
			// hide it, tiny segments outrunning the reduction).
			var mu sync.Mutex
			events := map[string]int{}
			var reduced []chan struct{}
			group := func(j int) chan struct{} {
				for len(reduced) <= j {
					reduced = append(reduced, make(chan struct{}))
				}
				return reduced[j]
			}
			engine.SetOverlapHook(dp, func(kind string, dev, seg int) {
				mu.Lock()
				events[kind]++
				var wait chan struct{}
				switch {
				case kind == "reduced":
					close(group(seg))
				case kind == "start" && seg > 0 && !strings.Contains(tc.name, "nccl"):
					wait = group(seg - 1)
				}
				mu.Unlock()
				if wait != nil {
					<-wait
				}
			})
			so := opts
			so.NoOverlap = true
			serial, err := engine.NewDataParallel(m, dpDevices(t, tc.devs), so)
			if err != nil {
				t.Fatal(err)
			}
			defer serial.Close()
			ref := cpu.NewDevice()
			defer ref.Close()
			one, err := engine.NewTrainer(m, ref, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			for s, n := range tc.batches {
				in := dpBatch(tc.dt, n, uint64(s+70))
				got, err := dp.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				reduced = nil
				mu.Unlock()
				ser, err := serial.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := one.Step(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if e := math.Abs(got.Loss-ser.Loss) / math.Abs(ser.Loss); e > tc.same {
					t.Fatalf("step %d (batch %d): loss %.17g overlapped, %.17g not (rel %.3g)", s+1, n, got.Loss, ser.Loss, e)
				}
				if e := relErr(got.Loss, want.Loss); e > tc.tol {
					t.Fatalf("step %d (batch %d): loss %.12g overlapped, one device %.12g (rel %.3g)", s+1, n, got.Loss, want.Loss, e)
				}
			}
			groups := engine.OverlapGroups(dp)
			if len(groups) < 3 {
				t.Fatalf("%d bucket groups (%v), want several", len(groups), groups)
			}
			if engine.OverlapGroups(serial) != nil {
				t.Errorf("NoOverlap trainer has bucket groups %v", engine.OverlapGroups(serial))
			}
			mu.Lock()
			done := events["reduced"] + events["enqueued"]
			mu.Unlock()
			if want := len(tc.batches) * len(groups); done != want {
				t.Errorf("%d group reductions over %d steps of %d groups, want %d (events %v)", done, len(tc.batches), len(groups), want, events)
			}
			gw, err := dp.Weights()
			if err != nil {
				t.Fatal(err)
			}
			sw, err := serial.Weights()
			if err != nil {
				t.Fatal(err)
			}
			ow, err := one.Weights()
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range sw {
				for i := range w.Len() {
					g := gw[name].Float64(i)
					if e := math.Abs(g-w.Float64(i)) / (1e-30 + math.Abs(w.Float64(i))); e > tc.same {
						t.Fatalf("weight %s[%d] = %.17g overlapped, %.17g not", name, i, g, w.Float64(i))
					}
					if e := relErr(g, ow[name].Float64(i)); e > 10*tc.tol {
						t.Fatalf("weight %s[%d] = %g overlapped, one device %g", name, i, g, ow[name].Float64(i))
					}
				}
			}
		})
	}
}

// TestDataParallelOverlapOrder shows, by the order of events rather than
// by timing, that a step reduces gradient buckets while backward still
// runs: the test hook holds every device before the last segment of its
// backward (the tail) until the first bucket group has been reduced, so
// a step that reduced only after backward would never finish (the hook
// gives up after a minute). It also checks that a group is reduced only
// after every device has finished the segment that completes it, and
// that the first group holds the last parameters (their gradients come
// first in backward).
func TestDataParallelOverlapOrder(t *testing.T) {
	m, err := dpModelSized(rt.F64, false, false, 16, 12)
	if err != nil {
		t.Fatal(err)
	}
	devs := dpDevices(t, "cpu,cpu,cpu")
	dp, err := engine.NewDataParallel(m, devs, engine.TrainOptions{Loss: "loss", BucketBytes: 256, Shapes: overlapShapes(9),
		Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if _, err := dp.Step(context.Background(), dpBatch(rt.F64, 9, 1)); err != nil {
		t.Fatal(err)
	}
	groups := engine.OverlapGroups(dp)
	G := len(groups)
	if G < 3 {
		t.Fatalf("%d bucket groups, want several", G)
	}
	// The block ends with w2 and b2 (3×12 and 3 float64: 312 bytes),
	// whose gradients backward computes first.
	all := dp.GradBuckets()
	end := all[0].Off + all[0].Len
	for _, b := range all {
		end = max(end, b.Off+b.Len)
	}
	if first := groups[0]; first[0].Off < end-312 {
		t.Errorf("first group %v does not hold the last parameters (block of %d bytes)", first, end)
	}
	var mu sync.Mutex
	var log []string
	reduced0 := make(chan struct{})
	engine.SetOverlapHook(dp, func(kind string, dev, seg int) {
		mu.Lock()
		log = append(log, fmt.Sprintf("%s %d %d", kind, dev, seg))
		mu.Unlock()
		switch {
		case kind == "reduced" && seg == 0:
			close(reduced0)
		case kind == "start" && seg == G:
			select {
			case <-reduced0:
			case <-time.After(time.Minute):
				t.Errorf("device %d: the first bucket group was not reduced before its last backward segment", dev)
			}
		}
	})
	if _, err := dp.Step(context.Background(), dpBatch(rt.F64, 10, 2)); err != nil {
		t.Fatal(err)
	}
	at := func(ev string) int {
		i := slices.Index(log, ev)
		if i < 0 {
			t.Fatalf("no event %q in %v", ev, log)
		}
		return i
	}
	for k := range devs {
		if at("reduced -1 0") > at(fmt.Sprintf("done %d %d", k, G)) {
			t.Errorf("device %d finished backward before the first group was reduced: %v", k, log)
		}
		for j := range G {
			if at(fmt.Sprintf("done %d %d", k, j)) > at(fmt.Sprintf("reduced -1 %d", j)) {
				t.Errorf("group %d reduced before device %d finished segment %d: %v", j, k, j, log)
			}
		}
	}
	if t.Failed() {
		t.Log(strings.Join(log, "\n"))
	}
}

// BenchmarkDataParallelOverlap times a training step (Adam, batch 256)
// of a 5-1024-1024-3 MLP (4.2 MB of f32 gradients in buckets of at most
// 1 MB of whole parameters: three groups, the 4 MB hidden weight first)
// with the gradient reduction overlapped with backward and without
// (NoOverlap), side by side: on 2 and 4 logical CPU devices, whose cores
// this machine's host reduction shares, so the figures show what overlap
// saves when cores are scarce, not a multi-device speed-up; on two
// logical devices of one CUDA GPU (the host path); and on one GPU through
// a one-rank NCCL communicator, where the all-reduce is a no-op and the
// figures show the cost of the segments (a graph launch and an event per
// segment). The GPU cases skip without CUDA (or NCCL).
func BenchmarkDataParallelOverlap(b *testing.B) {
	for _, dc := range []struct{ name, devs, collective string }{
		{"cpu*2", "cpu,cpu", ""},
		{"cpu*4", "cpu,cpu,cpu,cpu", ""},
		{"cuda*2-host", "cuda:0,cuda:0", "host"},
		{"cuda-nccl1", "cuda:0", "nccl"},
	} {
		for _, mode := range []string{"serial", "overlap"} {
			b.Run(dc.name+"/"+mode, func(b *testing.B) {
				m, err := dpModelSized(rt.F32, false, false, 1024, 1024)
				if err != nil {
					b.Fatal(err)
				}
				tr, err := engine.NewDataParallel(m, dpDevices(b, dc.devs), engine.TrainOptions{Loss: "loss", Optimizer: &engine.Optimizer{Kind: engine.Adam, LR: 0.01},
					BucketBytes: 1 << 20, NoOverlap: mode == "serial", Collective: dc.collective, Shapes: overlapShapes(256)})
				if errors.Is(err, rt.ErrUnavailable) {
					b.Skip(err)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				in := dpBatch(rt.F32, 256, 1)
				if _, err := tr.Step(context.Background(), in); err != nil { // records the streams
					b.Fatal(err)
				}
				if mode == "overlap" && len(engine.OverlapGroups(tr)) < 2 {
					b.Fatalf("bucket groups %v: nothing overlaps", engine.OverlapGroups(tr))
				}
				c0 := processCPU()
				for b.Loop() {
					if _, err := tr.Step(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
