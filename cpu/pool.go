package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func poolOp(o *rt.Pool) {
	if o.X.DType == rt.F64 {
		poolT[float64](o)
	} else {
		poolT[float32](o)
	}
}

// padCount is the number of window taps start + t*dil (t < k) inside
// [lo, hi).
func padCount(start, dil, k, lo, hi int) int {
	c := 0
	for t := 0; t < k; t++ {
		if p := start + t*dil; p >= lo && p < hi {
			c++
		}
	}
	return c
}

func poolT[T floatT](o *rt.Pool) {
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	x := lin[T](o.X, NC*H*W)
	y := lin[T](o.Y, NC*OH*OW)
	pf := float64(o.P)
	parallelFor(NC, max(1, 4096/max(OH*OW, 1)), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			xp := x[c*H*W : (c+1)*H*W]
			yp := y[c*OH*OW : (c+1)*OH*OW]
			for oh := 0; oh < OH; oh++ {
				hs := oh*o.StrideH - o.PadT
				kh0, kh1 := validRange(hs, o.DilH, H, o.KH)
				for ow := 0; ow < OW; ow++ {
					ws := ow*o.StrideW - o.PadL
					kw0, kw1 := validRange(ws, o.DilW, W, o.KW)
					var r float64
					switch o.Fn {
					case rt.MaxPool:
						m := math.Inf(-1)
						for kh := kh0; kh < kh1; kh++ {
							row := xp[(hs+kh*o.DilH)*W:]
							for kw := kw0; kw < kw1; kw++ {
								v := float64(row[ws+kw*o.DilW])
								if v > m || v != v {
									m = v
								}
							}
						}
						r = m
					case rt.AvgPool:
						s := 0.0
						for kh := kh0; kh < kh1; kh++ {
							row := xp[(hs+kh*o.DilH)*W:]
							for kw := kw0; kw < kw1; kw++ {
								s += float64(row[ws+kw*o.DilW])
							}
						}
						cnt := (kh1 - kh0) * (kw1 - kw0)
						if o.CountIncludePad {
							cnt = padCount(hs, o.DilH, o.KH, -o.PadT, H+o.PadB) * padCount(ws, o.DilW, o.KW, -o.PadL, W+o.PadR)
						}
						if cnt > 0 {
							r = s / float64(cnt)
						}
					case rt.LpPool:
						s := 0.0
						for kh := kh0; kh < kh1; kh++ {
							row := xp[(hs+kh*o.DilH)*W:]
							for kw := kw0; kw < kw1; kw++ {
								v := math.Abs(float64(row[ws+kw*o.DilW]))
								switch o.P {
								case 1:
									s += v
								case 2:
									s += v * v
								default:
									s += math.Pow(v, pf)
								}
							}
						}
						switch o.P {
						case 1:
							r = s
						case 2:
							r = math.Sqrt(s)
						default:
							r = math.Pow(s, 1/pf)
						}
					}
					yp[oh*OW+ow] = T(r)
				}
			}
		}
	})
}
