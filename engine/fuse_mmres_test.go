package engine_test

import "testing"

// TestFuseMatMulResidual checks the residual fold into a MatMul (an Add
// of a Linear's result and a tensor computed before it becomes the
// MatMul's Res): on which graphs and devices it happens (the Binary Adds
// left: the CPU and OpenCL add no residual in a MatMul and keep the Add),
// and the values against a float64 reference (refGraph), within 1e-5
// relative to max(|y|, 1) in f32. The graphs are a transformer block's
// shortcut at odd sizes: x [3, 5, 7] + Linear(x), the Add's operands
// either way round, a Relu after the Add (it folds too: Act applies after
// Res), no bias, a residual computed after the MatMul (no fold: the Add
// is not next to it) and a MatMul result that is also a graph output (no
// fold). The bias goes through a constant Mul, so that the plan's fold
// device (the CPU) is open: the fold must not ask it.
func TestFuseMatMulResidual(t *testing.T) {
	forEachBackend(t, testFuseMatMulResidual)
}

func testFuseMatMulResidual(t *testing.T, spec string) {
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
			g := newRefGraph(uint64(ci) + 11)
			x := g.input(3, 5, 7)
			z := g.matmul(x, 7)
			if !c.noBias {
				z = g.bias(z, true)
			}
			r := x
			if c.late {
				r = g.unary("Sin", x)
			}
			a, b := z, r
			if c.left {
				a, b = r, z
			}
			y := g.binary("Add", a, b)
			if c.relu {
				y = g.unary("Relu", y)
			}
			outs := []string{y}
			if c.output {
				outs = append(outs, z)
			}
			s := g.session(t, spec, outs...)
			want := 1
			if folds {
				want = c.wantAdds
			}
			if n := s.Info().OpCounts["Binary.Add"]; n != want {
				t.Errorf("%d Adds, want %d (ops %v)", n, want, s.Info().OpCounts)
			}
			if n := s.Info().OpCounts["Unary.Relu"]; c.relu && folds && n != 0 {
				t.Errorf("%d Relus left, want 0 (ops %v)", n, s.Info().OpCounts)
			}
			g.check(t, s, 1e-5, outs...)
		})
	}
}
