package engine

import (
	"fmt"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestRefSpan checks the byte ranges operands address: linear extents,
// strided views (transposed, broadcast, reversed) and empty ones.
func TestRefSpan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      rt.Operand
		lo, hi int64
		ok     bool
	}{
		{"linear", rt.Operand{Ref: &rt.Ref{Off: 16, DType: rt.F32}, Need: 10}, 16, 56, true},
		{"unknown", rt.Operand{Ref: &rt.Ref{Off: 16, DType: rt.F32}, Need: -1}, 0, 0, false},
		{"contiguous", rt.Operand{Ref: &rt.Ref{Off: 8, DType: rt.F64, Shape: []int{3, 4}}, Strided: true}, 8, 8 + 96, true},
		{"transposed", rt.Operand{Ref: &rt.Ref{Off: 0, DType: rt.F32, Shape: []int{4, 3}, Strides: []int{1, 4}}, Strided: true}, 0, 48, true},
		{"broadcast", rt.Operand{Ref: &rt.Ref{Off: 4, DType: rt.F32, Shape: []int{5, 3}, Strides: []int{0, 1}}, Strided: true}, 4, 16, true},
		{"reversed", rt.Operand{Ref: &rt.Ref{Off: 40, DType: rt.F32, Shape: []int{3}, Strides: []int{-2}}, Strided: true}, 24, 44, true},
		{"empty", rt.Operand{Ref: &rt.Ref{Off: 40, DType: rt.F32, Shape: []int{3, 0}}, Strided: true}, 40, 40, true},
		{"bad strides", rt.Operand{Ref: &rt.Ref{DType: rt.F32, Shape: []int{3, 2}, Strides: []int{1}}, Strided: true}, 0, 0, false},
	} {
		lo, hi, ok := refSpan(tc.o)
		if ok != tc.ok || ok && (lo != tc.lo || hi != tc.hi) {
			t.Errorf("%s: span [%d, %d) %v, want [%d, %d) %v", tc.name, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}

// TestOverlapGroups checks the order and grouping of buckets by the
// launch that last touches them, the segment cuts a plan gets for those
// groups, and the merging of many groups into few.
func TestOverlapGroups(t *testing.T) {
	for _, tc := range []struct {
		last   []int
		groups string
		cuts   string // for the plan whose buckets are last touched at last
	}{
		{[]int{5, 3, 9, 3}, "[[1 3] [0] [2]]", "[4 6 10]"},
		{[]int{7, 7}, "[]", ""},
		{[]int{2}, "[]", ""},
		{[]int{-1, 4}, "[[0] [1]]", "[0 5]"}, // a bucket nothing touches is ready at once
	} {
		g := overlapGroups(tc.last)
		if got := fmt.Sprint(g); got != tc.groups && !(g == nil && tc.groups == "[]") {
			t.Errorf("last %v: groups %s, want %s", tc.last, got, tc.groups)
		}
		if g == nil {
			continue
		}
		if got := fmt.Sprint(segmentCuts(tc.last, g)); got != tc.cuts {
			t.Errorf("last %v: cuts %s, want %s", tc.last, got, tc.cuts)
		}
	}
	// Another replica's plan, whose launches differ, gets cuts for the
	// same groups: after every bucket of the groups so far.
	if got := fmt.Sprint(segmentCuts([]int{4, 6, 8, 2}, [][]int{{1, 3}, {0}, {2}})); got != "[7 7 9]" {
		t.Errorf("cuts %s for another plan, want [7 7 9]", got)
	}
	size := func(i int) int64 { return []int64{10, 10, 10, 10, 100, 10, 10, 10, 10, 10}[i] }
	var ten [][]int
	for i := range 10 {
		ten = append(ten, []int{i})
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{10, "[[0] [1] [2] [3] [4] [5] [6] [7] [8] [9]]"},
		{4, "[[0 1 2 3] [4] [5] [6 7 8 9]]"}, // shares of 47.5 bytes: the 100-byte group alone
		{3, "[[0 1 2 3] [4] [5 6 7 8 9]]"},
		{2, "[[0 1 2 3] [4 5 6 7 8 9]]"},
		{1, "[[0 1 2 3 4 5 6 7 8 9]]"},
	} {
		g := mergeGroups(ten, size, tc.n)
		if got := fmt.Sprint(g); got != tc.want {
			t.Errorf("merged into %d: %s, want %s", tc.n, got, tc.want)
		}
	}
}
