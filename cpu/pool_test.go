package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

func TestPool(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(27, 28))
	type pc struct {
		h, w, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw int
		ceil                                         bool
	}
	cases := []pc{
		{h: 7, w: 9, kh: 3, kw: 3, sh: 2, sw: 2, pt: 1, pl: 1, pb: 1, pr: 1, dh: 1, dw: 1},
		{h: 8, w: 8, kh: 3, kw: 3, sh: 2, sw: 2, pt: 0, pl: 0, pb: 0, pr: 0, dh: 1, dw: 1, ceil: true},
		{h: 6, w: 7, kh: 2, kw: 3, sh: 2, sw: 2, pt: 1, pl: 0, pb: 0, pr: 1, dh: 1, dw: 1, ceil: true},
		{h: 9, w: 9, kh: 2, kw: 2, sh: 1, sw: 3, pt: 0, pl: 2, pb: 1, pr: 2, dh: 2, dw: 2},
		{h: 1, w: 1, kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1},
	}
	for _, dt := range []rt.DType{rt.F32, rt.F64, rt.F16} {
		for ci, c := range cases {
			NC := 3
			div := func(n, p0, p1, k, s, d int) int {
				num := n + p0 + p1 - d*(k-1) - 1
				if c.ceil {
					return (num+s-1)/s + 1
				}
				return num/s + 1
			}
			OH, OW := div(c.h, c.pt, c.pb, c.kh, c.sh, c.dh), div(c.w, c.pl, c.pr, c.kw, c.sw, c.dw)
			xv := stored(dt, randVals(rng, NC*c.h*c.w, -3, 3))
			for _, fn := range []rt.PoolFn{rt.MaxPool, rt.AvgPool, rt.LpPool} {
				for _, cip := range []bool{false, true} {
					for _, P := range []int{1, 2, 3} {
						if (fn != rt.LpPool && P > 1) || (fn != rt.AvgPool && cip) {
							continue
						}
						xr, yr := e.region(dt, NC*c.h*c.w, xv), e.region(dt, NC*OH*OW, nil)
						e.run(&rt.Pool{Fn: fn, X: xr.ref(NC * c.h * c.w), Y: yr.ref(NC * OH * OW), NC: NC, H: c.h, W: c.w, OH: OH, OW: OW,
							KH: c.kh, KW: c.kw, StrideH: c.sh, StrideW: c.sw, PadT: c.pt, PadL: c.pl, PadB: c.pb, PadR: c.pr,
							DilH: c.dh, DilW: c.dw, CountIncludePad: cip, P: P})
						want := make([]float64, NC*OH*OW)
						for ch := 0; ch < NC; ch++ {
							for oh := 0; oh < OH; oh++ {
								for ow := 0; ow < OW; ow++ {
									m, s, cnt, padcnt := math.Inf(-1), 0.0, 0, 0
									for i := 0; i < c.kh; i++ {
										for j := 0; j < c.kw; j++ {
											ih, iw := oh*c.sh-c.pt+i*c.dh, ow*c.sw-c.pl+j*c.dw
											if ih >= -c.pt && ih < c.h+c.pb && iw >= -c.pl && iw < c.w+c.pr {
												padcnt++
											}
											if ih < 0 || ih >= c.h || iw < 0 || iw >= c.w {
												continue
											}
											v := xv[(ch*c.h+ih)*c.w+iw]
											m = math.Max(m, v)
											cnt++
											if fn == rt.LpPool {
												s += math.Pow(math.Abs(v), float64(P))
											} else {
												s += v
											}
										}
									}
									var r float64
									switch fn {
									case rt.MaxPool:
										r = m
									case rt.AvgPool:
										if cip {
											cnt = padcnt
										}
										r = s / float64(cnt)
									case rt.LpPool:
										r = math.Pow(s, 1/float64(P))
									}
									want[(ch*OH+oh)*OW+ow] = r
								}
							}
						}
						checkVals(t, fmt.Sprintf("pool %s #%d %s cip=%v P=%d", dt, ci, fn, cip, P), e.values(yr), stored(dt, want), tolFor(dt), func(int) float64 { return 1e-2 })
					}
				}
			}
		}
	}
}

