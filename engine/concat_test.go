package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// refGraph builds a model and computes its values in float64 alongside,
// as an independent reference (naive loops).
type refGraph struct {
	b     *model.Builder
	rng   *rand.Rand
	vals  map[string]*refVal
	feeds map[string]*rt.Tensor
	n     int
}

type refVal struct {
	shape []int
	d     []float64
}

func newRefGraph(seed uint64) *refGraph {
	return &refGraph{b: model.NewBuilder(), rng: rand.New(rand.NewPCG(seed, 7)), vals: map[string]*refVal{}, feeds: map[string]*rt.Tensor{}}
}

// random returns n values in ±[0.1, 1.1), exact in f32.
func (g *refGraph) random(n int) ([]float32, []float64) {
	f := make([]float32, n)
	d := make([]float64, n)
	for i := range f {
		f[i] = float32((0.1 + g.rng.Float64()) * float64(1-2*g.rng.IntN(2)))
		d[i] = float64(f[i])
	}
	return f, d
}

func (g *refGraph) input(shape ...int) string {
	g.n++
	s := make([]int64, len(shape))
	for i, v := range shape {
		s[i] = int64(v)
	}
	name := g.b.Input(fmt.Sprintf("x%d", g.n), rt.F32, s...)
	f, d := g.random(int(rt.NumElements(shape)))
	g.feeds[name] = rt.FromFloat32(f, shape...)
	g.vals[name] = &refVal{shape, d}
	return name
}

func (g *refGraph) weight(shape ...int) (string, []float64) {
	g.n++
	s := make([]int64, len(shape))
	for i, v := range shape {
		s[i] = int64(v)
	}
	f, d := g.random(int(rt.NumElements(shape)))
	for i := range f { // smaller weights: sums stay near 1
		f[i] /= 4
		d[i] = float64(f[i])
	}
	return g.b.Weight(fmt.Sprintf("w%d", g.n), rt.F32, s, f), d
}

// conv is a Conv of k output channels with a kxk kernel, "same" padding,
// stride 1, and a bias.
func (g *refGraph) conv(x string, k, kk int) string {
	xv := g.vals[x]
	n, c, h, w := xv.shape[0], xv.shape[1], xv.shape[2], xv.shape[3]
	wn, wd := g.weight(k, c, kk, kk)
	bn, bd := g.weight(k)
	pad := kk / 2
	y := g.b.Op("Conv", []string{x, wn, bn}, model.Attrs{"pads": []int64{int64(pad), int64(pad), int64(pad), int64(pad)}})
	out := make([]float64, n*k*h*w)
	for b := 0; b < n; b++ {
		for o := 0; o < k; o++ {
			for i := 0; i < h; i++ {
				for j := 0; j < w; j++ {
					s := bd[o]
					for ci := 0; ci < c; ci++ {
						for u := 0; u < kk; u++ {
							for v := 0; v < kk; v++ {
								ii, jj := i+u-pad, j+v-pad
								if ii >= 0 && ii < h && jj >= 0 && jj < w {
									s += xv.d[((b*c+ci)*h+ii)*w+jj] * wd[((o*c+ci)*kk+u)*kk+v]
								}
							}
						}
					}
					out[((b*k+o)*h+i)*w+j] = s
				}
			}
		}
	}
	g.vals[y] = &refVal{[]int{n, k, h, w}, out}
	return y
}

// matmul multiplies x [m, kd] by a weight [kd, n].
func (g *refGraph) matmul(x string, n int) string {
	xv := g.vals[x]
	m, kd := xv.shape[0], xv.shape[1]
	wn, wd := g.weight(kd, n)
	y := g.b.Op("MatMul", []string{x, wn}, nil)
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < kd; l++ {
				out[i*n+j] += xv.d[i*kd+l] * wd[l*n+j]
			}
		}
	}
	g.vals[y] = &refVal{[]int{m, n}, out}
	return y
}

func (g *refGraph) unary(op, x string) string {
	xv := g.vals[x]
	y := g.b.Op(op, []string{x}, nil)
	out := make([]float64, len(xv.d))
	for i, v := range xv.d {
		switch op {
		case "Relu":
			out[i] = math.Max(v, 0)
		case "Sigmoid":
			out[i] = 1 / (1 + math.Exp(-v))
		default:
			panic(op)
		}
	}
	g.vals[y] = &refVal{xv.shape, out}
	return y
}

