package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/internal/indexconf"
	"github.com/vrun-go/vrun/rt"
)

func TestGatherElements(t *testing.T) {
	e := newEnv(t)
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.I64, rt.U8} {
		for _, tc := range []struct {
			name    string
			x       []float64 // [2, 3, 2]
			idx     []float64
			ishape  []int
			strides []int
			want    []float64
		}{
			// Y[o,j,i] = X[o, idx, i] with X[o,a,i] = 10*o + 2*a + i.
			{"per element", seq(12), []float64{2, 0, -1, 1}, []int{2, 1, 2}, nil, []float64{4, 1, 14, 13}},
			{"broadcast index over i", seq(12), []float64{1, 2}, []int{2, 1, 2}, []int{1, 0, 0}, []float64{2, 3, 14, 15}},
			{"out of range gives zero", seq(12), []float64{3, 0, 0, 0}, []int{2, 1, 2}, nil, []float64{0, 1, 10, 11}},
		} {
			x := e.region(dt, 12, tc.x)
			idx := e.region(rt.I64, len(tc.idx), tc.idx)
			y := e.region(dt, 4, nil)
			// AllowOutOfRange: these cases check the zero of an index out
			// of range; that it fails a run is TestIndexOutOfRange's.
			e.run(&rt.GatherElements{X: x.ref(2, 3, 2), Idx: idx.view(0, tc.ishape, tc.strides), Y: y.ref(2, 1, 2), Outer: 2, Axis: 3, N: 1, Inner: 2,
				AllowOutOfRange: true})
			if got := e.values(y); !slices.Equal(got, stored(dt, tc.want)) {
				t.Errorf("%s %s: got %v, want %v", dt, tc.name, got, tc.want)
			}
		}
	}
}

// seq returns n values laid out as [2, 3, 2] with X[o,a,i] = 10*o + 2*a + i,
// so that values identify positions.
func seq(n int) []float64 {
	v := make([]float64, n)
	for k := range v {
		o, a, i := k/6, (k/2)%3, k%2
		v[k] = float64(10*o + 2*a + i)
	}
	return v
}

func TestScatterElements(t *testing.T) {
	e := newEnv(t)
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.I32} {
		for _, tc := range []struct {
			fn   rt.ScatterFn
			idx  []float64 // [1, 3, 1] into axis 4
			want []float64
		}{
			{rt.ScatterSet, []float64{0, 2, 0}, []float64{3, 1, 2, 1}}, // last duplicate wins
			{rt.ScatterAdd, []float64{0, -1, 0}, []float64{5, 1, 1, 3}},
			{rt.ScatterMul, []float64{1, 1, 3}, []float64{1, 2, 1, 3}},
			{rt.ScatterMax, []float64{0, 0, 0}, []float64{3, 1, 1, 1}},
			{rt.ScatterMin, []float64{2, 2, 9}, []float64{1, 1, 1, 1}}, // 9 is skipped
		} {
			y := e.region(dt, 4, []float64{1, 1, 1, 1})
			idx := e.region(rt.I32, 3, tc.idx)
			upd := e.region(dt, 3, []float64{1, 2, 3})
			e.run(&rt.ScatterElements{Fn: tc.fn, Y: y.ref(1, 4, 1), Idx: idx.ref(1, 3, 1), Upd: upd.ref(1, 3, 1), Outer: 1, Axis: 4, N: 3, Inner: 1,
				AllowOutOfRange: true}) // the skip of 9; TestIndexOutOfRange checks the error
			if got := e.values(y); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: got %v, want %v", dt, tc.fn, got, tc.want)
			}
		}
	}
}

