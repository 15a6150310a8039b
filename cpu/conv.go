package cpu

import (
	"github.com/vrun-go/vrun/rt"
)

// colLimit bounds the col2im scratch matrix of ConvTranspose, in elements.
const colLimit = 1 << 22

func convOp(o *rt.Conv) {
	if o.Res.Buf != nil {
		convOpRes(o)
		return
	}
	byFloat(o.X.DType, o, convT[float64], convT[float32])
}

// ceilDiv is ceil(a/b) for b > 0 and any a.
func ceilDiv(a, b int) int {
	if a >= 0 {
		return (a + b - 1) / b
	}
	return -((-a) / b)
}

// phaseSpan gives the columns [lo, hi) of a stride-s phase plane row (wq
// columns; column v reads input column v·s + b - padL) that read one of
// the W real input columns, and the input column iw0 that column lo reads.
func phaseSpan(W, wq, padL, b, s int) (lo, hi, iw0 int) {
	lo = min(max(0, ceilDiv(padL-b, s)), wq)
	hi = max(lo, min(wq, ceilDiv(W+padL-b, s)))
	return lo, hi, lo*s + b - padL
}

// phaseRow zeroes the padding of a phase plane row that reads input row
// ih (of H) in columns [lo, hi) and returns row[lo:hi] for the caller to
// fill, or nil when the whole row is padding.
func phaseRow[T any](row []T, ih, H, lo, hi int) []T {
	if ih < 0 || ih >= H || hi == lo {
		clear(row)
		return nil
	}
	clear(row[:lo])
	clear(row[hi:])
	return row[lo:hi]
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
	N, C, H, W := o.N, o.C, o.H, o.Width
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
	if x32, ok := asF32(x); ok {
		// The f32 fast paths: the 3×3 depthwise kernel, Winograd, direct loops.
		w32, _ := asF32(w)
		b32, _ := asF32(bias)
		y32, _ := asF32(y)
		wk := useWino(o)
		switch {
		case dw3Applies(o):
			dw3Conv(o, x32, w32, b32, y32)
			return
		case wk != nil:
			winoConv(o, wk, x32, w32, b32, y32)
			return
		case useOcw(o):
			ocwConv(o, x32, w32, b32, y32)
			return
		case useDirectConv(o):
			directConv(o, x32, w32, b32, y32)
			return
		}
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
				if KW == 3 && o.StrideW == 1 {
					dw3(o, xp, yp, wk)
					actApply(o.Act.Fn, o.Act.Alpha, o.Act.Beta, yp)
					continue
				}
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
	// The im2col matrix of one image and group, CKK × P, is materialised
	// when it is small enough (row by row: contiguous copies), so that the
	// GEMM reads B in place; otherwise the GEMM packs its B panels straight
	// from the input.
	if int64(CKK)*int64(P) <= im2colLimit {
		cs := getScratch[T](CKK * P)
		col := *cs
		for n := 0; n < N; n++ {
			for g := 0; g < G; g++ {
				xg := x[(n*C+g*Cg)*H*W : (n*C+(g+1)*Cg)*H*W]
				if CKK*P < 1<<15 {
					im2colRows(o, xg, col, 0, CKK)
				} else {
					parallelFor(CKK, max(1, (1<<14)/P), func(lo, hi int) { im2colRows(o, xg, col, lo, hi) })
				}
				gg := g0
				gg.n, gg.k = P, CKK
				gg.a = w[g*Kg*CKK:]
				gg.b, gg.ldb = col, P
				gg.c = y[(n*K+g*Kg)*P:]
				gg.boff = g * Kg
				gg.run()
			}
		}
		putScratch(cs)
		return
	}
	for n := 0; n < N; n++ {
		for g := 0; g < G; g++ {
			gg := g0
			gg.n, gg.k = P, CKK
			gg.a = w[g*Kg*CKK:]
			gg.bpack = im2colPacker(o, x[(n*C+g*Cg)*H*W:(n*C+(g+1)*Cg)*H*W])
			gg.c = y[(n*K+g*Kg)*P:]
			gg.boff = g * Kg
			gg.run()
		}
	}
}

// im2colLimit is the largest im2col matrix, in elements, that convolutions
// materialise (16 MiB of f32).
const im2colLimit = 1 << 22

// im2colRows writes rows [r0, r1) of the im2col matrix of one image and
// group, xg (Cg planes of H×W), into col (CKK × OH·OW): row r = (c*KH +
// kh)*KW + kw, column oh*OW + ow holds xg[c][oh*sh-pt+kh*dh][ow*sw-pl+kw*dw],
// or 0 in the padding.
func im2colRows[T floatT](o *rt.Conv, xg, col []T, r0, r1 int) {
	H, W, OH, OW, KH, KW := o.H, o.Width, o.OH, o.OW, o.KH, o.KW
	P := OH * OW
	sh, sw := o.StrideH, o.StrideW
	for r := r0; r < r1; r++ {
		c, kh, kw := r/(KH*KW), (r/KW)%KH, r%KW
		xc := xg[c*H*W : (c+1)*H*W]
		dst := col[r*P : (r+1)*P]
		iw0 := kw*o.DilW - o.PadL
		// ow in [lo, hi) reads inside the row.
		lo := min(max(0, ceilDiv(-iw0, sw)), OW)
		hi := max(lo, min(OW, ceilDiv(W-iw0, sw)))
		for oh := 0; oh < OH; oh++ {
			d := dst[oh*OW : (oh+1)*OW]
			ih := oh*sh - o.PadT + kh*o.DilH
			if ih < 0 || ih >= H {
				clear(d)
				continue
			}
			xr := xc[ih*W : (ih+1)*W]
			clear(d[:lo])
			clear(d[hi:])
			if hi == lo {
				continue
			}
			switch sw {
			case 1:
				copy(d[lo:hi], xr[iw0+lo:iw0+hi])
			default:
				if sw == 2 {
					off := c*H*W + ih*W + iw0 + 2*lo
					d32, ok := asF32(d[lo:hi])
					if x32, _ := asF32(xg[min(off, len(xg)):]); ok && len(x32) >= 2*(hi-lo)+65 && hmaxF32(d32, x32, 1, 2) {
						continue
					}
				}
				for i := lo; i < hi; i++ {
					d[i] = xr[iw0+i*sw]
				}
			}
		}
	}
}

// im2colPacker returns a GEMM B-panel packer for the im2col matrix of one
// image and group, xg (Cg planes of H×W): B(r, q) with r = (c*KH+kh)*KW+kw
// and q = oh*OW+ow is xg[c][oh*sh-pt+kh*dh][ow*sw-pl+kw*dw], or 0 in the
// padding.
func im2colPacker[T floatT](o *rt.Conv, xg []T) func(dst []T, p0, kc, j0, nr int) {
	H, W, OW, KH, KW := o.H, o.Width, o.OW, o.KH, o.KW
	P := o.OH * OW
	sh, sw := o.StrideH, o.StrideW
	return func(dst []T, p0, kc, j0, nr int) {
		// The panel's columns j0..j0+nv split into runs along output rows.
		type run struct{ off, n, ihb, iwb int }
		var runs [64]run
		nv := min(nr, P-j0)
		nrun := 0
		for q := j0; q < j0+nv; {
			oh, ow := q/OW, q%OW
			end := min(j0+nv, q+OW-ow)
			runs[nrun] = run{q - j0, end - q, oh*sh - o.PadT, ow*sw - o.PadL}
			nrun++
			q = end
		}
		c, kh, kw := p0/(KH*KW), (p0/KW)%KH, p0%KW
		for p := 0; p < kc; p++ {
			d := dst[p*nr : p*nr+nr]
			xc := xg[c*H*W : (c+1)*H*W]
			dh, dw := kh*o.DilH, kw*o.DilW
			for _, rn := range runs[:nrun] {
				dr := d[rn.off : rn.off+rn.n]
				ih := rn.ihb + dh
				if ih < 0 || ih >= H {
					clear(dr)
					continue
				}
				xr := xc[ih*W : ih*W+W]
				iw0 := rn.iwb + dw
				if sw == 1 {
					if iw0 >= 0 && iw0+rn.n <= W {
						copy(dr, xr[iw0:iw0+rn.n])
						continue
					}
					// dr[i] = xr[iw0+i] where 0 <= iw0+i < W.
					lo := min(max(0, -iw0), rn.n)
					hi := max(lo, min(rn.n, W-iw0))
					clear(dr[:lo])
					if hi > lo {
						copy(dr[lo:hi], xr[iw0+lo:iw0+hi])
					}
					clear(dr[hi:])
					continue
				}
				if sw == 2 {
					// dr[i] = xr[iw0+2i] where in the row: the even
					// elements, vectorised when whole vectors can be read
					// past the row (within the group's planes).
					lo := min(max(0, (-iw0+1)/2), rn.n)
					hi := max(lo, min(rn.n, (W-iw0+1)/2))
					off := c*H*W + ih*W + iw0 + 2*lo
					d32, ok := asF32(dr[lo:hi])
					if x32, _ := asF32(xg[min(off, len(xg)):]); ok && hi > lo && len(x32) >= 2*(hi-lo)+65 && hmaxF32(d32, x32, 1, 2) {
						clear(dr[:lo])
						clear(dr[hi:])
						continue
					}
				}
				for i := range dr {
					if iw := iw0 + i*sw; iw >= 0 && iw < W {
						dr[i] = xr[iw]
					} else {
						dr[i] = 0
					}
				}
			}
			if nv < nr {
				clear(d[nv:])
			}
			if kw++; kw == KW {
				kw = 0
				if kh++; kh == KH {
					kh = 0
					c++
				}
			}
		}
	}
}

// dw3 adds a depthwise convolution with KW == 3 and StrideW == 1 of the
// plane xp into yp: one pass per (output row, kernel row) with the three
// taps fused, bounds-check-free in the interior and tap by tap at the
// edges.
func dw3[T floatT](o *rt.Conv, xp, yp, wk []T) {
	H, W, OW := o.H, o.Width, o.OW
	off0, off1, off2 := -o.PadL, o.DilW-o.PadL, 2*o.DilW-o.PadL
	// Interior: 0 <= ow+off0 and ow+off2 < W.
	a := min(max(0, -off0), OW)
	b := max(a, min(OW, W-off2))
	for kh := 0; kh < o.KH; kh++ {
		oh0, oh1 := validRange(kh*o.DilH-o.PadT, o.StrideH, H, o.OH)
		w0, w1, w2 := wk[kh*3], wk[kh*3+1], wk[kh*3+2]
		for oh := oh0; oh < oh1; oh++ {
			ih := oh*o.StrideH - o.PadT + kh*o.DilH
			xr := xp[ih*W : ih*W+W]
			yr := yp[oh*OW : oh*OW+OW]
			if b > a {
				ys := yr[a:b]
				x0 := xr[a+off0 : b+off0]
				x1 := xr[a+off1 : b+off1]
				x2 := xr[a+off2 : b+off2]
				x0, x1, x2 = x0[:len(ys)], x1[:len(ys)], x2[:len(ys)]
				for i := range ys {
					ys[i] += w0*x0[i] + w1*x1[i] + w2*x2[i]
				}
			}
			for ow := 0; ow < OW; ow++ {
				if ow == a && b > a {
					ow = b - 1
					continue
				}
				var s T
				if iw := ow + off0; iw >= 0 && iw < W {
					s += w0 * xr[iw]
				}
				if iw := ow + off1; iw >= 0 && iw < W {
					s += w1 * xr[iw]
				}
				if iw := ow + off2; iw >= 0 && iw < W {
					s += w2 * xr[iw]
				}
				yr[ow] += s
			}
		}
	}
}

func convTransposeOp(o *rt.ConvTranspose) {
	byFloat(o.X.DType, o, convTransposeT[float64], convTransposeT[float32])
}

func convTransposeT[T floatT](o *rt.ConvTranspose) {
	N, C, H, W := o.N, o.C, o.H, o.Width
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