// binary applies Add or Mul to two tensors of one shape.
func (g *refGraph) binary(op, a, b string) string {
	av, bv := g.vals[a], g.vals[b]
	y := g.b.Op(op, []string{a, b}, nil)
	out := make([]float64, len(av.d))
	for i := range out {
		if op == "Add" {
			out[i] = av.d[i] + bv.d[i]
		} else {
			out[i] = av.d[i] * bv.d[i]
		}
	}
	g.vals[y] = &refVal{av.shape, out}
	return y
}

func (g *refGraph) concat(axis int, xs ...string) string {
	y := g.b.Op("Concat", xs, model.Attrs{"axis": int64(axis)})
	shape := append([]int{}, g.vals[xs[0]].shape...)
	shape[axis] = 0
	for _, x := range xs {
		shape[axis] += g.vals[x].shape[axis]
	}
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	var out []float64
	for o := 0; o < outer; o++ {
		for _, x := range xs {
			row := g.vals[x].shape[axis] * inner
			out = append(out, g.vals[x].d[o*row:(o+1)*row]...)
		}
	}
	g.vals[y] = &refVal{shape, out}
	return y
}

// TestConcatElision checks that Concat inputs are computed in place in
// the Concat output where that is safe (the copies the plan keeps, with
// the default 16-byte alignment of the parts and with any 4-byte
// alignment), and that the outputs match a float64 reference within 1e-4
// of max(|want|, 1) (f32) and the runs with VRUN_CONCAT_ELIDE=0 within
// 1e-6. The graphs: Concats of Conv, MatMul and elementwise results at
// batch 1 (computed in place) and batch 2 (copied), with ReLU fused into
// the Convs, along axis 0 and a later axis, with 3 parts of odd sizes,
// nested, with a part read after the Concat (in place or not), a part
// that is a graph output, the same tensor twice, and an output written in
// place after the Concat.
func TestConcatElision(t *testing.T) {
	forEachBackend(t, testConcatElision)
}

