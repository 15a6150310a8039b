package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TestFuseGelu checks that the erf GELU that exporters write (Div by
// sqrt 2 or Mul by its inverse, Erf, Add 1, Mul by x, Mul by 0.5) becomes
// one Gelu, folded into the MatMul (with its bias) in front of it, and that
// the fused run, the NoFusion run and a float64 reference agree within
// 1e-5 relative to max(|y|, 1) in f32 (the fused run evaluates erf once in
// the epilogue instead of five passes). When the Erf's result is also a
// graph output, nothing is fused. It runs on the CPU and on each GPU
// backend present (lavapipe and pocl in CI), where the Gelu may stay a
// Unary if the device's MatMul has no such epilogue. Odd sizes: batch 3,
// M 7, K 13, N 37.
func TestFuseGelu(t *testing.T) {
	forEachBackend(t, testFuseGelu)
}

func testFuseGelu(t *testing.T, spec string) {
	const bt, m, k, n = 3, 7, 13, 37
	cases := []struct {
		name     string
		linear   bool // x @ W + b in front of the GELU
		mulForm  bool // x * (1/sqrt 2) instead of x / sqrt 2
		swap     bool // the commutative operands the other way round
		shareErf bool // the Erf's result is also an output: no fusion
		wantOps  map[string]int
	}{
		{name: "linear", linear: true, wantOps: map[string]int{"MatMul": 1}},
		{name: "linear_mul_swapped", linear: true, mulForm: true, swap: true, wantOps: map[string]int{"MatMul": 1}},
		{name: "input", wantOps: map[string]int{"Unary.Gelu": 1}},
		{name: "shared_erf", linear: true, shareErf: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := model.NewBuilder()
			xin := b.Input("x", rt.F32, bt, m, k)
			x := xin
			w, bias := randT([]int64{k, n}), randT([]int64{n})
			if c.linear {
				wn := b.Weight("w", rt.F32, []int64{k, n}, w.Data)
				bn := b.Weight("bias", rt.F32, []int64{n}, bias.Data)
				x = b.Op("Add", []string{b.Op("MatMul", []string{x, wn}, nil), bn}, nil)
			}
			scalar := func(name string, v float64) string {
				return b.Weight(name, rt.F32, []int64{1}, rt.FromFloat32([]float32{float32(v)}, 1).Data)
			}
			var t1 string
			if c.mulForm {
				t1 = b.Op("Mul", []string{x, scalar("isq2", 1/math.Sqrt2)}, nil)
			} else {
				t1 = b.Op("Div", []string{x, scalar("sq2", math.Sqrt2)}, nil)
			}
			t2 := b.Op("Erf", []string{t1}, nil)
			pair := func(a, c2 string, swap bool) []string {
				if swap {
					return []string{c2, a}
				}
				return []string{a, c2}
			}
			t3 := b.Op("Add", pair(t2, scalar("one", 1), c.swap), nil)
			t4 := b.Op("Mul", pair(x, t3, c.swap), nil)
			y := b.Op("Mul", pair(t4, scalar("half", 0.5), c.swap), nil)
			b.Output(y)
			if c.shareErf {
				b.Output(t2)
			}
			mdl, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			xv := randT([]int64{bt, m, k})
			feeds := map[string]*rt.Tensor{"x": xv}

			// float64 reference
			xs, ws, bs := xv.Float64s(), w.Float64s(), bias.Float64s()
			cols := k
			if c.linear {
				cols = n
			}
			want := make([]float64, bt*m*cols)
			for r := 0; r < bt*m; r++ {
				for j := 0; j < cols; j++ {
					var v float64
					if !c.linear {
						v = xs[r*k+j] // cols == k
					} else {
						v = bs[j]
						for e := 0; e < k; e++ {
							v += xs[r*k+e] * ws[e*n+j]
						}
					}
					want[r*cols+j] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
				}
			}
			for _, noFusion := range []bool{false, true} {
				dev := dpDevices(t, spec)[0]
				s, err := engine.New(mdl, dev, engine.Options{NoFusion: noFusion})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ops := s.Info().OpCounts
				switch {
				case noFusion || c.shareErf:
					if ops["Unary.Erf"] != 1 {
						t.Fatalf("NoFusion %v: ops %v, want the Erf kept", noFusion, ops)
					}
				default:
					if ops["Unary.Erf"] != 0 || ops["Binary.Mul"]+ops["Binary.Div"]+ops["Binary.Add"] != 0 {
						t.Fatalf("fused: ops %v", ops)
					}
					for name, cnt := range c.wantOps {
						if ops[name] != cnt {
							t.Fatalf("fused: ops %v, want %s %d", ops, name, cnt)
						}
					}
					if c.linear && spec == "cpu" && ops["Unary.Gelu"] != 0 {
						t.Fatalf("fused: ops %v, want the Gelu in the MatMul", ops)
					}
				}
				out, err := s.Run(context.Background(), feeds)
				if err != nil {
					t.Fatal(err)
				}
				got := out[y].Float64s()
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-5*math.Max(math.Abs(want[j]), 1) {
						t.Fatalf("NoFusion %v: y[%d] = %v, want %v", noFusion, j, got[j], want[j])
					}
				}
			}
		})
	}
}
