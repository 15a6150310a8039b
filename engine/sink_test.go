package engine_test

import "testing"

// TestSinkTransposes checks transpose sinking on graphs shaped like
// PyTorch's batch-first attention block: Transpose, Linear, an
// elementwise op (h*h, which no MatMul epilogue takes), Linear,
// Transpose back. Where the Transposes only reorder rows, both go (no
// Unary.Copy is left): the first MatMul reads x, the new row order passes
// through the in-place h*h and the second MatMul, and the second Transpose
// is left a plain copy, which the second MatMul's write replaces. At
// batch 1 both Transposes are plain copies and go too. Where the first
// moves the last dim, or its result is also a graph output (then h*h,
// written in place, keeps the second from sinking on its own), or
// VRUN_FUSE_OFF names "sink", both stay. (TestFuseAttentionTransformer
// covers the second kind of sinking, where the Attention writes its rows
// in the second Transpose's order.) Every case is checked against a
// float64 reference (refGraph): within 1e-5 relative to max(|y|, 1) in
// f32. Odd sizes throughout; it runs on the CPU and each GPU backend
// present.
func TestSinkTransposes(t *testing.T) {
	forEachBackend(t, testSinkTransposes)
}

func testSinkTransposes(t *testing.T, spec string) {
	cases := []struct {
		name      string
		shape     []int // input shape; the last dim is E
		perm      []int // the first Transpose; the second is its inverse
		f1, f2    int   // the Linears' widths
		outputMid bool  // the first Transpose's result is also an output
		off       bool  // VRUN_FUSE_OFF=mmres,sink
		copies    int   // Unary.Copy ops left
	}{
		{name: "batch_first", shape: []int{3, 5, 7}, perm: []int{1, 0, 2}, f1: 9, f2: 6},
		{name: "batch_one", shape: []int{1, 5, 7}, perm: []int{1, 0, 2}, f1: 9, f2: 6},
		{name: "three_row_dims", shape: []int{2, 3, 5, 7}, perm: []int{2, 0, 1, 3}, f1: 11, f2: 4},
		{name: "last_dim_moves", shape: []int{3, 5, 7}, perm: []int{0, 2, 1}, f1: 9, f2: 6, copies: 2},
		{name: "copy_is_output", shape: []int{3, 5, 7}, perm: []int{1, 0, 2}, f1: 9, f2: 6, outputMid: true, copies: 2},
		{name: "off", shape: []int{3, 5, 7}, perm: []int{1, 0, 2}, f1: 9, f2: 6, off: true, copies: 2},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.off {
				t.Setenv("VRUN_FUSE_OFF", "mmres,sink")
			}
			inv := make([]int, len(c.perm))
			for i, p := range c.perm {
				inv[p] = i
			}
			g := newRefGraph(uint64(ci))
			t1 := g.transpose(g.input(c.shape...), c.perm...)
			h := g.bias(g.matmul(t1, c.f1), false)
			h = g.binary("Mul", h, h)
			y := g.transpose(g.bias(g.matmul(h, c.f2), false), inv...)
			outs := []string{y}
			if c.outputMid {
				outs = append(outs, t1)
			}
			s := g.session(t, spec, outs...)
			if n := s.Info().OpCounts["Unary.Copy"]; n != c.copies {
				t.Errorf("%d copies, want %d (ops %v)", n, c.copies, s.Info().OpCounts)
			}
			g.check(t, s, 1e-5, y)
			if c.outputMid {
				g.check(t, s, 0, t1) // a copy: exact
			}
		})
	}
}
