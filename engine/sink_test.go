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

// permute64 returns x (of shape) transposed by perm (ONNX Transpose) and
// the new shape.
func permute64(x []float64, shape, perm []int) ([]float64, []int) {
	out := make([]int, len(perm))
	for i, p := range perm {
		out[i] = shape[p]
	}
	src := rt.ContiguousStrides(shape)
	y := make([]float64, len(x))
	idx := make([]int, len(out))
	for j := range y {
		off := 0
		for i, p := range perm {
			off += idx[i] * src[p]
		}
		y[j] = x[off]
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < out[i] {
				break
			}
			idx[i] = 0
		}
	}
	return y, out
}

// linear64 returns x [rows, k] @ w [k, n] + b [n].
func linear64(x, w, b []float64, rows, k, n int) []float64 {
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			s := b[j]
			for i := range k {
				s += x[r*k+i] * w[i*n+j]
			}
			y[r*n+j] = s
		}
	}
	return y
}

// TestSinkTransposes checks transpose sinking on graphs shaped like
// PyTorch's batch-first attention block: Transpose, Linear, an
// elementwise op (h*h, which no MatMul epilogue takes) (which reads and writes through strided views), Linear,
// Transpose back. Where the Transposes only reorder rows, both go (no
// Unary.Copy is left): the first MatMul reads x, the new row order passes
// through the in-place h*h and the second MatMul, and the second Transpose
// is left a plain copy, which the second MatMul's write replaces. Where
// the first moves the last dim, or its result is also a graph output
// (then h*h, written in place, keeps the second from sinking on its own),
// or VRUN_FUSE_OFF names "sink", both stay. (TestFuseAttentionTransformer covers the
// second kind of sinking, where the Attention writes its rows in the
// second Transpose's order.) Every case is checked
// against a float64 reference: within 1e-5 relative to max(|y|, 1) in
// f32. Odd sizes throughout; it runs on the CPU and each GPU backend
// present (which sink only where they take the views: the count is
// checked where the backend runs rt.Attention's kind of strided views,
// that is on every backend with fusion).
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
		{name: "batch_one", shape: []int{1, 5, 7}, perm: []int{1, 0, 2}, f1: 9, f2: 6}, // plain copies
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
			rng := rand.New(rand.NewPCG(uint64(ci), 5))
			rnd := func(n int) ([]float32, []float64) {
				v32, v64 := make([]float32, n), make([]float64, n)
				for i := range v32 {
					v32[i] = float32((0.1 + rng.Float64()) * float64(1-2*rng.IntN(2)))
					v64[i] = float64(v32[i])
				}
				return v32, v64
			}
			inv := make([]int, len(c.perm))
			for i, p := range c.perm {
				inv[p] = i
			}
			x32, x64 := rnd(int(rt.NumElements(c.shape)))
			xt, tshape := permute64(x64, c.shape, c.perm)
			k := tshape[len(tshape)-1]
			rows := len(x64) / k
			w1_32, w1 := rnd(k * c.f1)
			b1_32, b1 := rnd(c.f1)
			w2_32, w2 := rnd(c.f1 * c.f2)
			b2_32, b2 := rnd(c.f2)

			b := model.NewBuilder()
			i64 := func(s []int) []int64 {
				o := make([]int64, len(s))
				for i, v := range s {
					o[i] = int64(v)
				}
				return o
			}
			x := b.Input("x", rt.F32, i64(c.shape)...)
			t1 := b.Op("Transpose", []string{x}, model.Attrs{"perm": i64(c.perm)})
			h := b.Op("Add", []string{b.Op("MatMul", []string{t1, b.Weight("w1", rt.F32, []int64{int64(k), int64(c.f1)}, w1_32)}, nil),
				b.Weight("b1", rt.F32, []int64{int64(c.f1)}, b1_32)}, nil)
			h = b.Op("Mul", []string{h, h}, nil)
			z := b.Op("Add", []string{b.Op("MatMul", []string{h, b.Weight("w2", rt.F32, []int64{int64(c.f1), int64(c.f2)}, w2_32)}, nil),
				b.Weight("b2", rt.F32, []int64{int64(c.f2)}, b2_32)}, nil)
			y := b.Op("Transpose", []string{z}, model.Attrs{"perm": i64(inv)})
			b.Output(y)
			if c.outputMid {
				b.Output(t1)
			}
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}

			hv := linear64(xt, w1, b1, rows, k, c.f1)
			for i := range hv {
				hv[i] *= hv[i]
			}
			zs := append(append([]int(nil), tshape[:len(tshape)-1]...), c.f2)
			want, _ := permute64(linear64(hv, w2, b2, rows, c.f1, c.f2), zs, inv)

			s, err := engine.New(m, dpDevices(t, spec)[0], engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if n := s.Info().OpCounts["Unary.Copy"]; n != c.copies {
				t.Errorf("%d copies, want %d (ops %v)", n, c.copies, s.Info().OpCounts)
			}
			out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": rt.FromFloat32(x32, c.shape...)})
			if err != nil {
				t.Fatal(err)
			}
			got := out[y].Float64s()
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for j := range want {
				if math.Abs(got[j]-want[j]) > 1e-5*math.Max(math.Abs(want[j]), 1) {
					t.Fatalf("y[%d] = %v, want %v", j, got[j], want[j])
				}
			}
			if c.outputMid {
				for j, v := range out[t1].Float64s() {
					if v != xt[j] {
						t.Fatalf("transposed x[%d] = %v, want %v", j, v, xt[j])
					}
				}
			}
		})
	}
}
