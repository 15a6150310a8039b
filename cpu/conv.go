package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// colLimit bounds the im2col / col2im scratch matrix, in elements.
const colLimit = 1 << 22

func convOp(o *rt.Conv) {
	if o.X.DType == rt.F64 {
		convT[float64](o)
	} else {
		convT[float32](o)
	}
}

// ceilDiv is ceil(a/b) for b > 0 and any a.
func ceilDiv(a, b int) int {
	if a >= 0 {
		return (a + b - 1) / b
	}
	return -((-a) / b)
}

// validRange returns the o in [0, n) with 0 <= o*s + off < lim.
func validRange(off, s, lim, n int) (int, int) {
	lo := max(0, ceilDiv(-off, s))
	hi := min(n, ceilDiv(lim-off, s))
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

func convT[T floatT](o *rt.Conv) {
	N, C, H, W := o.N, o.C, o.H, o.W_
	K, OH, OW, KH, KW := o.K, o.OH, o.OW, o.KH, o.KW
	G := o.Groups
	Cg, Kg := C/G, K/G
	P := OH * OW
	x := lin[T](o.X, N*C*H*W)
	w := lin[T](o.W, K*Cg*KH*KW)
	bias := lin[T](o.Bias, K)
	y := lin[T](o.Y, N*K*P)
	if N == 0 || K == 0 || P == 0 {
		return
	}
	if Cg == 1 {
		// Depthwise (channel multiplier Kg): direct loops per output plane.
		parallelFor(N*K, 1, func(lo, hi int) {
			for q := lo; q < hi; q++ {
				n, k := q/K, q%K
				c := k / Kg
				xp := x[(n*C+c)*H*W : (n*C+c+1)*H*W]
				yp := y[(n*K+k)*P : (n*K+k+1)*P]
				var b0 T
				if bias != nil {
					b0 = bias[k]
				}
				for i := range yp {
					yp[i] = b0
				}
				wk := w[k*KH*KW : (k+1)*KH*KW]
				for kh := 0; kh < KH; kh++ {
					oh0, oh1 := validRange(kh*o.DilH-o.PadT, o.StrideH, H, OH)
					for kw := 0; kw < KW; kw++ {
						wv := wk[kh*KW+kw]
						offw := kw*o.DilW - o.PadL
						ow0, ow1 := validRange(offw, o.StrideW, W, OW)
						if ow0 >= ow1 {
							continue
						}
						for oh := oh0; oh < oh1; oh++ {
							ih := oh*o.StrideH - o.PadT + kh*o.DilH
							xr := xp[ih*W : ih*W+W]
							yr := yp[oh*OW+ow0 : oh*OW+ow1]
							if o.StrideW == 1 {
								xs := xr[ow0+offw : ow1+offw]
								for i := range yr {
									yr[i] += wv * xs[i]
								}
							} else {
								iw := ow0*o.StrideW + offw
								for i := range yr {
									yr[i] += wv * xr[iw]
									iw += o.StrideW
								}
							}
						}
					}
				}
				actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yp)
			}
		})
		return
	}
	CKK := Cg * KH * KW
	g0 := gemm[T]{m: Kg, lda: CKK, ldc: P, alpha: 1, beta: 1, act: o.Act}
	if bias != nil {
		g0.bias, g0.brs, g0.bcs = bias, 1, 0
	}
	pointwise := KH == 1 && KW == 1 && o.StrideH == 1 && o.StrideW == 1 && o.PadT == 0 && o.PadL == 0 && OH == H && OW == W
	if pointwise {
		for n := 0; n < N; n++ {
			for g := 0; g < G; g++ {
				gg := g0
				gg.n, gg.k = P, Cg
				gg.a = w[g*Kg*CKK:]
				gg.b, gg.ldb = x[(n*C+g*Cg)*H*W:], H*W
				gg.c = y[(n*K+g*Kg)*P:]
				gg.boff = g * Kg
				gg.run()
			}
		}
		return
	}
	Q := max(1, min(P, colLimit/max(CKK, 1)))
	col := make([]T, CKK*Q)
	for n := 0; n < N; n++ {
		for g := 0; g < G; g++ {
			for q0 := 0; q0 < P; q0 += Q {
				q1 := min(P, q0+Q)
				nq := q1 - q0
				xg := x[(n*C+g*Cg)*H*W:]
				parallelFor(CKK, max(1, 4096/nq), func(lo, hi int) {
					for r := lo; r < hi; r++ {
						c, kh, kw := r/(KH*KW), (r/KW)%KH, r%KW
						xc := xg[c*H*W : (c+1)*H*W]
						dst := col[r*nq : (r+1)*nq]
						offh := kh*o.DilH - o.PadT
						offw := kw*o.DilW - o.PadL
						ow0, ow1 := validRange(offw, o.StrideW, W, OW)
						for q := q0; q < q1; {
							oh, ow := q/OW, q%OW
							end := min(q1, q+OW-ow) // end of this output row
							d := dst[q-q0 : end-q0]
							ih := oh*o.StrideH + offh
							if ih < 0 || ih >= H {
								clear(d)
							} else {
								xr := xc[ih*W : ih*W+W]
								for i := range d {
									owi := ow + i
									if owi >= ow0 && owi < ow1 {
										d[i] = xr[owi*o.StrideW+offw]
									} else {
										d[i] = 0
									}
								}
							}
							q = end
						}
					}
				})
				gg := g0
				gg.n, gg.k = nq, CKK
				gg.a = w[g*Kg*CKK:]
				gg.b, gg.ldb = col, nq
				gg.c = y[(n*K+g*Kg)*P+q0:]
				gg.boff = g * Kg
				gg.run()
			}
		}
	}
}

