//go:build linux && amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDirectKernelsGuarded runs the direct-convolution kernels (dcwRun at
// both block widths, with and without accumulation into y, and dconvRun)
// with the input and the output ending at an inaccessible page, at every
// output length from 1 to 70 and every row count, at each kernel level
// this CPU has, against a float64 sum: a masked tail lane read or written
// past n faults.
func TestDirectKernelsGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			if dconvMaxKB() == 0 || dcwMaxKB(2) == 0 {
				t.Fatalf("%s: no direct-convolution kernels", levelNames[lv])
			}
			for n := 1; n <= 70; n++ {
				for _, kind := range []string{"u2", "u4", "u2acc", "packed"} {
					u := 2
					if kind == "u4" {
						u = 4
					}
					mk := dcwMaxKB(u)
					if kind == "packed" {
						mk = dconvMaxKB()
					}
					kb := 1 + (n+len(kind))%mk
					name := fmt.Sprintf("%s/%s/n%d/kb%d", levelNames[lv], kind, n, kb)
					ntaps := 1 + rng.IntN(9)
					offs := make([]int, ntaps)
					hi := 0
					for i := range offs {
						offs[i] = rng.IntN(20)
						hi = max(hi, offs[i])
					}
					offs[rng.IntN(ntaps)] = 0
					x, freeX := guarded(t, hi+n, true)
					for i := range x {
						x[i] = float32(rng.Float64()*2 - 1)
					}
					w := make([]float32, kb*ntaps)
					for i := range w {
						w[i] = float32(rng.Float64()*2 - 1)
					}
					bias := make([]float32, kb)
					for i := range bias {
						bias[i] = float32(rng.Float64()*2 - 1)
					}
					y, freeY := guarded(t, kb*n, true)
					y0 := make([]float32, len(y))
					for i := range y {
						y[i] = float32(rng.Float64()*2 - 1)
						y0[i] = y[i]
					}
					acc := kind == "u2acc"
					switch kind {
					case "packed":
						// dconvRun's weights are [tap][k].
						wp := make([]float32, len(w))
						for k := 0; k < kb; k++ {
							for tp := 0; tp < ntaps; tp++ {
								wp[tp*kb+k] = w[k*ntaps+tp]
							}
						}
						dconvRun(kb, n, x, offs, wp, bias, y, n)
					default:
						dcwRun(u, kb, n, x, offs, w, ntaps, bias, y, n, false, acc, 0, 0, 1, 0, 0)
					}
					for k := 0; k < kb; k++ {
						for q := 0; q < n; q++ {
							s, sc := float64(bias[k]), math.Abs(float64(bias[k]))
							if acc {
								s, sc = float64(y0[k*n+q]), math.Abs(float64(y0[k*n+q]))
							}
							for tp, off := range offs {
								p := float64(w[k*ntaps+tp]) * float64(x[q+off])
								s += p
								sc += math.Abs(p)
							}
							if got := y[k*n+q]; math.Abs(float64(got)-s) > 1e-5*sc+1e-7 {
								t.Fatalf("%s: y[%d][%d] = %v, want %v", name, k, q, got, s)
							}
						}
					}
					freeX()
					freeY()
				}
			}
		})
	}
}
