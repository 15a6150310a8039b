package engine_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// A MatMul result read by an earlier node must not get the activation of
// a later, last reader fused into it: the earlier reader wants the value
// before the activation.
func TestFusionKeepsEarlierReaders(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1, 2)
	w := b.Weight("w", rt.F32, []int64{2, 2}, []float32{1, 0, 0, 1})
	h := b.Op("MatMul", []string{x, w}, nil) // h = x
	neg := b.Op("Neg", []string{h}, nil)     // reads h before the Relu
	r := b.Op("Relu", []string{h}, nil)      // last reader of h
	b.Output(neg, r)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32([]float32{-1, 2}, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[neg].Float64s(); got[0] != 1 || got[1] != -2 {
		t.Errorf("Neg(MatMul) = %v, want [1 -2]", got)
	}
	if got := out[r].Float64s(); got[0] != 0 || got[1] != 2 {
		t.Errorf("Relu(MatMul) = %v, want [0 2]", got)
	}
}

// The same for a BatchNormalization folded into the Conv that feeds it.
func TestBatchNormFoldKeepsEarlierReaders(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1, 1, 1, 2)
	w := b.Weight("w", rt.F32, []int64{1, 1, 1, 1}, []float32{1})
	h := b.Op("Conv", []string{x, w}, nil) // h = x
	neg := b.Op("Neg", []string{h}, nil)
	one := func(name string, v float32) string { return b.Weight(name, rt.F32, []int64{1}, []float32{v}) }
	bn := b.Op("BatchNormalization", []string{h, one("s", 2), one("b", 0), one("m", 0), one("v", 1)}, model.Attrs{"epsilon": 0.0})
	b.Output(neg, bn)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32([]float32{-1, 2}, 1, 1, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[neg].Float64s(); math.Abs(got[0]-1) > 1e-6 || math.Abs(got[1]+2) > 1e-6 {
		t.Errorf("Neg(Conv) = %v, want [1 -2]", got)
	}
	if got := out[bn].Float64s(); math.Abs(got[0]+2) > 1e-6 || math.Abs(got[1]-4) > 1e-6 {
		t.Errorf("BatchNorm(Conv) = %v, want [-2 4]", got)
	}
}

// Conv, BatchNormalization and Relu still become one Conv.
func TestConvBatchNormReluFuse(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, 1, 1, 1, 2)
	w := b.Weight("w", rt.F32, []int64{1, 1, 1, 1}, []float32{1})
	h := b.Op("Conv", []string{x, w}, nil)
	one := func(name string, v float32) string { return b.Weight(name, rt.F32, []int64{1}, []float32{v}) }
	h = b.Op("BatchNormalization", []string{h, one("s", 2), one("b", 0), one("m", 0), one("v", 1)}, model.Attrs{"epsilon": 0.0})
	h = b.Op("Relu", []string{h}, nil)
	b.Output(h)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{})
	if n := s.Info().Ops; n != 1 {
		t.Errorf("%d ops, want 1 fused Conv", n)
	}
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32([]float32{-1, 2}, 1, 1, 1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[h].Float64s(); got[0] != 0 || got[1] != 4 {
		t.Errorf("Relu(BN(Conv)) = %v, want [0 4]", got)
	}
}

// A run on one plan keeps working while another goroutine plans new input
// shapes, each of which appends plan-time constants to the weight buffer.
func TestRunWhileWeightsGrow(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 2, 8)
	one := func(name string, v float32) string { return b.Weight(name, rt.F32, []int64{2}, []float32{v, v}) }
	h := b.Op("BatchNormalization", []string{x, one("s", 2), one("b", 1), one("m", 0), one("v", 1)}, model.Attrs{"epsilon": 0.0})
	b.Output(h)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{Parallel: 2, Shapes: map[string][]int{"x": {1, 2, 8}}})
	in := func(n int) map[string]*rt.Tensor {
		v := make([]float32, n*16)
		for i := range v {
			v[i] = float32(i % 7)
		}
		return map[string]*rt.Tensor{"x": rt.FromFloat32(v, n, 2, 8)}
	}
	check := func(n int) error {
		out, err := s.Run(context.Background(), in(n))
		if err != nil {
			return err
		}
		for i, v := range out[h].Float64s() {
			if want := 2*float64(i%7) + 1; v != want {
				return fmt.Errorf("batch %d: element %d = %v, want %v", n, i, v, want)
			}
		}
		return nil
	}
	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := check(1); err != nil {
				done <- err
				return
			}
		}
	}()
	for n := 2; n < 40; n++ {
		if err := check(n); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A MatMul over an empty batch plans and runs, giving an empty result.
func TestMatMulEmptyBatch(t *testing.T) {
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 2, 3)
	w := b.Weight("w", rt.F32, []int64{3, 4}, make([]float32, 12))
	y := b.Op("MatMul", []string{x, w}, nil)
	b.Output(y)
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, m, engine.Options{Shapes: map[string][]int{"x": {0, 2, 3}}})
	out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32(nil, 0, 2, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out[y].Shape; len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 4 {
		t.Errorf("shape %v, want [0 2 4]", got)
	}
}