func convTransposeOp(o *rt.ConvTranspose) {
	if o.X.DType == rt.F64 {
		convTransposeT[float64](o)
	} else {
		convTransposeT[float32](o)
	}
}

func convTransposeT[T floatT](o *rt.ConvTranspose) {
	N, C, H, W := o.N, o.C, o.H, o.W_
	K, OH, OW, KH, KW := o.K, o.OH, o.OW, o.KH, o.KW
	G := o.Groups
	Cg, Kg := C/G, K/G
	P, HW := OH*OW, H*W
	x := lin[T](o.X, N*C*HW)
	w := lin[T](o.W, C*Kg*KH*KW)
	bias := lin[T](o.Bias, K)
	y := lin[T](o.Y, N*K*P)
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			var b0 T
			if bias != nil {
				b0 = bias[k]
			}
			yp := y[(n*K+k)*P : (n*K+k+1)*P]
			for i := range yp {
				yp[i] = b0
			}
		}
	}
	R := Kg * KH * KW
	if N == 0 || K == 0 || P == 0 || R == 0 || HW == 0 {
		return
	}
	Q := max(1, min(HW, colLimit/R))
	col := make([]T, R*Q)
	for n := 0; n < N; n++ {
		for g := 0; g < G; g++ {
			for q0 := 0; q0 < HW; q0 += Q {
				q1 := min(HW, q0+Q)
				nq := q1 - q0
				// col[R, nq] = W_g^T [R, Cg] @ X_g[:, q0:q1]
				gg := gemm[T]{m: R, n: nq, k: Cg, a: w[g*Cg*R:], lda: R, ta: true,
					b: x[(n*C+g*Cg)*HW+q0:], ldb: HW, c: col, ldc: nq, alpha: 1}
				gg.run()
				parallelFor(Kg, 1, func(lo, hi int) {
					for kk := lo; kk < hi; kk++ {
						yp := y[(n*K+g*Kg+kk)*P : (n*K+g*Kg+kk+1)*P]
						for kh := 0; kh < KH; kh++ {
							for kw := 0; kw < KW; kw++ {
								src := col[((kk*KH+kh)*KW+kw)*nq : ((kk*KH+kh)*KW+kw+1)*nq]
								for q := q0; q < q1; q++ {
									ih, iw := q/W, q%W
									oh := ih*o.StrideH - o.PadT + kh*o.DilH
									ow := iw*o.StrideW - o.PadL + kw*o.DilW
									if oh >= 0 && oh < OH && ow >= 0 && ow < OW {
										yp[oh*OW+ow] += src[q-q0]
									}
								}
							}
						}
					}
				})
			}
		}
	}
}

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
