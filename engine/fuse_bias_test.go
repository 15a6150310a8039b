package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TestFuseBias checks that a MatMul followed by the Add of a constant
// bias (a row of N, or [M, N], on either side of the Add; batched or not;
// the MatMul's result also read elsewhere or not) runs as one MatMul with
// the bias when fusion is on, and that fused and NoFusion runs agree
// within 1e-5 relative to max(|y|, 1) in f32 (they round alike: the bias
// joins the GEMM's f32 epilogue). Odd sizes: M 7, K 13, N 37.
func TestFuseBias(t *testing.T) {
	const m, k, n = 7, 13, 37
	cases := []struct {
		name      string
		batch     int64
		biasShape []int64
		biasLeft  bool
		reuse     bool // the MatMul's result is also an output: no fold
		anyFold   bool // either is right: the engine merges the batch into M, which an [M, N] bias does not follow
	}{
		{"row", 1, []int64{n}, true, false, false},
		{"row_right_batched", 3, []int64{n}, false, false, false},
		{"matrix", 1, []int64{m, n}, false, false, false},
		{"matrix_batched", 2, []int64{1, m, n}, true, false, true},
		{"shared_result", 1, []int64{n}, true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := model.NewBuilder()
			x := b.Input("x", rt.F32, c.batch, m, k)
			w := b.Weight("w", rt.F32, []int64{k, n}, randT([]int64{k, n}).Data)
			bias := b.Weight("bias", rt.F32, c.biasShape, randT(c.biasShape).Data)
			h := b.Op("MatMul", []string{x, w}, nil)
			in := []string{h, bias}
			if c.biasLeft {
				in = []string{bias, h}
			}
			y := b.Op("Add", in, nil)
			b.Output(y)
			if c.reuse {
				b.Output(h)
			}
			mdl, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			feeds := map[string]*rt.Tensor{"x": randT([]int64{c.batch, m, k})}
			var got [2][]float64
			for i, noFusion := range []bool{false, true} {
				s := session(t, mdl, engine.Options{NoFusion: noFusion})
				adds := s.Info().OpCounts["Binary.Add"]
				if wantAdd := 1; c.anyFold && !noFusion {
					// either
				} else if !noFusion && !c.reuse {
					wantAdd = 0
					if adds != wantAdd {
						t.Fatalf("fused: ops %v", s.Info().OpCounts)
					}
				} else if adds != wantAdd {
					t.Fatalf("NoFusion %v: ops %v", noFusion, s.Info().OpCounts)
				}
				out, err := s.Run(context.Background(), feeds)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = out[y].Float64s()
			}
			for j := range got[0] {
				if math.Abs(got[0][j]-got[1][j]) > 1e-5*math.Max(math.Abs(got[1][j]), 1) {
					t.Fatalf("y[%d]: fused %v, unfused %v", j, got[0][j], got[1][j])
				}
			}
		})
	}
}
