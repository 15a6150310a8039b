package engine_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// attnRef is a float64 reference of softmax(scale * q k^T + mask) v for
// [G, L, D] heads (mask [G, Lq, Lk] or nil).
func attnRef(q, k, v, mask []float64, g, lq, lk, d, dv int, scale float64) []float64 {
	y := make([]float64, g*lq*dv)
	s := make([]float64, lk)
	for h := range g {
		for i := range lq {
			mx := math.Inf(-1)
			for j := range lk {
				dot := 0.0
				for e := range d {
					dot += q[(h*lq+i)*d+e] * k[(h*lk+j)*d+e]
				}
				s[j] = dot * scale
				if mask != nil {
					s[j] += mask[(h*lq+i)*lk+j]
				}
				mx = max(mx, s[j])
			}
			sum := 0.0
			for j := range lk {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j := range lk {
				for e := range dv {
					y[(h*lq+i)*dv+e] += s[j] / sum * v[(h*lk+j)*dv+e]
				}
			}
		}
	}
	return y
}

// TestFuseAttention builds the attention patterns that exporters write
// (torch 1.13: Q / sqrt(d) then Q @ transpose(K); torch 2: Q and K^T each
// times d^-1/4; with and without an additive mask that broadcasts over
// heads or queries; 3-D and 4-D heads) at odd sizes (37 keys, head sizes
// 24 and 20), runs them with fusion (the CPU supports rt.Attention) and
// with Options.NoFusion, and checks both against a float64 reference:
// 1e-5 relative to max(|want|, 1) in f32, 1e-12 in f64. It checks that
// the fused plan has an Attention op and no Softmax, and that a pattern
// whose scores are also a graph output is not fused.
func TestFuseAttention(t *testing.T) {
	const bsz, heads, lq, lk = 2, 3, 29, 37
	type tc struct {
		name       string
		d, dv      int
		mask       []int64 // mask shape, or nil
		torch2     bool    // scale Q and K^T by Muls (else Q by a Div)
		rank3      bool    // heads as [B*H, L, D]
		kTrans     bool    // K given as [.., D, Lk] (no Transpose node)
		scoresOut  bool    // the scores are also an output: no fusion
		wantFusion bool
	}
	cases := []tc{
		{name: "torch113", d: 24, dv: 24, wantFusion: true},
		{name: "torch113_mask_keys", d: 24, dv: 20, mask: []int64{bsz, 1, 1, lk}, wantFusion: true},
		{name: "torch2_mask_full", d: 64, dv: 24, mask: []int64{bsz, heads, lq, lk}, torch2: true, wantFusion: true},
		{name: "torch2_mask_2d", d: 24, dv: 24, mask: []int64{lq, lk}, torch2: true, wantFusion: true},
		{name: "rank3", d: 20, dv: 24, rank3: true, torch2: true, wantFusion: true},
		{name: "rank3_ktrans_mask", d: 24, dv: 24, rank3: true, kTrans: true, mask: []int64{1, lq, lk}, wantFusion: true},
		{name: "scores_output", d: 24, dv: 24, scoresOut: true},
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, c := range cases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(11, uint64(c.d*100+c.dv)))
				rnd := func(n int, lo, hi float64) []float64 {
					v := make([]float64, n)
					for i := range v {
						v[i] = lo + (hi-lo)*rng.Float64()
						if rng.IntN(2) == 0 {
							v[i] = -v[i]
						}
					}
					return rt.FromFloat64(dt, v, n).Float64s()
				}
				g := bsz * heads
				qv, kv, vv := rnd(g*lq*c.d, 0.1, 1.5), rnd(g*lk*c.d, 0.1, 1.5), rnd(g*lk*c.dv, 0.1, 1)
				shp := func(l, w int) []int64 {
					if c.rank3 {
						return []int64{int64(g), int64(l), int64(w)}
					}
					return []int64{bsz, heads, int64(l), int64(w)}
				}
				b := model.NewBuilder()
				q := b.Input("q", dt, shp(lq, c.d)...)
				kshape := shp(lk, c.d)
				kdata := kv
				if c.kTrans { // K^T stored: [.., D, Lk]
					kshape = shp(c.d, lk)
					kdata = make([]float64, len(kv))
					for h := range g {
						for j := range lk {
							for e := range c.d {
								kdata[(h*c.d+e)*lk+j] = kv[(h*lk+j)*c.d+e]
							}
						}
					}
				}
				k := b.Input("k", dt, kshape...)
				v := b.Input("v", dt, shp(lk, c.dv)...)
				perm := []int64{0, 1, 3, 2}
				if c.rank3 {
					perm = []int64{0, 2, 1}
				}
				kt := k
				if !c.kTrans {
					kt = b.Op("Transpose", []string{k}, model.Attrs{"perm": perm})
				}
				scale := 1 / math.Sqrt(float64(c.d))
				if c.torch2 {
					f := b.Weight("f", dt, []int64{1}, rt.FromFloat64(dt, []float64{math.Sqrt(scale)}, 1).Data)
					q = b.Op("Mul", []string{q, f}, nil)
					kt = b.Op("Mul", []string{kt, f}, nil)
					scale = math.Pow(rt.FromFloat64(dt, []float64{math.Sqrt(scale)}, 1).Float64s()[0], 2)
				} else {
					sd := rt.FromFloat64(dt, []float64{math.Sqrt(float64(c.d))}, 1)
					q = b.Op("Div", []string{q, b.Weight("sd", dt, []int64{}, sd.Data)}, nil)
					scale = 1 / sd.Float64s()[0]
				}
				s := b.Op("MatMul", []string{q, kt}, nil)
				var maskFull []float64
				if c.mask != nil {
					n := int(rt.NumElements(toInt(c.mask)))
					mv := rnd(n, 0.05, 3)
					s = b.Op("Add", []string{s, b.Weight("mask", dt, c.mask, rt.FromFloat64(dt, mv, n).Data)}, nil)
					maskFull = broadcastTo(mv, toInt(c.mask), []int{bsz, heads, lq, lk})
				}
				sm := b.Op("Softmax", []string{s}, model.Attrs{"axis": int64(-1)})
				y := b.Op("MatMul", []string{sm, v}, nil)
				b.Output(y)
				if c.scoresOut {
					b.Output(s)
				}
				m, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				want := attnRef(qv, kv, vv, maskFull, g, lq, lk, c.d, c.dv, scale)
				feeds := map[string]*rt.Tensor{
					"q": rt.FromFloat64(dt, qv, toInt(shp(lq, c.d))...),
					"k": rt.FromFloat64(dt, kdata, toInt(kshape)...),
					"v": rt.FromFloat64(dt, vv, toInt(shp(lk, c.dv))...),
				}
				tol := 1e-5
				if dt == rt.F64 {
					tol = 1e-12
				}
				var got [2][]float64
				for i, noFusion := range []bool{false, true} {
					sess := session(t, m, engine.Options{NoFusion: noFusion})
					counts := sess.Info().OpCounts
					fused := !noFusion && c.wantFusion
					if fused != (counts["Attention"] == 1) || fused == (counts["Softmax"] == 1) {
						t.Fatalf("NoFusion %v: ops %v", noFusion, counts)
					}
					out, err := sess.Run(context.Background(), feeds)
					if err != nil {
						t.Fatal(err)
					}
					got[i] = out[y].Float64s()
					for j, w := range want {
						if math.Abs(got[i][j]-w) > tol*math.Max(math.Abs(w), 1) {
							t.Fatalf("NoFusion %v: y[%d] = %v, want %v", noFusion, j, got[i][j], w)
						}
					}
				}
				for j := range got[0] {
					if math.Abs(got[0][j]-got[1][j]) > 2*tol*math.Max(math.Abs(got[1][j]), 1) {
						t.Fatalf("y[%d]: fused %v, unfused %v", j, got[0][j], got[1][j])
					}
				}
			})
		}
	}
}

