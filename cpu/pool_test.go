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
