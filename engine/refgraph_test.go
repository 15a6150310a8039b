package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/backendtest"
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

// matmul multiplies x [.., m, kd] (its rows) by a weight [kd, n].
func (g *refGraph) matmul(x string, n int) string {
	xv := g.vals[x]
	r := len(xv.shape)
	kd := xv.shape[r-1]
	m := len(xv.d) / kd
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
	g.vals[y] = &refVal{append(append([]int{}, xv.shape[:r-1]...), n), out}
	return y
}

// bias adds a weight [n] to every row of x [.., n]. With folded, the
// weight is multiplied by a constant 1 in the graph, an op that constant
// folding runs at plan time (so the plan's fold device is open).
func (g *refGraph) bias(x string, folded bool) string {
	xv := g.vals[x]
	n := xv.shape[len(xv.shape)-1]
	bn, bd := g.weight(n)
	if folded {
		g.n++
		one := g.b.Weight(fmt.Sprintf("w%d", g.n), rt.F32, nil, []float32{1})
		bn = g.b.Op("Mul", []string{bn, one}, nil)
	}
	y := g.b.Op("Add", []string{x, bn}, nil)
	out := make([]float64, len(xv.d))
	for i, v := range xv.d {
		out[i] = v + bd[i%n]
	}
	g.vals[y] = &refVal{xv.shape, out}
	return y
}

// transpose is an ONNX Transpose of x by perm.
func (g *refGraph) transpose(x string, perm ...int) string {
	xv := g.vals[x]
	p := make([]int64, len(perm))
	shape := make([]int, len(perm))
	for i, v := range perm {
		p[i], shape[i] = int64(v), xv.shape[v]
	}
	y := g.b.Op("Transpose", []string{x}, model.Attrs{"perm": p})
	src := rt.ContiguousStrides(xv.shape)
	st := make([]int, len(perm)) // x's strides, in y's dim order
	for i, v := range perm {
		st[i] = src[v]
	}
	out := make([]float64, 0, len(xv.d))
	backendtest.ForEach(shape, func(idx []int) { out = append(out, xv.d[backendtest.Offset(idx, st)]) })
	g.vals[y] = &refVal{shape, out}
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
		case "Sin":
			out[i] = math.Sin(v)
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

// session builds the graph with outs as its outputs and plans it on the
// device of spec (closed at the end of the test).
func (g *refGraph) session(t *testing.T, spec string, outs ...string) *engine.Session {
	t.Helper()
	g.b.Output(outs...)
	m, err := g.b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, err := engine.New(m, dpDevices(t, spec)[0], engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// check runs s on the graph's inputs and compares the named outputs with
// the reference: within tol relative to max(|want|, 1).
func (g *refGraph) check(t *testing.T, s *engine.Session, tol float64, names ...string) {
	t.Helper()
	out, err := s.Run(context.Background(), g.feeds)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		got, want := out[name].Float64s(), g.vals[name].d
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
		}
		for j := range want {
			if math.Abs(got[j]-want[j]) > tol*math.Max(math.Abs(want[j]), 1) {
				t.Fatalf("%s[%d] = %v, want %v", name, j, got[j], want[j])
			}
		}
	}
}
