package train_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/data"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
	"github.com/vrun-go/vrun/train"
)

func dpData(t *testing.T, n int) *data.Dataset {
	rng := rand.New(rand.NewPCG(8, 2))
	x := make([]float64, n*6)
	y := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	for i := range y {
		y[i] = float64(rng.IntN(3))
	}
	d, err := data.NewDataset(rt.FromFloat64(rt.F32, x, n, 6), rt.FromFloat64(rt.I64, y, n), 3)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dpNet(t *testing.T, dt rt.DType) *train.Net {
	m, err := train.Arch("mlp", train.ArchOptions{Sample: []int{6}, Outputs: 3, Seed: 4, Hidden: 16, DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	net, err := train.NewNet(m, train.NetOptions{Loss: train.CrossEntropy})
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// TestRunDataParallel trains the same run on one device and on N
// logical CPU devices (93 samples in batches of 10: a last batch of 3),
// and compares every step's loss, the epoch metrics and the weights, and
// the data-parallel run with NoOverlap; then a data-parallel run stopped
// by a checkpoint resumes exactly.
func TestRunDataParallel(t *testing.T) {
	d := dpData(t, 93)
	for _, tc := range []struct {
		name string
		n    int
		dt   rt.DType
		tol  float64
	}{
		{"2cpu-f64", 2, rt.F64, 1e-10},
		{"3cpu-f64", 3, rt.F64, 1e-10},
		{"3cpu-f32", 3, rt.F32, 1e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var devs []rt.Device
			for range tc.n {
				dv := cpu.NewDevice()
				defer dv.Close()
				devs = append(devs, dv)
			}
			cfg := func(devs []rt.Device, epochs int) train.Config {
				return train.Config{Net: dpNet(t, tc.dt), Devices: devs, Optimizer: engine.Optimizer{Kind: engine.Adam, LR: 0.01},
					Train: d, Val: d, BatchSize: 10, Epochs: epochs, Shuffle: true, Seed: 3, BucketBytes: 256}
			}
			one, err := train.Run(context.Background(), cfg(devs[:1], 2))
			if err != nil {
				t.Fatal(err)
			}
			many, err := train.Run(context.Background(), cfg(devs, 2))
			if err != nil {
				t.Fatal(err)
			}
			if len(many.Losses) != len(one.Losses) || len(one.Losses) != 20 {
				t.Fatalf("%d and %d losses, want 20", len(many.Losses), len(one.Losses))
			}
			// The gradient reduction overlapped with backward (the
			// default, several buckets) and not: the same run, bit for
			// bit.
			sc := cfg(devs, 2)
			sc.NoOverlap = true
			serial, err := train.Run(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			for k := range many.Losses {
				if serial.Losses[k] != many.Losses[k] {
					t.Fatalf("step %d: loss %.17g overlapped, %.17g with NoOverlap", k+1, many.Losses[k], serial.Losses[k])
				}
			}
			for k := range one.Losses {
				if e := math.Abs(many.Losses[k]-one.Losses[k]) / math.Abs(one.Losses[k]); e > tc.tol {
					t.Fatalf("step %d: loss %.12g on %d devices, %.12g on one", k+1, many.Losses[k], tc.n, one.Losses[k])
				}
			}
			if e := math.Abs(many.Final.Loss - one.Final.Loss); e > tc.tol || many.Final.Accuracy != one.Final.Accuracy {
				t.Errorf("final %+v on %d devices, %+v on one", many.Final, tc.n, one.Final)
			}
			for name, w := range one.Weights {
				for i := range w.Len() {
					if e := math.Abs(many.Weights[name].Float64(i) - w.Float64(i)); e > tc.tol*(1+math.Abs(w.Float64(i))) {
						t.Fatalf("%s[%d] = %g on %d devices, %g on one", name, i, many.Weights[name].Float64(i), tc.n, w.Float64(i))
					}
				}
			}
			// Resume: a data-parallel run checkpointed at step 7 and
			// continued gives the straight run's losses.
			dir := t.TempDir()
			c := cfg(devs, 1)
			c.CheckpointDir, c.CheckpointEvery = dir, 7
			if _, err := train.Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			ck, err := train.ReadCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			c = cfg(devs, 2)
			c.Resume = ck
			res, err := train.Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			for k := range many.Losses {
				if e := math.Abs(res.Losses[k]-many.Losses[k]) / math.Abs(many.Losses[k]); e > tc.tol {
					t.Fatalf("resumed step %d: loss %.12g, straight %.12g", k+1, res.Losses[k], many.Losses[k])
				}
			}
		})
	}
}

// TestRunDataParallelErrors checks the up-front errors of a device list.
func TestRunDataParallelErrors(t *testing.T) {
	var devs []rt.Device
	for range 4 {
		dv := cpu.NewDevice()
		defer dv.Close()
		devs = append(devs, dv)
	}
	for _, tc := range []struct {
		name, want string
		cfg        train.Config
	}{
		{"small batch", "cannot be split over 4 devices", train.Config{BatchSize: 3, Train: dpData(t, 20)}},
		{"short last batch", "last batch of each epoch has 2 samples", train.Config{BatchSize: 6, Train: dpData(t, 20)}},
		{"device twice", "listed twice", train.Config{BatchSize: 5, Train: dpData(t, 20), Devices: []rt.Device{devs[0], devs[1], devs[0]}}},
	} {
		c := tc.cfg
		c.Net, c.Epochs, c.Optimizer = dpNet(t, rt.F32), 1, engine.Optimizer{Kind: engine.SGD, LR: 0.1}
		if c.Devices == nil {
			c.Devices = devs
		}
		_, err := train.Run(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
