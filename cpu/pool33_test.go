package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// TestMaxPool33 runs 3×3 stride-2 MaxPools with top and left padding 0
// or 1 (maxPool33; squeezenet's and ResNet's, ceil mode and floor mode,
// the pads alike or not) against a float64
// loop, bit for bit: widths and heights around the 16-output steps and
// their masked last step, odd and even (ceil mode's windows past the
// right and bottom edges, with one or two input rows left), NaN and -Inf
// inputs, and enough planes to split between the workers; at every
// kernel level (AVX-512, AVX2, and the Go paths).
func TestMaxPool33(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(73, 74))
	for _, lv := range ewLevels() {
		withLevel(lv, func() { checkMaxPool33(t, e, rng) })
	}
}

// checkMaxPool33 runs TestMaxPool33's cases at the current kernel level.
func checkMaxPool33(t *testing.T, e *env, rng *rand.Rand) {
	t.Helper()
	for _, c := range []struct{ nc, h, w int }{
		{1, 3, 3}, {2, 4, 4}, {3, 5, 33}, {2, 7, 34}, {1, 6, 35}, {2, 9, 36}, {1, 8, 65}, {3, 11, 66}, {1, 3, 97},
		{64, 111, 111}, {16, 55, 55}, {40, 27, 27}, {5, 14, 31}, {2, 33, 32}, {64, 112, 112}, {3, 4, 3}, {2, 3, 5},
	} {
		for _, v := range []struct {
			ceil   bool
			pt, pl int
		}{{false, 0, 0}, {true, 0, 0}, {false, 1, 1}, {true, 1, 1}, {false, 1, 0}, {true, 0, 1}} {
			ceil, pt, pl := v.ceil, v.pt, v.pl
			OH, OW := (c.h+2*pt-3)/2+1, (c.w+2*pl-3)/2+1
			if ceil {
				OH, OW = (c.h+2*pt-3+1)/2+1, (c.w+2*pl-3+1)/2+1
			}
			xv := randVals(rng, c.nc*c.h*c.w, -3, 3)
			for i := 0; i < 1+len(xv)/2000; i++ {
				xv[rng.IntN(len(xv))] = math.NaN()
				xv[rng.IntN(len(xv))] = math.Inf(-1)
			}
			xs := stored(rt.F32, xv)
			op := &rt.Pool{Fn: rt.MaxPool, NC: c.nc, H: c.h, W: c.w, OH: OH, OW: OW,
				KH: 3, KW: 3, StrideH: 2, StrideW: 2, PadT: pt, PadL: pl, PadB: max(0, 2*(OH-1)+3-pt-c.h), PadR: max(0, 2*(OW-1)+3-pl-c.w), DilH: 1, DilW: 1}
			if maxPool33Rows(nil, nil, 0, 0, 0, 0) {
				if !maxPool33(op, make([]float32, len(xv)), make([]float32, c.nc*OH*OW)) {
					t.Fatalf("%s %+v: not a maxPool33 case", levelNames[kernelLevel()], op)
				}
			}
			xr, yr := e.region(rt.F32, len(xv), xs), e.region(rt.F32, c.nc*OH*OW, nil)
			op.X, op.Y = xr.ref(len(xv)), yr.ref(c.nc*OH*OW)
			e.run(op)
			got := e.values(yr)
			for p := 0; p < c.nc; p++ {
				for oh := 0; oh < OH; oh++ {
					for ow := 0; ow < OW; ow++ {
						m := math.Inf(-1)
						for i := max(0, 2*oh-pt); i < min(c.h, 2*oh-pt+3); i++ {
							for j := max(0, 2*ow-pl); j < min(c.w, 2*ow-pl+3); j++ {
								if v := xs[(p*c.h+i)*c.w+j]; v > m || v != v {
									if m != m {
										continue
									}
									m = v
								}
							}
						}
						g := got[(p*OH+oh)*OW+ow]
						if g != m && !(g != g && m != m) {
							t.Fatalf("%s %d×%d×%d ceil %v pads %d,%d: y[%d,%d,%d] = %v, want %v", levelNames[kernelLevel()], c.nc, c.h, c.w, ceil, pt, pl, p, oh, ow, g, m)
						}
					}
				}
			}
		}
	}
}

// BenchmarkMaxPool33Rows times the 3×3 stride-2 row kernel alone
// (maxPool33Rows, a plane a call, one thread) on squeezenet's three pools,
// at the CPU's kernel level.
func BenchmarkMaxPool33Rows(b *testing.B) {
	for _, c := range []struct{ nc, h int }{{64, 111}, {128, 55}, {256, 27}} {
		o := (c.h-3)/2 + 1
		x, y := make([]float32, c.nc*c.h*c.h), make([]float32, c.nc*o*o)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		b.Run(fmt.Sprintf("%dx%dx%d", c.nc, c.h, c.h), func(b *testing.B) {
			if !maxPool33Rows(nil, nil, 0, 0, 0, 0) {
				b.Skip("no kernel")
			}
			b.SetBytes(int64(4 * (len(x) + len(y))))
			for b.Loop() {
				for p := 0; p < c.nc; p++ {
					maxPool33Rows(y[p*o*o:(p+1)*o*o], x[p*c.h*c.h:], o, c.h, 2*c.h, o)
				}
			}
		})
	}
}