func toInt(s []int64) []int {
	r := make([]int, len(s))
	for i, v := range s {
		r[i] = int(v)
	}
	return r
}

// broadcastTo expands v of shape from (NumPy rules) to shape to.
func broadcastTo(v []float64, from, to []int) []float64 {
	out := make([]float64, rt.NumElements(to))
	pad := len(to) - len(from)
	for i := range out {
		rem, src, mul := i, 0, 1
		for d := len(to) - 1; d >= 0; d-- {
			c := rem % to[d]
			rem /= to[d]
			if fd := d - pad; fd >= 0 {
				if from[fd] != 1 {
					src += c * mul
				}
				mul *= from[fd]
			}
		}
		out[i] = v[src]
	}
	return out
}

// TestFuseAttentionTransformer runs the committed transformer model
// (nn.TransformerEncoder exported by torch 2, two layers) with and without
// fusion: the fused plan has one Attention op per layer and no
// copy (the transposes sink into the MatMuls and the Attention), and
// matches the unfused one within 1e-5 and PyTorch's output within 1e-4 of its largest
// magnitude (the real-model tolerance).
func TestFuseAttentionTransformer(t *testing.T) {
	m, err := onnx.ImportFile("../testdata/models/transformer.onnx", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := npy.ReadFile("../testdata/models/transformer.x.npy")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := npy.ReadFile("../testdata/models/transformer.torch.npy")
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]float64
	for i, noFusion := range []bool{false, true} {
		s := session(t, m, engine.Options{NoFusion: noFusion})
		if n := s.Info().OpCounts["Attention"]; noFusion && n != 0 || !noFusion && n != 2 {
			t.Fatalf("NoFusion %v: %d Attention ops (%v)", noFusion, n, s.Info().OpCounts)
		}
		// The [B, L, E] ↔ [L, B, E] Transposes around each attention
		// block sink into its MatMuls and Attention (sinkTransposes).
		if n := s.Info().OpCounts["Unary.Copy"]; !noFusion && n != 0 {
			t.Fatalf("NoFusion %v: %d copies (%v)", noFusion, n, s.Info().OpCounts)
		}
		out, err := s.Run(context.Background(), map[string]*rt.Tensor{m.Tensors[m.Inputs()[0]].Name: x})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = out[m.Tensors[m.Outputs()[0]].Name].Float64s()
	}
	want := ref.Float64s()
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for j, w := range want {
		if math.Abs(got[0][j]-w) > 1e-4*scale {
			t.Fatalf("fused y[%d] = %v, PyTorch %v", j, got[0][j], w)
		}
		if math.Abs(got[0][j]-got[1][j]) > 1e-5*scale {
			t.Fatalf("y[%d]: fused %v, unfused %v", j, got[0][j], got[1][j])
		}
	}
}

