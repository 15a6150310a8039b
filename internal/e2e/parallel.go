package e2e

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/rt"
)

// part returns rows [from, to) (dim 0) of t.
func part(t *rt.Tensor, from, to int) *rt.Tensor {
	rb := len(t.Data) / t.Shape[0]
	return &rt.Tensor{DType: t.DType, Shape: append([]int{to - from}, t.Shape[1:]...), Data: t.Data[from*rb : to*rb]}
}

// join returns a and b joined along dim 0.
func join(a, b *rt.Tensor) *rt.Tensor {
	return &rt.Tensor{DType: a.DType, Shape: append([]int{a.Shape[0] + b.Shape[0]}, a.Shape[1:]...),
		Data: append(append([]byte(nil), a.Data...), b.Data...)}
}

// backwards returns t with its rows (dim 0) in reverse order.
func backwards(t *rt.Tensor) *rt.Tensor {
	n := t.Shape[0]
	out := &rt.Tensor{DType: t.DType, Shape: t.Shape, Data: make([]byte, 0, len(t.Data))}
	for i := n - 1; i >= 0; i-- {
		out.Data = append(out.Data, part(t, i, i+1).Data...)
	}
	return out
}

// DataParallel runs the test models data-parallel on devs (see
// engine.ParallelSession) with every batch size from len(devs) to the test
// input's rows, so that most splits are uneven, and checks each output:
// against NumPy's, and bit for bit against the rows each device gives
// when it runs its part alone (a single-device session of that device),
// and within f32 rounding against the first device given the whole batch.
// It also checks that a batch smaller than the device count is refused.
func DataParallel(t *testing.T, devs []rt.Device) {
	for _, name := range Models {
		t.Run(name, func(t *testing.T) {
			c := load(t, name)
			defer c.m.Close()
			m, k := c.m, len(devs)
			// Enough rows for uneven splits: the test input's rows
			// repeated, forwards then backwards, with NumPy's outputs.
			x, want := c.x, c.want
			for x.Shape[0] < 2*k+1 {
				x, want = join(x, backwards(c.x)), join(want, backwards(c.want))
			}
			n := x.Shape[0]
			dp, err := engine.NewParallelSession(m, devs, engine.Options{Shapes: map[string][]int{"x": x.Shape}})
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			single := make([]*engine.Session, k)
			for i, d := range devs {
				if single[i], err = engine.New(m, d, engine.Options{Shapes: map[string][]int{"x": part(x, 0, 1).Shape}}); err != nil {
					t.Fatal(err)
				}
				defer single[i].Close()
			}
			ctx := context.Background()
			for rows := k; rows <= n; rows++ {
				out, err := dp.Run(ctx, map[string]*rt.Tensor{"x": part(x, 0, rows)})
				if err != nil {
					t.Fatalf("batch %d: %v", rows, err)
				}
				y := out["y"]
				if err := Compare(y, part(want, 0, rows), RelTol, AbsTol); err != nil {
					t.Fatalf("batch %d on %d devices: %v", rows, k, err)
				}
				// The first device given the whole batch agrees within
				// f32 rounding (not bit for bit: a kernel may be chosen by
				// the batch size, as the CPU's GEMMs are).
				whole, err := single[0].Run(ctx, map[string]*rt.Tensor{"x": part(x, 0, rows)})
				if err != nil {
					t.Fatal(err)
				}
				if err := Compare(y, whole["y"], 2*RelTol, AbsTol); err != nil {
					t.Fatalf("batch %d: against the whole batch on %s alone: %v", rows, devs[0].Info().Spec(), err)
				}
				// Each device's rows are what it gives alone.
				from := 0
				for i := range devs {
					r := rows / k
					if i < rows%k {
						r++
					}
					alone, err := single[i].Run(ctx, map[string]*rt.Tensor{"x": part(x, from, from+r)})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(alone["y"].Data, part(y, from, from+r).Data) {
						t.Fatalf("batch %d: rows %d-%d from %s differ from its single-device run", rows, from, from+r-1, devs[i].Info().Spec())
					}
					from += r
				}
			}
			if k > 1 {
				_, err := dp.Run(ctx, map[string]*rt.Tensor{"x": part(x, 0, k-1)})
				if err == nil || !errors.Is(err, engine.ErrBatchTooSmall) {
					t.Errorf("batch of %d on %d devices: %v, want ErrBatchTooSmall", k-1, k, err)
				}
			}
		})
	}
}
