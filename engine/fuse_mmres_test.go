package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// TestFuseMatMulResidual checks the residual fold into a MatMul (an Add
// of a Linear's result and a tensor computed before it becomes the
// MatMul's Res): on which graphs and devices it happens (the Binary Adds
// left: the CPU and OpenCL add no residual in a MatMul and keep the Add),
// and the values against a float64 reference, within 1e-5 relative to
// max(|y|, 1) in f32. The graphs are a transformer block's shortcut at
// odd sizes: x [3, 5, 7] + Linear(x), the Add's operands either way round,
// a Relu after the Add (it folds too: Act applies after Res), no bias, a
// residual computed after the MatMul (no fold: the Add is not next to
// it) and a MatMul result that is also a graph output (no fold).
func TestFuseMatMulResidual(t *testing.T) {
	forEachBackend(t, testFuseMatMulResidual)
}

func testFuseMatMulResidual(t *testing.T, spec string) {
	const b, l, e = 3, 5, 7
	folds := spec == "vulkan:0" || spec == "cuda:0"
	cases := []struct {
		name     string
		left     bool // Add(residual, linear)
		relu     bool
		noBias   bool
		late     bool // the residual is computed after the MatMul
		output   bool // the MatMul's result is also an output
		wantAdds int  // where the device folds
	}{
		{name: "right"},
		{name: "left", left: true},
		{name: "relu", relu: true},
		{name: "no_bias", noBias: true},
		{name: "late_residual", late: true, wantAdds: 1},
		{name: "linear_output", output: true, wantAdds: 1},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			rnd := func(n int) ([]float32, []float64) {
				v32, v64 := make([]float32, n), make([]float64, n)
				for i := range v32 {
					v32[i] = float32((0.1 + rng.Float64()) * float64(1-2*rng.IntN(2)))
					v64[i] = float64(v32[i])
				}
				return v32, v64
			}
			x32, x64 := rnd(b * l * e)
			w32, w := rnd(e * e)
			b32, bias := rnd(e)
			if c.noBias {
				clear(bias)
			}
			bd := model.NewBuilder()
			x := bd.Input("x", rt.F32, b, l, e)
			z := bd.Op("MatMul", []string{x, bd.Weight("w", rt.F32, []int64{e, e}, w32)}, nil)
			if !c.noBias {
				// The bias is b*1, folded at plan time: the fold device
				// (the CPU, which adds no MatMul residual) is open.
				bb := bd.Op("Mul", []string{bd.Weight("b", rt.F32, []int64{e}, b32), bd.Weight("one", rt.F32, nil, []float32{1})}, nil)
				z = bd.Op("Add", []string{z, bb}, nil)
			}
			r := x
			if c.late {
				r = bd.Op("Sin", []string{x}, nil)
			}
			in := []string{z, r}
			if c.left {
				in = []string{r, z}
			}
			y := bd.Op("Add", in, nil)
			if c.relu {
				y = bd.Op("Relu", []string{y}, nil)
			}
			bd.Output(y)
			if c.output {
				bd.Output(z)
			}
			m, err := bd.Build()
			if err != nil {
				t.Fatal(err)
			}
			s, err := engine.New(m, dpDevices(t, spec)[0], engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			adds := s.Info().OpCounts["Binary.Add"]
			want := 1
			if folds {
				want = c.wantAdds
			}
			if adds != want {
				t.Errorf("%d Adds, want %d (ops %v)", adds, want, s.Info().OpCounts)
			}
			if n := s.Info().OpCounts["Unary.Relu"]; c.relu && folds && n != 0 {
				t.Errorf("%d Relus left, want 0 (ops %v)", n, s.Info().OpCounts)
			}
			out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32(x32, b, l, e)})
			if err != nil {
				t.Fatal(err)
			}
			got := out[y].Float64s()
			for row := range b * l {
				for j := range e {
					v := bias[j]
					for k := range e {
						v += x64[row*e+k] * w[k*e+j]
					}
					rv := x64[row*e+j]
					if c.late {
						rv = math.Sin(rv)
					}
					v += rv
					if c.relu {
						v = max(v, 0)
					}
					if g := got[row*e+j]; math.Abs(g-v) > 1e-5*math.Max(math.Abs(v), 1) {
						t.Fatalf("y[%d, %d] = %v, want %v", row, j, g, v)
					}
				}
			}
		})
	}
}
