package soak

import (
	"math"
	"testing"
)

// TestGrowth checks the two numbers the soak judges RSS by: a steady leak
// shows as its rate per sample, and a single sample a few pages higher than
// its neighbours (lavapipe's allocator, seen in CI) does not.
func TestGrowth(t *testing.T) {
	const mib = 1 << 20
	rss := func(mibs ...float64) []Sample {
		s := make([]Sample, len(mibs))
		for i, m := range mibs {
			s[i].RSS = int64(m * mib)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		samples []Sample
		warm    int
		peak    float64 // MiB
		slope   float64 // MiB per sample
	}{
		{"flat", rss(80, 90, 90, 90, 90, 90, 90), 2, 0, 0},
		{"steady leak", rss(80, 90, 92, 94, 96, 98, 100, 102), 2, 12, 2},
		{"leak after warm-up", rss(70, 80, 90, 90.5, 91, 91.5, 92, 92.5, 93, 93.5), 3, 3.5, 0.5},
		// The CI run that failed: 3 warm-up cycles, then one cycle 1.5 MiB up.
		{"one spike", rss(88.3, 88.6, 88.9, 89, 89, 89.1, 90.6, 89.1, 89.2), 3, 1.7, 0.05},
		{"one sample", rss(80), 1, 0, 0},
		{"warm past the end", rss(80, 81), 5, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peak, slope := Growth(tc.samples, tc.warm)
			if got := float64(peak) / mib; math.Abs(got-tc.peak) > 1e-6 {
				t.Errorf("peak %.3f MiB, want %.3f", got, tc.peak)
			}
			if got := slope / mib; math.Abs(got-tc.slope) > 1e-6 {
				t.Errorf("slope %.3f MiB/sample, want %.3f", got, tc.slope)
			}
		})
	}
}
