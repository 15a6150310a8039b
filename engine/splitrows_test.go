package engine

import (
	"fmt"
	"testing"
)

func TestSplitRows(t *testing.T) {
	for _, c := range []struct {
		n      int
		shares []float64
		want   []int
	}{
		{7, nil, []int{4, 3}},
		{10, nil, []int{4, 3, 3}},
		{3, nil, []int{1, 1, 1}},
		{10, []float64{4, 1}, []int{8, 2}},
		{16, []float64{1, 2, 5}, []int{2, 4, 10}},
		{7, []float64{1, 1, 1}, []int{3, 2, 2}},
		{3, []float64{100, 1, 1}, []int{1, 1, 1}},        // one row each at least
		{5, []float64{100, 1, 1}, []int{3, 1, 1}},        // the minimums come out of the largest
		{11, []float64{0.5, 0.25, 0.25}, []int{5, 3, 3}}, // 5.5, 2.75, 2.75: the largest remainders
	} {
		got := splitRows(c.n, len(c.want), c.shares)
		from := 0
		var rows []int
		for _, r := range got {
			if r[0] != from || r[1] <= r[0] {
				t.Errorf("splitRows(%d, %v) = %v: not contiguous and non-empty", c.n, c.shares, got)
			}
			rows = append(rows, r[1]-r[0])
			from = r[1]
		}
		if from != c.n || fmt.Sprint(rows) != fmt.Sprint(c.want) {
			t.Errorf("splitRows(%d, %v) = %v, want %v", c.n, c.shares, rows, c.want)
		}
	}
}
