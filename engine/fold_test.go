package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// countingDevice counts the ops launched on its streams and its Close calls.
type countingDevice struct {
	rt.Device
	launches, closes atomic.Int64
}

func (d *countingDevice) NewStream(o rt.StreamOptions) (rt.Stream, error) {
	st, err := d.Device.NewStream(o)
	if err != nil {
		return nil, err
	}
	return &countingStream{Stream: st, n: &d.launches}, nil
}

func (d *countingDevice) Close() error {
	d.closes.Add(1)
	return d.Device.Close()
}

type countingStream struct {
	rt.Stream
	n *atomic.Int64
}

func (s *countingStream) Launch(op rt.Op) error {
	s.n.Add(1)
	return s.Stream.Launch(op)
}

// Options.FoldDevice evaluates the constant nodes (here a transposed
// weight): they run on it, not on the session's device, the session leaves
// it open, and the result matches a float64 reference.
func TestFoldDeviceOption(t *testing.T) {
	const n, k, m = 3, 5, 4
	rng := rand.New(rand.NewPCG(7, 8))
	wv := make([]float32, m*k) // stored [m, k], used transposed
	for i := range wv {
		wv[i] = float32(rng.Float64() - 0.5)
	}
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, n, k)
	wt := b.Op("Transpose", []string{b.Weight("w", rt.F32, []int64{m, k}, wv)}, model.Attrs{"perm": []int64{1, 0}})
	y := b.Op("MatMul", []string{x, wt}, nil)
	b.Output(y)
	mdl, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fold := &countingDevice{Device: cpu.NewDevice()}
	defer fold.Device.Close()
	dev := &countingDevice{Device: cpu.NewDevice()}
	defer dev.Device.Close()
	s, err := engine.New(mdl, dev, engine.Options{FoldDevice: fold})
	if err != nil {
		t.Fatal(err)
	}
	xv := randTensor(rng, n, k)
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": xv})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fold.launches.Load() == 0 {
		t.Error("no op was launched on the fold device")
	}
	if got := s.Info().OpCounts; len(got) != 1 || dev.launches.Load() != 1 {
		t.Errorf("session device ran %d launches, plan ops %v; want the MatMul only", dev.launches.Load(), got)
	}
	if fold.closes.Load() != 0 {
		t.Error("the session closed the caller's fold device")
	}
	xs, got := xv.Float64s(), out[y].Float64s()
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			want := 0.0
			for l := 0; l < k; l++ {
				want += xs[i*k+l] * float64(wv[j*k+l])
			}
			if d := math.Abs(got[i*m+j] - want); d > 1e-5 {
				t.Errorf("y[%d,%d] = %v, want %v", i, j, got[i*m+j], want)
			}
		}
	}
}
