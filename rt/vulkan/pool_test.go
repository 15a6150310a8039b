//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestPool runs max, average (with and without the padding counted) and
// Lp pooling against a float64 reference, over odd images, strides,
// pads, dilations and ceil-mode extra rows and columns.
func TestPool(t *testing.T) {
	d := testDevice(t)
	r := rand.New(rand.NewSource(12))
	type pc struct{ NC, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, extra int }
	cases := []pc{
		{3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{2, 13, 11, 2, 3, 2, 3, 0, 1, 1, 1, 2, 1, 1}, // ceil-mode extra row/col
		{5, 1, 33, 1, 4, 1, 2, 0, 2, 0, 1, 1, 1, 0},
		// 3×3 dilation 1 (pool.comp's pool3): stride 1, asymmetric pads,
		// ceil-mode windows past the padding, an image smaller than the
		// window
		{2, 10, 12, 3, 3, 1, 1, 1, 0, 1, 2, 1, 1, 0},
		{3, 14, 15, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1},
		{2, 2, 1, 3, 3, 1, 2, 1, 2, 1, 1, 1, 1, 0},
		// stride 2, rows of a multiple of 4 (pool.comp's poolv, with
		// poolVec 4 and 2): pad left 1 and 0, outputs past the row's
		// vectors, a ragged last group of outputs
		{3, 9, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{2, 7, 12, 3, 3, 3, 2, 0, 0, 1, 1, 1, 1, 1},
		{2, 5, 4, 3, 3, 2, 2, 1, 1, 1, 3, 1, 1, 0},
		{1, 6, 20, 3, 3, 1, 2, 1, 0, 1, 0, 1, 1, 0},
		// many rows and planes to a workgroup, rows of 3 and 5 groups of
		// outputs, an odd row (scalar stores)
		{7, 11, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
		{6, 10, 40, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 0},
		{5, 9, 28, 3, 3, 2, 2, 1, 1, 1, 0, 1, 1, 0},
	}
	defer func(pv int) { poolVec = pv }(poolVec)
	for _, pv := range []int{4, 2} {
		poolVec = pv
		for _, dt := range floatDTypes {
			for ci, c := range cases {
				OH := (c.H+c.pt+c.pb-c.dh*(c.KH-1)-1)/c.sh + 1 + c.extra
				OW := (c.W+c.pl+c.pr-c.dw*(c.KW-1)-1)/c.sw + 1 + c.extra
				x := randVals(r, dt, c.NC*c.H*c.W, -2, 2)
				for _, fn := range []rt.PoolFn{rt.MaxPool, rt.AvgPool, rt.LpPool} {
					for _, cip := range []bool{false, true} {
						for _, p := range []int{1, 2, 3} {
							if (fn != rt.LpPool && p != 2) || (fn != rt.AvgPool && cip) {
								continue
							}
							// every other case writes Y one element past an
							// aligned offset (poolv's scalar stores)
							ny, yo := c.NC*OH*OW, ci%2
							yb := newBuf(t, d, dt, ny+yo, nil)
							yr := yb.ref([]int{ny}, nil)
							yr.Off += int64(yo * dt.Size())
							op := &rt.Pool{Fn: fn, X: newBuf(t, d, dt, len(x), x).ref([]int{len(x)}, nil), Y: yr,
								NC: c.NC, H: c.H, W: c.W, OH: OH, OW: OW, KH: c.KH, KW: c.KW, StrideH: c.sh, StrideW: c.sw,
								PadT: c.pt, PadL: c.pl, PadB: c.pb, PadR: c.pr, DilH: c.dh, DilW: c.dw, CountIncludePad: cip, P: p}
							if !supported(t, d, op) {
								continue
							}
							backendtest.Run(t, d, op)
							got := yb.read(t, d)[yo : yo+ny]
							want := make([]float64, len(got))
							for nc := 0; nc < c.NC; nc++ {
								for oh := 0; oh < OH; oh++ {
									for ow := 0; ow < OW; ow++ {
										acc, cnt, pad := 0.0, 0, 0
										if fn == rt.MaxPool {
											acc = math.Inf(-1)
										}
										for kh := 0; kh < c.KH; kh++ {
											for kw := 0; kw < c.KW; kw++ {
												ih, iw := oh*c.sh-c.pt+kh*c.dh, ow*c.sw-c.pl+kw*c.dw
												if ih >= -c.pt && ih < c.H+c.pb && iw >= -c.pl && iw < c.W+c.pr {
													pad++
												}
												if ih < 0 || ih >= c.H || iw < 0 || iw >= c.W {
													continue
												}
												v := x[(nc*c.H+ih)*c.W+iw]
												cnt++
												switch fn {
												case rt.MaxPool:
													acc = math.Max(acc, v)
												case rt.AvgPool:
													acc += v
												default:
													acc += math.Pow(math.Abs(v), float64(p))
												}
											}
										}
										switch fn {
										case rt.AvgPool:
											if cip {
												acc /= float64(pad)
											} else {
												acc /= float64(cnt)
											}
										case rt.LpPool:
											acc = math.Pow(acc, 1/float64(p))
										}
										want[(nc*OH+oh)*OW+ow] = acc
									}
								}
							}
							tol := tolFor(dt)
							if dt == rt.F32 && fn == rt.LpPool {
								tol = 2e-5
							}
							compare(t, fmt.Sprintf("pool %s %s %+v cip=%v p=%d pv=%d", dt, fn, c, cip, p, pv), got, want, tol)
						}
					}
				}
			}
		}
	}
}