func TestTopK(t *testing.T) {
	e := newEnv(t)
	nan := math.NaN()
	for _, tc := range []struct {
		x           []float64 // [1, 5, 1]
		k           int
		largest     bool
		vals, index []float64
	}{
		{[]float64{3, 1, 4, 1, 5}, 3, true, []float64{5, 4, 3}, []float64{4, 2, 0}},
		{[]float64{3, 1, 4, 1, 5}, 2, false, []float64{1, 1}, []float64{1, 3}}, // ties: lower index first
		{[]float64{3, nan, 4, 1, 5}, 2, true, []float64{nan, 5}, []float64{1, 4}},
		// k = 1 takes a linear scan: the same first element as the sort.
		{[]float64{3, 5, 4, 5, 1}, 1, true, []float64{5}, []float64{1}},
		{[]float64{3, nan, 4, nan, 5}, 1, true, []float64{nan}, []float64{1}},
		{[]float64{3, 1, nan, 1, 5}, 1, false, []float64{1}, []float64{1}},
		{[]float64{nan, nan, 2, 2, nan}, 1, false, []float64{2}, []float64{2}},
		{[]float64{3, 1, 4, 1, 5}, 0, true, nil, nil},
	} {
		x := e.region(rt.F32, 5, tc.x)
		v := e.region(rt.F32, max(tc.k, 1), nil)
		ix := e.region(rt.I64, max(tc.k, 1), nil)
		if tc.k == 0 {
			continue
		}
		e.run(&rt.TopK{X: x.ref(1, 5, 1), Values: v.ref(1, tc.k, 1), Indices: ix.ref(1, tc.k, 1), Outer: 1, N: 5, Inner: 1, K: tc.k, Largest: tc.largest})
		gv, gi := e.values(v), e.values(ix)
		if fmt.Sprint(gv) != fmt.Sprint(tc.vals) || !slices.Equal(gi, tc.index) {
			t.Errorf("TopK(%v, k=%d, largest=%v) = %v %v, want %v %v", tc.x, tc.k, tc.largest, gv, gi, tc.vals, tc.index)
		}
	}
}

func TestIndexedOpsRejectBadOperands(t *testing.T) {
	e := newEnv(t)
	x := e.region(rt.F32, 12, nil)
	idx := e.region(rt.F32, 4, nil)
	y := e.region(rt.F32, 4, nil)
	i64 := e.region(rt.I64, 4, nil)
	for name, op := range map[string]rt.Op{
		"float index":   &rt.GatherElements{X: x.ref(2, 3, 2), Idx: idx.ref(2, 1, 2), Y: y.ref(2, 1, 2), Outer: 2, Axis: 3, N: 1, Inner: 2},
		"index shape":   &rt.GatherElements{X: x.ref(2, 3, 2), Idx: i64.ref(4), Y: y.ref(2, 1, 2), Outer: 2, Axis: 3, N: 1, Inner: 2},
		"data too big":  &rt.GatherElements{X: x.ref(2, 3, 2), Idx: i64.ref(2, 1, 2), Y: y.ref(2, 1, 2), Outer: 2, Axis: 9, N: 1, Inner: 2},
		"upd dtype":     &rt.ScatterElements{Y: x.ref(1, 12, 1), Idx: i64.ref(1, 4, 1), Upd: i64.ref(1, 4, 1), Outer: 1, Axis: 12, N: 4, Inner: 1},
		"topk k > n":    &rt.TopK{X: y.ref(1, 4, 1), Values: y.ref(1, 4, 1), Indices: i64.ref(1, 4, 1), Outer: 1, N: 4, Inner: 1, K: 5},
		"topk idx type": &rt.TopK{X: y.ref(1, 4, 1), Values: y.ref(1, 4, 1), Indices: idx.ref(1, 4, 1), Outer: 1, N: 4, Inner: 1, K: 4},
	} {
		if err := e.launchErr(op); err == nil {
			t.Errorf("%s: Launch accepted a bad op", name)
		}
	}
}

func TestGather(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(15, 16))
	O, A, I := 3, 7, 5
	idx := []float64{0, 6, -1, -7, 7, -8, 3, 3}
	for _, dt := range allDTypes {
		for _, it := range []rt.DType{rt.I32, rt.I64} {
			xv := castVals(dt, randVals(rng, O*A*I, -9, 9))
			xr, ir := e.region(dt, O*A*I, xv), e.region(it, len(idx), idx)
			yr := e.region(dt, O*len(idx)*I, nil)
			e.run(&rt.Gather{X: xr.ref(O, A, I), Idx: ir.ref(len(idx)), Y: yr.ref(O, len(idx), I), Outer: O, Axis: A, Inner: I,
				AllowOutOfRange: true}) // zeros for 7 and -8; TestIndexOutOfRange checks the error
			got := e.values(yr)
			for o := 0; o < O; o++ {
				for j, k := range idx {
					kk := int(k)
					if kk < 0 {
						kk += A
					}
					for i := 0; i < I; i++ {
						w := 0.0
						if kk >= 0 && kk < A {
							w = xv[(o*A+kk)*I+i]
						}
						if g := got[(o*len(idx)+j)*I+i]; g != w {
							t.Fatalf("%s/%s gather [%d,%d,%d] = %v, want %v", dt, it, o, j, i, g, w)
						}
					}
				}
			}
		}
	}
}

// TestIndexOutOfRange checks that out-of-range indices of Gather,
// GatherElements and ScatterElements fail the run (internal/indexconf).
func TestIndexOutOfRange(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	indexconf.Run(t, d)
}