// TestONNXAttentionFused checks that ONNX Attention nodes that need
// nothing beyond rt.Attention (3-D and 4-D heads, an additive mask,
// causal with as many queries as keys) lower to one rt.Attention op on a
// device that has it, that those that do (a bool mask, a softcap) keep
// the decomposition, and that fused and NoFusion runs agree within 1e-5
// (f32; the conformance table checks the values against NumPy).
func TestONNXAttentionFused(t *testing.T) {
	const lq, lk = 29, 37
	cases := []struct {
		name  string
		r3    bool
		mask  rt.DType // 0: none
		attrs model.Attrs
		fused bool
	}{
		{"4d", false, 0, nil, true},
		{"4d_mask", false, rt.F32, nil, true},
		{"3d_mask", true, rt.F32, model.Attrs{"q_num_heads": int64(3), "kv_num_heads": int64(3)}, true},
		{"4d_causal", false, 0, model.Attrs{"is_causal": int64(1)}, false}, // lq != lk: ONNX's offset differs
		{"4d_bool_mask", false, rt.Bool, nil, false},
		{"4d_softcap", false, 0, model.Attrs{"softcap": 2.0}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shape := func(l, d int) []int64 {
				if c.r3 {
					return []int64{2, int64(l), int64(3 * d)}
				}
				return []int64{2, 3, int64(l), int64(d)}
			}
			b := model.NewBuilder()
			ins := []string{b.Input("q", rt.F32, shape(lq, 24)...), b.Input("k", rt.F32, shape(lk, 24)...), b.Input("v", rt.F32, shape(lk, 20)...)}
			feeds := map[string]*rt.Tensor{"q": randT(shape(lq, 24)), "k": randT(shape(lk, 24)), "v": randT(shape(lk, 20))}
			switch c.mask {
			case rt.F32:
				ins = append(ins, b.Input("m", rt.F32, lq, lk))
				feeds["m"] = randT([]int64{lq, lk})
			case rt.Bool:
				ins = append(ins, b.Input("m", rt.Bool, lq, lk))
				mt, _ := rt.NewTensor(rt.Bool, lq, lk)
				for i := range mt.Data {
					mt.Data[i] = byte(i % 3 % 2)
				}
				feeds["m"] = mt
			}
			y := b.Op("Attention", ins, c.attrs)
			b.Output(y)
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			var got [2][]float64
			for i, noFusion := range []bool{false, true} {
				s := session(t, m, engine.Options{NoFusion: noFusion})
				if n := s.Info().OpCounts["Attention"]; (n == 1) != (c.fused && !noFusion) {
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

// randT is a random f32 tensor of the given shape with values in
// ±[0.1, 1.5).
func randT(shape []int64) *rt.Tensor {
	rng := rand.New(rand.NewPCG(uint64(len(shape)), uint64(rt.NumElements(toInt(shape)))))
	v := make([]float32, rt.NumElements(toInt(shape)))
	for i := range v {
		v[i] = float32((0.1 + 1.4*rng.Float64()) * float64(1-2*rng.IntN(2)))
	}
	return rt.FromFloat32(v, toInt(shape)...)
}