func testConcatElision(t *testing.T, spec string) {
	cases := []struct {
		name  string
		build func(g *refGraph) []string // the outputs
		// Copies left: with 16-byte aligned parts (the default), with
		// 4-byte aligned ones, and without elision.
		copies16, copies4, copiesOff int
	}{
		{"conv_b1_odd", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.conv(x, 5, 1), g.conv(x, 6, 3))} // the second at byte 700
		}, 1, 0, 2},
		{"conv_b1", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.conv(x, 4, 3))}
		}, 0, 0, 2},
		{"conv_b2", func(g *refGraph) []string {
			x := g.input(2, 3, 5, 7)
			return []string{g.concat(1, g.conv(x, 8, 1), g.conv(x, 4, 3))}
		}, 2, 2, 2},
		{"conv_relu_b1", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(1, g.unary("Relu", g.conv(x, 8, 1)), g.unary("Relu", g.conv(x, 4, 3)))}
		}, 0, 0, 2},
		{"conv_3parts_odd", func(g *refGraph) []string {
			x := g.input(1, 2, 5, 7)
			return []string{g.concat(1, g.conv(x, 1, 1), g.conv(x, 2, 3), g.unary("Relu", g.conv(x, 3, 1)))}
		}, 2, 0, 3},
		{"conv_axis0", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			return []string{g.concat(0, g.conv(x, 8, 1), g.conv(x, 8, 3))}
		}, 0, 0, 2},
		{"matmul_axis0", func(g *refGraph) []string {
			a, b, c := g.input(3, 6), g.input(4, 6), g.input(2, 6)
			return []string{g.concat(0, g.matmul(a, 5), g.matmul(b, 5), g.matmul(c, 5))} // at bytes 0, 60, 140
		}, 2, 0, 3},
		{"matmul_axis1", func(g *refGraph) []string {
			x := g.input(3, 6)
			return []string{g.concat(1, g.matmul(x, 5), g.matmul(x, 7))}
		}, 2, 2, 2},
		{"matmul_axis1_b1", func(g *refGraph) []string {
			x := g.input(1, 6)
			return []string{g.concat(1, g.matmul(x, 8), g.matmul(x, 7), g.matmul(x, 4))} // at bytes 0, 32, 60
		}, 1, 0, 3},
		{"elementwise", func(g *refGraph) []string {
			x, y, z := g.input(1, 4, 3, 5), g.input(1, 4, 3, 5), g.input(1, 2, 3, 5)
			return []string{g.concat(1, g.binary("Add", x, y), g.binary("Mul", x, y), g.unary("Sigmoid", z))}
		}, 0, 0, 3},
		{"elementwise_b2", func(g *refGraph) []string {
			x, y := g.input(2, 4, 3, 5), g.input(2, 4, 3, 5)
			return []string{g.concat(1, g.binary("Add", x, y), g.unary("Sigmoid", y))}
		}, 2, 2, 2},
		{"later_axis", func(g *refGraph) []string {
			x, y := g.input(1, 1, 6, 5), g.input(1, 1, 3, 5)
			return []string{g.concat(2, g.unary("Relu", x), g.unary("Sigmoid", y))} // the second at byte 120
		}, 1, 0, 2},
		{"nested", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			inner := g.concat(1, g.conv(x, 4, 1), g.conv(x, 4, 3))
			return []string{g.concat(1, g.conv(x, 8, 1), inner, g.unary("Relu", g.conv(x, 4, 3)))}
		}, 0, 0, 5},
		{"part_read_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 4, 3)), g.conv(a, 3, 3)}
		}, 0, 0, 2},
		{"part_read_before", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(a, 4, 3))}
		}, 0, 0, 2},
		{"part_relu_in_place_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			y := g.concat(1, a, g.conv(x, 4, 3))
			return []string{y, g.conv(g.unary("Relu", a), 3, 1)} // the Relu writes a in place
		}, 1, 1, 2},
		{"output_written_after", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			y := g.concat(1, a, g.conv(x, 4, 3))
			return []string{g.unary("Relu", y), g.conv(a, 3, 1)} // a is read after the Relu wrote y
		}, 1, 1, 2},
		{"part_is_output", func(g *refGraph) []string {
			x := g.input(1, 3, 5, 7)
			a := g.conv(x, 8, 1)
			return []string{g.concat(1, a, g.conv(x, 4, 3)), a}
		}, 1, 1, 2},
		{"input_part", func(g *refGraph) []string {
			x := g.input(1, 4, 5, 4)
			return []string{g.concat(1, x, g.conv(x, 4, 3))}
		}, 1, 1, 2},
		{"same_twice", func(g *refGraph) []string {
			x := g.input(1, 4, 5, 4)
			r := g.unary("Relu", x)
			return []string{g.concat(1, r, r)}
		}, 1, 1, 2},
	}
	dev := dpDevices(t, spec)[0]
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			g := newRefGraph(uint64(len(cs.name)))
			outs := cs.build(g)
			g.b.Output(outs...)
			m, err := g.b.Build()
			if err != nil {
				t.Fatal(err)
			}
			var base map[string]*rt.Tensor
			var offOps map[string]int
			for _, run := range []struct {
				name   string
				elide  string
				align  int64
				copies int
			}{
				{"off", "0", 16, cs.copiesOff},
				{"align16", "1", 16, cs.copies16},
				{"align4", "1", 4, cs.copies4},
			} {
				t.Setenv("VRUN_CONCAT_ELIDE", run.elide)
				old := engine.SetConcatAlign(run.align)
				s, err := engine.New(m, dev, engine.Options{})
				engine.SetConcatAlign(old)
				if err != nil {
					t.Fatal(err)
				}
				info := s.Info()
				if got := info.OpCounts["Unary.Copy"]; got != run.copies {
					t.Errorf("%s: %d copies, want %d (ops %v)", run.name, got, run.copies, info.OpCounts)
				}
				// Only copies go: the other ops (ReLUs fused into the
				// Convs or not) are those of the plan without elision.
				if offOps == nil {
					offOps = info.OpCounts
				}
				for op, n := range offOps {
					if op != "Unary.Copy" && info.OpCounts[op] != n {
						t.Errorf("%s: ops %v, without elision %v", run.name, info.OpCounts, offOps)
						break
					}
				}
				res, err := s.Run(context.Background(), g.feeds)
				s.Close()
				if err != nil {
					t.Fatalf("%s: %v", run.name, err)
				}
				for _, o := range outs {
					got, want := res[o].Float64s(), g.vals[o].d
					if len(got) != len(want) {
						t.Fatalf("%s: %s has %d values, want %d", run.name, o, len(got), len(want))
					}
					for i := range want {
						if d := math.Abs(got[i] - want[i]); !(d <= 1e-4*math.Max(math.Abs(want[i]), 1)) {
							t.Fatalf("%s: %s[%d] = %v, want %v (float64)", run.name, o, i, got[i], want[i])
						}
					}
					if base == nil {
						continue
					}
					b := base[o].Float64s()
					for i := range b {
						if d := math.Abs(got[i] - b[i]); !(d <= 1e-6*math.Max(math.Abs(b[i]), 1)) {
							t.Fatalf("%s: %s[%d] = %v, without elision %v", run.name, o, i, got[i], b[i])
						}
					}
				}
				if base == nil {
					base = res
				}
			}
		})
	}
}
