package backendtest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

func TestSpanAndOffset(t *testing.T) {
	for _, c := range []struct {
		shape, st []int
		lo, hi    int
	}{
		{[]int{2, 3}, []int{3, 1}, 0, 5},
		{[]int{2, 3}, []int{0, 0}, 0, 0},
		{[]int{4, 5}, []int{5, -1}, -4, 15},
		{[]int{3, 1, 2}, []int{1, 7, 3}, 0, 5},
	} {
		lo, hi := backendtest.Span(c.shape, c.st)
		if lo != c.lo || hi != c.hi {
			t.Errorf("Span(%v, %v) = %d, %d, want %d, %d", c.shape, c.st, lo, hi, c.lo, c.hi)
		}
	}
	if got := backendtest.Offset([]int{1, 2, 3}, []int{100, -10, 1}); got != 83 {
		t.Errorf("Offset = %d, want 83", got)
	}
}

func TestForEach(t *testing.T) {
	var got []string
	backendtest.ForEach([]int{2, 1, 3}, func(idx []int) { got = append(got, fmt.Sprint(idx)) })
	want := []string{"[0 0 0]", "[0 0 1]", "[0 0 2]", "[1 0 0]", "[1 0 1]", "[1 0 2]"}
	if !slices.Equal(got, want) {
		t.Errorf("ForEach visits %v, want %v", got, want)
	}
	n := 0
	backendtest.ForEach([]int{3, 0}, func([]int) { n++ })
	if n != 0 {
		t.Errorf("ForEach over an empty shape calls f %d times", n)
	}
}

// A reversed view made by Strided reads back, through a Unary copy run by
// Run, as its elements in view order.
func TestStridedRun(t *testing.T) {
	d := cpu.NewDevice()
	defer d.Close()
	k := 0.0
	gen := func() float64 { k++; return k } // memory holds 1..6
	x := backendtest.Strided(t, d, rt.F32, []int{2, 3}, []int{-3, 1}, gen)
	y := backendtest.Upload(t, d, make([]byte, 6*4))
	backendtest.Run(t, d, &rt.Unary{Fn: rt.Copy, X: x, Y: rt.Ref{Buf: y, DType: rt.F32, Shape: []int{2, 3}}})
	raw := make([]byte, 6*4)
	if err := d.Read(raw, y, 0); err != nil {
		t.Fatal(err)
	}
	got := (&rt.Tensor{DType: rt.F32, Shape: []int{6}, Data: raw}).Float64s()
	if want := []float64{4, 5, 6, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("reversed view reads %v, want %v", got, want)
	}
}