// TestMaxPoolF32Kernels runs f32 MaxPool at every kernel level on rows
// wider than a vector (strides 1 and 2, windows 1 to 4, padding, ceil
// mode), with NaN and -Inf inputs, against a float64 loop: bit for bit.
func TestMaxPoolF32Kernels(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(29, 30))
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for _, w := range []int{1, 5, 16, 17, 33, 70} {
				for _, sw := range []int{1, 2} {
					for kw := 1; kw <= 4; kw++ {
						h, kh, sh, pt, pl, pb := 5, 3, 2, 1, kw/2, 1
						pr := kw - 1
						OH := (h+pt+pb-kh)/sh + 1
						OW := (w+pl+pr-kw+sw-1)/sw + 1 // ceil mode
						NC := 2
						xv := randVals(rng, NC*h*w, -3, 3)
						xv[rng.IntN(len(xv))] = math.NaN()
						xv[rng.IntN(len(xv))] = math.Inf(-1)
						xr, yr := e.region(rt.F32, NC*h*w, stored(rt.F32, xv)), e.region(rt.F32, NC*OH*OW, nil)
						e.run(&rt.Pool{Fn: rt.MaxPool, X: xr.ref(NC * h * w), Y: yr.ref(NC * OH * OW), NC: NC, H: h, W: w, OH: OH, OW: OW,
							KH: kh, KW: kw, StrideH: sh, StrideW: sw, PadT: pt, PadL: pl, PadB: pb, PadR: pr, DilH: 1, DilW: 1})
						got := e.values(yr)
						xs := stored(rt.F32, xv)
						for c := 0; c < NC; c++ {
							for oh := 0; oh < OH; oh++ {
								for ow := 0; ow < OW; ow++ {
									m := math.Inf(-1)
									for i := 0; i < kh; i++ {
										for j := 0; j < kw; j++ {
											ih, iw := oh*sh-pt+i, ow*sw-pl+j
											if ih < 0 || ih >= h || iw < 0 || iw >= w {
												continue
											}
											if v := xs[(c*h+ih)*w+iw]; v > m || v != v {
												m = v
											}
										}
									}
									g := got[(c*OH+oh)*OW+ow]
									if g != m && !(g != g && m != m) {
										t.Fatalf("%s w=%d sw=%d kw=%d: y[%d,%d,%d] = %v, want %v", levelNames[lv], w, sw, kw, c, oh, ow, g, m)
									}
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestMaxPoolTiled covers maxPoolTiled (windows tiling the rows, no
// padding): several blocks of planes and the planes after them, vertical
// windows of 1 to 3 rows with and without overlap, NaN and -Inf inputs.
func TestMaxPoolTiled(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for _, c := range []struct{ nc, h, w, kh, sh, sw int }{
				{50, 28, 28, 2, 2, 2}, {3, 7, 10, 2, 2, 2}, {1, 5, 6, 3, 2, 2}, {9, 9, 4, 3, 3, 1},
				{4, 6, 22, 1, 1, 2}, {130, 10, 10, 2, 2, 2}, {2, 1, 64, 1, 1, 2},
			} {
				OH, OW := (c.h-c.kh)/c.sh+1, c.w/c.sw
				xv := randVals(rng, c.nc*c.h*c.w, -3, 3)
				xv[rng.IntN(len(xv))] = math.NaN()
				xv[rng.IntN(len(xv))] = math.Inf(-1)
				xr, yr := e.region(rt.F32, len(xv), stored(rt.F32, xv)), e.region(rt.F32, c.nc*OH*OW, nil)
				e.run(&rt.Pool{Fn: rt.MaxPool, X: xr.ref(len(xv)), Y: yr.ref(c.nc * OH * OW), NC: c.nc, H: c.h, W: c.w, OH: OH, OW: OW,
					KH: c.kh, KW: c.sw, StrideH: c.sh, StrideW: c.sw, DilH: 1, DilW: 1})
				got := e.values(yr)
				xs := stored(rt.F32, xv)
				for p := 0; p < c.nc; p++ {
					for oh := 0; oh < OH; oh++ {
						for ow := 0; ow < OW; ow++ {
							m := math.Inf(-1)
							for i := 0; i < c.kh; i++ {
								for j := 0; j < c.sw; j++ {
									if v := xs[(p*c.h+oh*c.sh+i)*c.w+ow*c.sw+j]; v > m || v != v {
										m = v
									}
								}
							}
							if g := got[(p*OH+oh)*OW+ow]; g != m && !(g != g && m != m) {
								t.Fatalf("%s %+v: y[%d,%d,%d] = %v, want %v", levelNames[lv], c, p, oh, ow, g, m)
							}
						}
					}
				}
			}
		})
	}
}

// TestMaxPool22 runs 2×2 stride-2 MaxPools without padding (the row-pair
// kernel; planes of even height as one run) against a float64 loop, bit
// for bit: heights even and odd, widths around one and two vectors of
// outputs, NaN and -Inf inputs, and enough planes to split between the
// workers; at every kernel level (AVX-512, AVX2, and the Go paths).
func TestMaxPool22(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(67, 68))
	for _, lv := range ewLevels() {
		withLevel(lv, func() { checkMaxPool22(t, e, rng) })
	}
}

// checkMaxPool22 runs TestMaxPool22's cases at the current kernel level.
func checkMaxPool22(t *testing.T, e *env, rng *rand.Rand) {
	t.Helper()
	for _, c := range []struct{ nc, h, w int }{
		{1, 2, 2}, {3, 5, 3}, {2, 28, 28}, {5, 10, 10}, {2, 7, 33}, {4, 4, 64}, {3, 6, 65}, {1, 3, 97}, {700, 28, 28}, {40, 9, 31},
	} {
		OH, OW := c.h/2, c.w/2
		xv := randVals(rng, c.nc*c.h*c.w, -3, 3)
		xv[rng.IntN(len(xv))] = math.NaN()
		xv[rng.IntN(len(xv))] = math.Inf(-1)
		xs := stored(rt.F32, xv)
		xr, yr := e.region(rt.F32, len(xv), xs), e.region(rt.F32, c.nc*OH*OW, nil)
		e.run(&rt.Pool{Fn: rt.MaxPool, X: xr.ref(len(xv)), Y: yr.ref(c.nc * OH * OW), NC: c.nc, H: c.h, W: c.w, OH: OH, OW: OW,
			KH: 2, KW: 2, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1})
		got := e.values(yr)
		for p := 0; p < c.nc; p++ {
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					m := math.Inf(-1)
					for i := 0; i < 2; i++ {
						for j := 0; j < 2; j++ {
							if v := xs[(p*c.h+2*oh+i)*c.w+2*ow+j]; v > m || v != v || m != m {
								if m != m {
									continue
								}
								m = v
							}
						}
					}
					g := got[(p*OH+oh)*OW+ow]
					if g != m && !(g != g && m != m) {
						t.Fatalf("%s %+v: y[%d][%d][%d] = %v, want %v", levelNames[kernelLevel()], c, p, oh, ow, g, m)
					}
				}
			}
		}
	}
}

// TestAvgPoolF32 runs f32 AveragePools (avgPoolF32 where there are vector
// kernels, poolT at levelGo) at every kernel level against a float64
// loop: rows wider than the vectors, windows 1 to 5, strides 1 to 3,
// padding counted or not, ceil mode (windows past the padding), and
// enough rows to split between the workers.
func TestAvgPoolF32(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(95, 96))
	for _, lv := range ewLevels() {
		withLevel(lv, func() {
			for ci, c := range []struct{ nc, h, w, k, s, p int }{
				{2, 5, 1, 1, 1, 0}, {3, 9, 17, 3, 1, 1}, {2, 8, 33, 3, 2, 1}, {1, 7, 70, 5, 2, 2}, {2, 6, 31, 2, 2, 0},
				{3, 10, 19, 4, 3, 1}, {64, 28, 28, 3, 1, 1}, {8, 15, 64, 2, 1, 0}, {2, 6, 9, 5, 1, 2},
			} {
				for _, cip := range []bool{false, true} {
					for _, ceil := range []bool{false, true} {
						num := c.w + 2*c.p - c.k
						numH := c.h + 2*c.p - c.k
						OW, OH := num/c.s+1, numH/c.s+1
						pr, pb := c.p, c.p
						if ceil {
							OW, OH = (num+c.s-1)/c.s+1, (numH+c.s-1)/c.s+1
						}
						if OW < 1 || OH < 1 {
							continue
						}
						xv := randVals(rng, c.nc*c.h*c.w, -3, 3)
						xs := stored(rt.F32, xv)
						xr, yr := e.region(rt.F32, len(xv), xs), e.region(rt.F32, c.nc*OH*OW, nil)
						e.run(&rt.Pool{Fn: rt.AvgPool, X: xr.ref(len(xv)), Y: yr.ref(c.nc * OH * OW), NC: c.nc, H: c.h, W: c.w, OH: OH, OW: OW,
							KH: c.k, KW: c.k, StrideH: c.s, StrideW: c.s, PadT: c.p, PadL: c.p, PadB: pb, PadR: pr, DilH: 1, DilW: 1, CountIncludePad: cip})
						got := e.values(yr)
						for p := 0; p < c.nc; p++ {
							for oh := 0; oh < OH; oh++ {
								for ow := 0; ow < OW; ow++ {
									s, cnt, padcnt := 0.0, 0, 0
									for i := 0; i < c.k; i++ {
										for j := 0; j < c.k; j++ {
											ih, iw := oh*c.s-c.p+i, ow*c.s-c.p+j
											if ih >= -c.p && ih < c.h+pb && iw >= -c.p && iw < c.w+pr {
												padcnt++
											}
											if ih < 0 || ih >= c.h || iw < 0 || iw >= c.w {
												continue
											}
											s += xs[(p*c.h+ih)*c.w+iw]
											cnt++
										}
									}
									if cip {
										cnt = padcnt
									}
									want := 0.0
									if cnt > 0 {
										want = s / float64(cnt)
									}
									if g := got[(p*OH+oh)*OW+ow]; math.Abs(g-want) > 2e-6*(1+math.Abs(want)) {
										t.Fatalf("%s case %d cip %v ceil %v: y[%d,%d,%d] = %v, want %v", levelNames[lv], ci, cip, ceil, p, oh, ow, g, want)
									}
								}
							}
						}
					}
				}
			}
		})
	}
}
