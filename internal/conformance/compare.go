package conformance

import (
	"fmt"
	"math"
	"slices"

	"github.com/vrun-go/vrun/rt"
)

// Mismatch describes how an output differs from the expected one.
type Mismatch struct {
	// Bad is the number of elements outside the tolerance; Total the
	// number compared.
	Bad, Total int
	// Index is the multi-index of the worst element (largest error
	// relative to what the tolerance allows); Got and Want its values.
	Index     []int
	Got, Want float64
	Allowed   float64 // atol + rtol*|want| at that element
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("%d of %d elements out of tolerance; worst at %v: got %.9g, want %.9g (|diff| %.3g > allowed %.3g)",
		m.Bad, m.Total, m.Index, m.Got, m.Want, math.Abs(m.Got-m.Want), m.Allowed)
}

// Compare checks got against want: same dtype, same shape, and every
// element within tol. NaN matches only NaN and an infinity only the same
// infinity. It returns nil, a *Mismatch, or an error for a dtype or shape
// difference.
func Compare(got, want *rt.Tensor, tol Tolerance) error {
	if got == nil {
		return fmt.Errorf("no output")
	}
	if err := got.Check(); err != nil {
		return fmt.Errorf("malformed output: %w", err)
	}
	if got.DType != want.DType {
		return fmt.Errorf("dtype %s, want %s", got.DType, want.DType)
	}
	if !slices.Equal(got.Shape, want.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	n := want.Len()
	var (
		bad        int
		worst      = -1
		worstScore float64
		worstDiff  float64
	)
	for i := 0; i < n; i++ {
		g, w := got.Float64(i), want.Float64(i)
		ok := false
		var diff, allowed float64
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			ok = math.IsNaN(w) && math.IsNaN(g)
			diff = math.Inf(1)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			ok = g == w
			diff = math.Inf(1)
		default:
			diff = math.Abs(g - w)
			allowed = tol.Allowed(w)
			ok = diff <= allowed
		}
		if ok {
			continue
		}
		bad++
		score := math.Inf(1)
		if allowed > 0 && !math.IsInf(diff, 0) {
			score = diff / allowed
		}
		if worst < 0 || score > worstScore || (score == worstScore && diff > worstDiff) {
			worst, worstScore, worstDiff = i, score, diff
		}
	}
	if bad == 0 {
		return nil
	}
	return &Mismatch{
		Bad: bad, Total: n,
		Index: unravel(worst, want.Shape),
		Got:   got.Float64(worst), Want: want.Float64(worst),
		Allowed: tol.Allowed(want.Float64(worst)),
	}
}

// unravel turns a flat row-major index into a multi-index.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}
