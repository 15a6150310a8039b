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

// matW is the weight of TestFuseElementwise's MatMul case (all exact in f32).
var matW = []float64{
	0.5, -0.25, 0.125, 1, -1, 0.375, 0.25, -0.125, 0.75, 0.0625, -0.625, 0.5, 0.875, -0.375, 0.25,
	0.125, 0.125, -0.75, 0.25, 0.625, -0.25, 0.375, 0.5, -0.5, 0.1875}

// TestFuseElementwise runs graphs of elementwise chains (odd shapes,
// broadcast operands, intermediates that other nodes or the graph's
// outputs read, a MatMul in front) with plan-time fusion (the CPU merges
// adjacent ops into rt.Fused) and with Options.NoFusion, and checks both
// against a float64 reference computed here: 1e-5 relative to max(|want|, 1)
// for f32, 1e-12 for f64. Fused and unfused runs then agree within twice
// that. It also checks that fusion happened where it may, and kept the
// intermediates that something else reads. (The size threshold is lowered
// to 1 for these small shapes.)
func TestFuseElementwise(t *testing.T) {
	defer engine.SetFuseMinElements(engine.SetFuseMinElements(1))
	type vals = map[string][]float64
	shape := []int{3, 7, 5}
	n := 3 * 7 * 5
	// bcast reads a broadcast operand: b has shape [7, 1] (per row of 7)
	// and c shape [5] (per column).
	bAt := func(v []float64, i int) float64 { return v[(i/5)%7] }
	cAt := func(v []float64, i int) float64 { return v[i%5] }
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	cases := []struct {
		name     string
		build    func(b *model.Builder, dt rt.DType, x, y, bb, cc string) []string // outputs
		ref      func(x, y, bb, cc []float64) vals
		minFused int // rt.Fused ops at least, fused
	}{
		{"chain",
			func(b *model.Builder, dt rt.DType, x, y, bb, cc string) []string {
				h := b.Op("Add", []string{x, bb}, nil)
				h = b.Op("Relu", []string{h}, nil)
				h = b.Op("Mul", []string{h, y}, nil)
				h = b.Op("Sub", []string{cc, h}, nil)
				h = b.Op("Tanh", []string{h}, nil)
				return []string{b.Op("Div", []string{h, b.Op("Add", []string{b.Op("Abs", []string{y}, nil), bb}, nil)}, nil)}
			},
			func(x, y, bb, cc []float64) vals {
				out := make([]float64, n)
				for i := range out {
					h := math.Max(x[i]+bAt(bb, i), 0) * y[i]
					h = math.Tanh(cAt(cc, i) - h)
					out[i] = h / (math.Abs(y[i]) + bAt(bb, i))
				}
				return vals{"o0": out}
			}, 1},
		{"shared_intermediate",
			func(b *model.Builder, dt rt.DType, x, y, bb, cc string) []string {
				t := b.Op("Add", []string{x, cc}, nil)
				u := b.Op("Sigmoid", []string{t}, nil)
				return []string{b.Op("Mul", []string{t, u}, nil)}
			},
			func(x, y, bb, cc []float64) vals {
				out := make([]float64, n)
				for i := range out {
					t := x[i] + cAt(cc, i)
					out[i] = t * sig(t)
				}
				return vals{"o0": out}
			}, 1},
		{"intermediate_output",
			func(b *model.Builder, dt rt.DType, x, y, bb, cc string) []string {
				t := b.Op("Sigmoid", []string{x}, nil)
				u := b.Op("Neg", []string{t}, nil)
				return []string{t, b.Op("Mul", []string{u, y}, nil)}
			},
			func(x, y, bb, cc []float64) vals {
				o0, o1 := make([]float64, n), make([]float64, n)
				for i := range o0 {
					o0[i] = sig(x[i])
					o1[i] = -o0[i] * y[i]
				}
				return vals{"o0": o0, "o1": o1}
			}, 1},
		{"matmul_then_chain",
			func(b *model.Builder, dt rt.DType, x, y, bb, cc string) []string {
				w := b.Weight("w", dt, []int64{5, 5}, rt.FromFloat64(dt, matW, 5, 5).Data)
				h := b.Op("MatMul", []string{x, w}, nil)
				h = b.Op("Add", []string{h, cc}, nil)
				h = b.Op("Erf", []string{h}, nil)
				h = b.Op("Mul", []string{h, bb}, nil)
				return []string{b.Op("Max", []string{h, y}, nil)}
			},
			func(x, y, bb, cc []float64) vals {
				w := matW
				out := make([]float64, n)
				for i := range out {
					r, j := i/5, i%5
					s := 0.0
					for k := range 5 {
						s += x[r*5+k] * w[k*5+j]
					}
					out[i] = math.Max(math.Erf(s+cAt(cc, i))*bAt(bb, i), y[i])
				}
				return vals{"o0": out}
			}, 1},
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64} {
		for _, tc := range cases {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(len(tc.name))))
				rnd := func(k int) []float64 {
					v := make([]float64, k)
					for i := range v {
						v[i] = rng.Float64()*4 - 2
					}
					return rt.FromFloat64(dt, v, k).Float64s() // as stored
				}
				xv, yv, bv, cv := rnd(n), rnd(n), rnd(7), rnd(5)
				b := model.NewBuilder()
				x := b.Input("x", dt, 3, 7, 5)
				y := b.Input("y", dt, 3, 7, 5)
				bb := b.Weight("b", dt, []int64{7, 1}, rt.FromFloat64(dt, bv, 7).Data)
				cc := b.Weight("c", dt, []int64{5}, rt.FromFloat64(dt, cv, 5).Data)
				outs := tc.build(b, dt, x, y, bb, cc)
				names := map[string]string{}
				for k, o := range outs {
					b.Output(o)
					names["o"+string(rune('0'+k))] = o
				}
				m, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				feeds := map[string]*rt.Tensor{"x": rt.FromFloat64(dt, xv, shape...), "y": rt.FromFloat64(dt, yv, shape...)}
				want := tc.ref(xv, yv, bv, cv)
				tol := 1e-5
				if dt == rt.F64 {
					tol = 1e-12
				}
				var got [2]map[string]*rt.Tensor
				for k, noFusion := range []bool{false, true} {
					s := session(t, m, engine.Options{NoFusion: noFusion})
					fused := s.Info().OpCounts["Fused"]
					if noFusion && fused != 0 || !noFusion && fused < tc.minFused {
						t.Fatalf("NoFusion %v: %d Fused ops (%v)", noFusion, fused, s.Info().OpCounts)
					}
					if got[k], err = s.Run(context.Background(), feeds); err != nil {
						t.Fatal(err)
					}
					for key, w := range want {
						g := got[k][names[key]].Float64s()
						for i := range w {
							if math.Abs(g[i]-w[i]) > tol*math.Max(math.Abs(w[i]), 1) {
								t.Fatalf("NoFusion %v: %s[%d] = %v, want %v", noFusion, key, i, g[i], w[i])
							}
						}
					}
				}
				for key := range want {
					f, u := got[0][names[key]].Float64s(), got[1][names[key]].Float64s()
					for i := range f {
						if math.Abs(f[i]-u[i]) > 2*tol*math.Max(math.Abs(u[i]), 1) {
							t.Fatalf("%s[%d]: fused %v, unfused %v", key, i, f[i], u[i])
						}
					}
				}
			})
		}
	}
}
