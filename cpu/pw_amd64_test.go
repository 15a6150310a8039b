//go:build linux && amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPwRunGuarded runs the pointwise panel kernels (pwRun) at both
// widths, every row count, one to three blocks, every valid output count
// n, tap counts 1 to 37, with the bias or accumulating into y, with and
// without the clamp, with packed panels and rows further apart, against
// a float64 sum; the panel and y end at an
// inaccessible page, so that a lane of y read or written past n (or of x
// past the panel) faults, and the lanes of y past n must stay as they
// were. At each kernel level this CPU has that has the kernels.
func TestPwRunGuarded(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	ran := false
	for _, lv := range asmLevels() {
		withLevel(lv, func() {
			for _, width := range []int{16, 8} {
				mk := pwMaxKB(width)
				if mk == 0 {
					continue
				}
				ran = true
				for kb := 1; kb <= mk; kb++ {
					// n: 9..16 at width 16, 1..8 at width 8.
					for n := width - 7; n <= width; n++ {
						nblk := 1 + (kb+n)%3
						kc := 1 + rng.IntN(37)
						acc, clamp := (kb+n)%2 == 1, (kb+n)%3 != 0
						name := fmt.Sprintf("%s/w%d/kb%d/nblk%d/n%d/kc%d/acc=%v/clamp=%v", levelNames[lv], width, kb, nblk, n, kc, acc, clamp)
						rows := nblk * kb
						// Packed (ldx = width) or rows further apart.
						ldx := width + (kb+n)%2*rng.IntN(20)
						x, freeX := guarded(t, (kc-1)*ldx+width, true)
						for i := range x {
							x[i] = float32(rng.Float64()*2 - 1)
						}
						ldw := kc + rng.IntN(3)
						w := make([]float32, (rows-1)*ldw+kc)
						for i := range w {
							w[i] = float32(rng.Float64()*2 - 1)
						}
						bias := make([]float32, rows)
						for i := range bias {
							bias[i] = float32(rng.Float64()*2 - 1)
						}
						ldy := n + rng.IntN(3)
						y, freeY := guarded(t, (rows-1)*ldy+n, true)
						y0 := make([]float32, len(y))
						for i := range y {
							y[i] = float32(rng.Float64()*2 - 1)
							y0[i] = y[i]
						}
						lo, hi := float32(-0.5), float32(0.75)
						pwRun(width, kb, nblk, n, kc, x, ldx, w, ldw, bias, y, ldy, clamp, acc, lo, hi)
						for i := range y {
							if k, q := i/ldy, i%ldy; q >= n {
								if y[i] != y0[i] {
									t.Fatalf("%s: y[%d][%d] (past n) = %v, was %v", name, k, q, y[i], y0[i])
								}
								continue
							}
							k, q := i/ldy, i%ldy
							s, sc := float64(bias[k]), math.Abs(float64(bias[k]))
							if acc {
								s, sc = float64(y0[i]), math.Abs(float64(y0[i]))
							}
							for tp := 0; tp < kc; tp++ {
								p := float64(w[k*ldw+tp]) * float64(x[tp*ldx+q])
								s += p
								sc += math.Abs(p)
							}
							if clamp {
								s = math.Min(math.Max(s, float64(lo)), float64(hi))
							}
							if got := y[i]; math.Abs(float64(got)-s) > 1e-5*sc+1e-7 {
								t.Fatalf("%s: y[%d][%d] = %v, want %v", name, k, q, got, s)
							}
						}
						freeX()
						freeY()
					}
				}
			}
		})
	}
	if !ran {
		t.Skip("no pointwise panel kernels at this CPU's levels (AVX2 only)")
	}
}
