package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// An index out of range in Gather, GatherElements, ScatterElements,
// GatherND or ScatterND (ONNX: an error) fails Session.Run with an
// *rt.IndexError that names the node; the session still runs afterwards.
// GatherND and ScatterND flatten their index tuples: an entry outside its
// own dim whose flat index would still be in range (data [3, 4], tuple
// [0, 5]) is an error too.
func TestIndexOutOfRangeRun(t *testing.T) {
	data := make([]float32, 12)
	for i := range data {
		data[i] = float32(i + 1)
	}
	for _, tc := range []struct {
		op     string
		attrs  model.Attrs
		ishape []int64
		good   []int64
		bad    [][]int64
		upd    []int64 // shape of the updates input, if any
	}{
		{op: "Gather", attrs: model.Attrs{"axis": int64(1)}, ishape: []int64{2}, good: []int64{3, -4}, bad: [][]int64{{4, 0}, {0, -5}}},
		{op: "GatherElements", attrs: model.Attrs{"axis": int64(0)}, ishape: []int64{2, 4}, good: []int64{0, 1, 2, -3, 2, 2, 2, 2},
			bad: [][]int64{{0, 1, 2, 3, 0, 0, 0, 0}, {0, 0, 0, 0, -4, 0, 0, 0}}},
		{op: "ScatterElements", attrs: model.Attrs{"axis": int64(1)}, ishape: []int64{3, 1}, good: []int64{0, 3, -1},
			bad: [][]int64{{0, 4, 0}, {-5, 0, 0}}, upd: []int64{3, 1}},
		{op: "GatherND", ishape: []int64{2, 2}, good: []int64{0, 3, 2, -4}, bad: [][]int64{{0, 5, 0, 0}, {3, 0, 0, 0}, {0, 0, -4, 0}}},
		{op: "ScatterND", ishape: []int64{1, 2}, good: []int64{2, 3}, bad: [][]int64{{0, 4}, {-4, 0}}, upd: []int64{1}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			b := model.NewBuilder()
			x := b.Weight("data", rt.F32, []int64{3, 4}, data)
			idx := b.Input("idx", rt.I64, tc.ishape...)
			ins := []string{x, idx}
			if tc.upd != nil {
				n := int64(1)
				for _, d := range tc.upd {
					n *= d
				}
				u := make([]float32, n)
				for i := range u {
					u[i] = 100
				}
				ins = append(ins, b.Weight("upd", rt.F32, tc.upd, u))
			}
			b.Node("the_node", tc.op, ins, []string{"y"}, tc.attrs)
			b.Output("y")
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			s := session(t, m, engine.Options{})
			shape := make([]int, len(tc.ishape))
			for i, d := range tc.ishape {
				shape[i] = int(d)
			}
			in := func(v []int64) map[string]*rt.Tensor {
				f := make([]float64, len(v))
				for i, x := range v {
					f[i] = float64(x)
				}
				return map[string]*rt.Tensor{"idx": rt.FromFloat64(rt.I64, f, shape...)}
			}
			if _, err := s.Run(context.Background(), in(tc.good)); err != nil {
				t.Fatalf("indices %v: %v", tc.good, err)
			}
			for _, bad := range tc.bad {
				_, err := s.Run(context.Background(), in(bad))
				if !errors.Is(err, rt.ErrIndexOutOfRange) {
					t.Fatalf("indices %v: Run returned %v, want rt.ErrIndexOutOfRange", bad, err)
				}
				var ie *rt.IndexError
				if !errors.As(err, &ie) || ie.Node != "the_node" || ie.NodeOp != tc.op {
					t.Errorf("indices %v: %v: want an *rt.IndexError naming node the_node (%s)", bad, err, tc.op)
				}
				// The session keeps working.
				if _, err := s.Run(context.Background(), in(tc.good)); err != nil {
					t.Fatalf("indices %v after %v: %v", tc.good, bad, err)
				}
			}
		})
	}
}
