package engine_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// BenchmarkRunIO measures a run whose time is its transfers: y = Relu(x)
// on 16 MiB of f32, on every available device, through Run (host tensors
// in and out) and, where the session has it, through RunDevice (device
// tensors in and out). MB/s counts the input bytes.
func BenchmarkRunIO(b *testing.B) {
	const rows, cols = 1024, 4096
	bld := model.NewBuilder()
	x := bld.Input("x", rt.F32, rows, cols)
	bld.Node("relu", "Relu", []string{x}, []string{"y"}, nil)
	bld.Output("y")
	m, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	in := randTensor(rand.New(rand.NewPCG(1, 1)), rows, cols)
	for _, spec := range []string{"cpu", "vulkan:0", "opencl:0"} {
		b.Run(spec, func(b *testing.B) {
			dev := dpDevices(b, spec)[0]
			s, err := engine.New(m, dev, engine.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.Run("Run", func(b *testing.B) {
				b.SetBytes(int64(len(in.Data)))
				for b.Loop() {
					if _, err := s.Run(ctx, map[string]*rt.Tensor{"x": in}); err != nil {
						b.Fatal(err)
					}
				}
			})
			runDevice(b, s, in)
		})
	}
}

// runDevice benchmarks RunDevice where the session has it (the
// interface keeps this file building on commits before it).
func runDevice(b *testing.B, s any, in *rt.Tensor) {
	type devRunner interface {
		RunDevice(context.Context, map[string]*rt.DeviceTensor) (map[string]*rt.DeviceTensor, error)
		Pool() *rt.MemPool
	}
	r, ok := s.(devRunner)
	if !ok {
		return
	}
	dx, err := r.Pool().ToDevice(in)
	if err != nil {
		b.Fatal(err)
	}
	defer dx.Free()
	b.Run("RunDevice", func(b *testing.B) {
		b.SetBytes(int64(len(in.Data)))
		for b.Loop() {
			out, err := r.RunDevice(context.Background(), map[string]*rt.DeviceTensor{"x": dx})
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range out {
				o.Free()
			}
		}
	})
}
