package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// Goroutines and RunsEach size [Concurrent]: each of the Goroutines runs
// RunsEach times.
const (
	Goroutines = 6
	RunsEach   = 8
)

// rows returns the first k rows (dim 0) of t.
func rows(t *rt.Tensor, k int) *rt.Tensor {
	shape := append([]int{k}, t.Shape[1:]...)
	n := int(rt.NumElements(shape)) * t.DType.Size()
	return &rt.Tensor{DType: t.DType, Shape: shape, Data: t.Data[:n]}
}

// Concurrent runs the test models from many goroutines at once on dev:
// for each model two sessions, each with Parallel 3, share the device and
// are fed batches of 1 to N rows of the test input, so that every batch
// size is planned (and its constants appended to the weight buffer) while
// runs of other sizes are in flight. Every output is checked against
// NumPy's and, on devices of kind rt.KindCPU (the CPU backend, lavapipe,
// pocl), bit for bit against a serial run of the same batch. Run it under
// -race.
func Concurrent(t *testing.T, dev rt.Device) {
	forEachModel(t, func(t *testing.T, c testCase) {
		m, x, want := c.m, c.x, c.want
		n := x.Shape[0]
		exact := dev.Info().Kind == rt.KindCPU
		// Serial references, one per batch size, from a session of
		// their own.
		serial := make([]*rt.Tensor, n+1)
		ref, err := engine.New(m, dev, engine.Options{Shapes: map[string][]int{"x": rows(x, 1).Shape}})
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= n; k++ {
			out, err := ref.Run(context.Background(), map[string]*rt.Tensor{"x": rows(x, k)})
			if err != nil {
				t.Fatal(err)
			}
			if err := Compare(out["y"], rows(want, k), RelTol, AbsTol); err != nil {
				t.Fatalf("serial batch %d: %v", k, err)
			}
			serial[k] = out["y"]
		}
		ref.Close()

		sessions := make([]*engine.Session, 2)
		for i := range sessions {
			s, err := engine.New(m, dev, engine.Options{Parallel: 3, Shapes: map[string][]int{"x": rows(x, n).Shape}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sessions[i] = s
		}
		var wg sync.WaitGroup
		errs := make(chan error, Goroutines)
		for g := 0; g < Goroutines; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				s := sessions[g%len(sessions)]
				for r := 0; r < RunsEach; r++ {
					k := 1 + (g*5+r*3)%n
					out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rows(x, k)})
					if err == nil {
						err = Compare(out["y"], rows(want, k), RelTol, AbsTol)
					}
					if err == nil && exact && !bytes.Equal(out["y"].Data, serial[k].Data) {
						err = fmt.Errorf("output differs from the serial run's bits")
					}
					if err != nil {
						errs <- fmt.Errorf("goroutine %d, run %d, batch %d: %w", g, r, k, err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
