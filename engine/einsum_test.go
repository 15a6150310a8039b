package engine_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

func TestEinsum(t *testing.T) {
	cases := []struct {
		eq     string
		ref    string // letters-only equivalent for refEinsum; "" = eq
		shapes [][]int
	}{
		{eq: "ij,jk->ik", shapes: [][]int{{3, 4}, {4, 5}}},
		{eq: "ij,jk", ref: "ij,jk->ik", shapes: [][]int{{3, 4}, {4, 5}}},
		{eq: "bij, bjk -> bik", shapes: [][]int{{2, 3, 4}, {2, 4, 5}}},
		{eq: "ij,kj->ik", shapes: [][]int{{3, 4}, {5, 4}}},
		{eq: "ji,jk->ik", shapes: [][]int{{4, 3}, {4, 5}}},
		{eq: "bhqd,bhkd->bhqk", shapes: [][]int{{2, 3, 4, 5}, {2, 3, 6, 5}}},
		{eq: "bhqk,bkhd->bqhd", shapes: [][]int{{2, 3, 4, 6}, {2, 6, 3, 5}}},
		{eq: "ij->ji", shapes: [][]int{{3, 4}}},
		{eq: "ij->i", shapes: [][]int{{3, 4}}},
		{eq: "ij->j", shapes: [][]int{{3, 4}}},
		{eq: "ijk->", shapes: [][]int{{2, 3, 4}}},
		{eq: "ijk->ki", shapes: [][]int{{2, 3, 4}}},
		{eq: "i,j->ij", shapes: [][]int{{3}, {4}}},
		{eq: "i,i->", shapes: [][]int{{5}, {5}}},
		{eq: "i,i", ref: "i,i->", shapes: [][]int{{5}, {5}}},
		{eq: "ij,ij->ij", shapes: [][]int{{3, 4}, {3, 4}}},
		{eq: "ij,ij->", shapes: [][]int{{3, 4}, {3, 4}}},
		{eq: "ba,ab->", shapes: [][]int{{3, 4}, {4, 3}}},
		{eq: "ijk,jil->kl", shapes: [][]int{{2, 3, 4}, {3, 2, 5}}},
		{eq: "ij,jk,kl->il", shapes: [][]int{{2, 3}, {3, 4}, {4, 5}}},
		{eq: "ij,jk,kl", ref: "ij,jk,kl->il", shapes: [][]int{{2, 3}, {3, 4}, {4, 5}}},
		{eq: "i,ij,j->", shapes: [][]int{{3}, {3, 4}, {4}}},
		{eq: "ii->i", shapes: [][]int{{4, 4}}},
		{eq: "ii", ref: "ii->", shapes: [][]int{{4, 4}}},
		{eq: "...ii->...i", ref: "bii->bi", shapes: [][]int{{3, 4, 4}}},
		{eq: "...ij,...jk->...ik", ref: "abij,bjk->abik", shapes: [][]int{{2, 1, 3, 4}, {5, 4, 6}}},
		{eq: "...ij,jk", ref: "aij,jk->aik", shapes: [][]int{{2, 3, 4}, {4, 5}}},
		{eq: "b...,b...->b", ref: "bxy,bxy->b", shapes: [][]int{{2, 3, 4}, {2, 3, 4}}},
		{eq: "ij->", shapes: [][]int{{0, 3}}},
		{eq: "->", shapes: [][]int{{}}},
	}
	for _, tc := range cases {
		t.Run(tc.eq, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(len(tc.eq))))
			b := model.NewBuilder()
			var ins []string
			feeds := map[string]*rt.Tensor{}
			var xs []*rt.Tensor
			for i, s := range tc.shapes {
				x := randTensor(rng, s...)
				name := fmt.Sprintf("x%d", i)
				ins = append(ins, b.Input(name, rt.F32, toI64(s)...))
				feeds[name] = x
				xs = append(xs, x)
			}
			y := b.Op("Einsum", ins, model.Attrs{"equation": tc.eq})
			b.Output(y)
			m, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			s := session(t, m, engine.Options{})
			out, err := s.Run(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			ref := tc.ref
			if ref == "" {
				ref = tc.eq
			}
			wantShape, want := refEinsum(strings.ReplaceAll(ref, " ", ""), xs)
			if !slices.Equal(out[y].Shape, wantShape) {
				t.Fatalf("shape %v, want %v", out[y].Shape, wantShape)
			}
			got := out[y].Float64s()
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-5*(1+math.Abs(want[i])) {
					t.Fatalf("element %d = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

// refEinsum evaluates an explicit letters-only einsum by looping over every
// label; a size-1 dim broadcasts against its label's size.
func refEinsum(eq string, xs []*rt.Tensor) ([]int, []float64) {
	lhs, out, _ := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	size := map[byte]int{}
	var labels []byte
	for i, term := range terms {
		for k := range len(term) {
			l := term[k]
			size[l] = max(size[l], xs[i].Shape[k])
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
	}
	oshape := make([]int, len(out))
	for k := range len(out) {
		oshape[k] = size[out[k]]
	}
	res := make([]float64, rt.NumElements(oshape))
	idx := map[byte]int{}
	var loop func(n int)
	loop = func(n int) {
		if n == len(labels) {
			p := 1.0
			for i, term := range terms {
				off, st := 0, 1
				for k := len(term) - 1; k >= 0; k-- {
					d := xs[i].Shape[k]
					off += min(idx[term[k]], d-1) * st
					st *= d
				}
				p *= xs[i].Float64(off)
			}
			o, st := 0, 1
			for k := len(out) - 1; k >= 0; k-- {
				o += idx[out[k]] * st
				st *= oshape[k]
			}
			res[o] += p
			return
		}
		for v := range size[labels[n]] {
			idx[labels[n]] = v
			loop(n + 1)
		}
	}
	loop(0)
	return oshape, res
}
