package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func poolOp(o *rt.Pool) {
	if o.X.DType == rt.F64 {
		poolT[float64](o)
		return
	}
	if maxPoolF32(o) || avgPoolF32(o) {
		return
	}
	poolT[float32](o)
}

// avgPoolF32 runs an f32 AveragePool without dilation with the vector
// kernels, an output row at a time: the sum of its input rows (binary
// Add) in a row padded with zeros, the window sums along it (Adds of
// shifted runs; for stride 2, of the row's even and odd halves), then
// the division by each window's count (binary Div by a row of counts:
// the counts are the product of a row's and a column's). It reports
// whether it could (poolT, which sums in float64, runs the others).
func avgPoolF32(o *rt.Pool) bool {
	if o.Fn != rt.AvgPool || o.DilH != 1 || o.DilW != 1 || o.KW < 1 || o.KH < 1 || o.StrideH < 1 || o.StrideW < 1 {
		return false
	}
	if _, ok := sumF32(nil); !ok || !deinterleave2(nil, nil, nil) { // no vector kernels here
		return false
	}
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	if NC <= 0 || OH <= 0 || OW <= 0 {
		return true
	}
	x := lin[float32](o.X, NC*H*W)
	y := lin[float32](o.Y, NC*OH*OW)
	sw := o.StrideW
	// The window of output column ow covers buf[ow*sw, ow*sw+KW), input
	// columns from ow*sw - PadL; buf holds the input at [PadL, PadL+W).
	bufLen := max(o.PadL+W, sw*(OW-1)+o.KW)
	bufLen += bufLen % 2
	// counts[k*OW+ow]: the count of output column ow's windows over k
	// rows (k <= KH), as a float32 to divide by; zeroCount: some is 0.
	counts := make([]float32, (o.KH+1)*OW)
	zeroCount := false
	for ow := 0; ow < OW; ow++ {
		ws := ow*sw - o.PadL
		var cc int
		if o.CountIncludePad {
			cc = padCount(ws, 1, o.KW, -o.PadL, W+o.PadR)
		} else {
			lo, hi := validRange(ws, 1, W, o.KW)
			cc = hi - lo
		}
		for k := 0; k <= o.KH; k++ {
			counts[k*OW+ow] = float32(k * cc)
			zeroCount = zeroCount || k*cc == 0
		}
	}
	rowsFn := func(lo, hi int) {
		bs := getScratch[float32](bufLen + OW + 2*(bufLen/2))
		buf := (*bs)[:bufLen]
		acc := (*bs)[bufLen : bufLen+OW]
		ev := (*bs)[bufLen+OW : bufLen+OW+bufLen/2]
		od := (*bs)[bufLen+OW+bufLen/2 : bufLen+OW+bufLen]
		clear(buf)
		mid := buf[o.PadL : o.PadL+W]
		for r := lo; r < hi; r++ {
			c, oh := r/OH, r%OH
			xp := x[c*H*W : (c+1)*H*W]
			hs := oh*o.StrideH - o.PadT
			kh0, kh1 := validRange(hs, 1, H, o.KH)
			if kh0 >= kh1 {
				clear(mid)
			} else {
				copy(mid, xp[(hs+kh0)*W:(hs+kh0+1)*W])
				for kh := kh0 + 1; kh < kh1; kh++ {
					binaryF32(rt.Add, formVV, mid, mid, xp[(hs+kh)*W:(hs+kh+1)*W])
				}
			}
			yr := y[r*OW : (r+1)*OW]
			switch {
			case sw == 1:
				copy(acc, buf[:OW])
				for k := 1; k < o.KW; k++ {
					binaryF32(rt.Add, formVV, acc, acc, buf[k:k+OW])
				}
			case sw == 2:
				deinterleave2(ev, od, buf)
				copy(acc, ev[:OW])
				for k := 1; k < o.KW; k++ {
					h := ev
					if k%2 == 1 {
						h = od
					}
					binaryF32(rt.Add, formVV, acc, acc, h[k/2:k/2+OW])
				}
			default:
				for ow := range acc {
					var s float32
					for _, v := range buf[ow*sw : ow*sw+o.KW] {
						s += v
					}
					acc[ow] = s
				}
			}
			k := kh1 - kh0
			if o.CountIncludePad {
				k = padCount(hs, 1, o.KH, -o.PadT, H+o.PadB)
			}
			k = max(0, k)
			cnt := counts[k*OW : (k+1)*OW]
			binaryF32(rt.Div, formVV, yr, acc, cnt)
			if zeroCount {
				for i, v := range cnt {
					if v == 0 {
						yr[i] = 0
					}
				}
			}
		}
		putScratch(bs)
	}
	rows := NC * OH
	work := rows * (OW*o.KW + W*o.KH)
	if work < 1<<16 {
		rowsFn(0, rows)
	} else {
		parallelFor(rows, max(1, (1<<14)/max(OW*o.KW+W*o.KH, 1)), rowsFn)
	}
	return true
}

// maxPoolF32 runs an f32 MaxPool (no dilation, horizontal stride 1 or 2)
// with the vectorised kernels: for each output row, the element-wise max
// of its input rows (binary Max), written into a row padded with -Inf,
// then the max over each window along it (hmaxF32). It reports whether
// it could.
func maxPoolF32(o *rt.Pool) bool {
	if o.Fn != rt.MaxPool || o.DilH != 1 || o.DilW != 1 || (o.StrideW != 1 && o.StrideW != 2) || o.KW < 1 {
		return false
	}
	if !hmaxF32(nil, nil, 1, 1) {
		return false
	}
	if _, ok := sumF32(nil); !ok { // no vector kernels on this CPU
		return false
	}
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	x := lin[float32](o.X, NC*H*W)
	y := lin[float32](o.Y, NC*OH*OW)
	if maxPool22(o, x, y) || maxPool33(o, x, y) {
		return true
	}
	if maxPoolTiled(o, x, y) {
		return true
	}
	bufLen := max(o.PadL+W, o.StrideW*OW+o.KW) + 64
	work := NC * OH * (OW*o.KW + W*o.KH)
	if work < 1<<16 {
		maxPoolRows(o, x, y, bufLen, 0, NC*OH)
		return true
	}
	parallelFor(NC*OH, max(1, (1<<14)/max(OW*o.KW+W*o.KH, 1)), func(lo, hi int) { maxPoolRows(o, x, y, bufLen, lo, hi) })
	return true
}

// maxPool22 runs a 2×2 stride-2 MaxPool without padding (LeNet's) with
// the row-pair kernel: each output row from its two input rows in one
// pass, the planes of an even height as one run of row pairs. It reports
// false where it does not apply.
func maxPool22(o *rt.Pool, x, y []float32) bool {
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	if o.KH != 2 || o.KW != 2 || o.StrideH != 2 || o.StrideW != 2 || o.PadT != 0 || o.PadL != 0 || o.PadB != 0 || o.PadR != 0 {
		return false
	}
	if OH < 1 || OW < 1 || 2*OH > H || 2*OW > W || !maxPool22Rows(nil, nil, 0, 0, 0, 0) {
		return false
	}
	if H == 2*OH {
		// Row pair r of the [NC·H, W] view is output row r of the [NC·OH, OW] one.
		rows := NC * OH
		run := func(lo, hi int) { maxPool22Rows(y[lo*OW:hi*OW], x[lo*2*W:], hi-lo, W, OW, 2*W) }
		if rows*OW < 1<<14 {
			run(0, rows)
		} else {
			parallelFor(rows, max(1, (1<<13)/OW), run)
		}
		return true
	}
	run := func(lo, hi int) {
		for c := lo; c < hi; c++ {
			maxPool22Rows(y[c*OH*OW:(c+1)*OH*OW], x[c*H*W:], OH, W, OW, 2*W)
		}
	}
	if NC*OH*OW < 1<<14 {
		run(0, NC)
	} else {
		parallelFor(NC, max(1, (1<<13)/(OH*OW)), run)
	}
	return true
}

// maxPoolTiled runs a MaxPool whose windows tile each row without
// padding (KW == StrideW, W == StrideW·OW, no padding, every window inside
// the plane), the common 2×2 stride 2: the horizontal maxima of a block of
// planes in one hmaxF32 call over the block (the windows never straddle two
// rows), then each output row as the Max of its KH rows of those. It
// reports false where it does not apply.
func maxPoolTiled(o *rt.Pool, x, y []float32) bool {
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	sh, sw := o.StrideH, o.StrideW
	if o.PadT != 0 || o.PadL != 0 || o.PadB != 0 || o.PadR != 0 || o.KW != sw || W != sw*OW || (OH-1)*sh+o.KH > H || OW == 0 || o.KH < 1 {
		return false
	}
	// Planes per block: about 16k inputs; hmaxF32 reads whole vectors
	// past a block, so the last planes go through the row path when x
	// ends there.
	per := max(1, (1<<14)/(H*W))
	tail := (sw*OW + o.KW + 64 + H*W - 1) / (H * W) // planes of slack hmaxF32 needs
	full := max(0, NC-tail)
	nb := (full + per - 1) / per
	block := func(c0, c1 int) {
		ts := getScratch[float32]((c1 - c0) * H * OW)
		t := *ts
		hmaxF32(t, x[c0*H*W:], o.KW, sw)
		for c := c0; c < c1; c++ {
			tp := t[(c-c0)*H*OW : (c-c0+1)*H*OW]
			for oh := 0; oh < OH; oh++ {
				yr := y[(c*OH+oh)*OW : (c*OH+oh+1)*OW]
				r0 := tp[oh*sh*OW : (oh*sh+1)*OW]
				if o.KH == 1 {
					copy(yr, r0)
					continue
				}
				binaryF32(rt.Max, formVV, yr, r0, tp[(oh*sh+1)*OW:(oh*sh+2)*OW])
				for kh := 2; kh < o.KH; kh++ {
					binaryF32(rt.Max, formVV, yr, yr, tp[(oh*sh+kh)*OW:(oh*sh+kh+1)*OW])
				}
			}
		}
		putScratch(ts)
	}
	if nb > 0 {
		parallelFor(nb, 1, func(lo, hi int) {
			for b := lo; b < hi; b++ {
				block(b*per, min(full, (b+1)*per))
			}
		})
	}
	if full < NC {
		bufLen := max(o.PadL+W, sw*OW+o.KW) + 64
		maxPoolRows(o, x, y, bufLen, full*OH, NC*OH)
	}
	return true
}

// maxPoolRows computes the output rows [lo, hi) of all planes (row r is
// row r%OH of plane r/OH).
func maxPoolRows(o *rt.Pool, x, y []float32, bufLen, lo, hi int) {
	H, W, OH, OW := o.H, o.W, o.OH, o.OW
	bs := getScratch[float32](bufLen)
	buf := *bs
	ninf := float32(math.Inf(-1))
	for i := range buf {
		buf[i] = ninf
	}
	mid := buf[o.PadL : o.PadL+W]
	for r := lo; r < hi; r++ {
		c, oh := r/OH, r%OH
		xp := x[c*H*W : (c+1)*H*W]
		hs := oh*o.StrideH - o.PadT
		kh0, kh1 := validRange(hs, 1, H, o.KH)
		if kh0 >= kh1 {
			for i := range mid {
				mid[i] = ninf
			}
		} else {
			copy(mid, xp[(hs+kh0)*W:(hs+kh0+1)*W])
			for kh := kh0 + 1; kh < kh1; kh++ {
				binaryF32(rt.Max, formVV, mid, mid, xp[(hs+kh)*W:(hs+kh+1)*W])
			}
		}
		hmaxF32(y[r*OW:(r+1)*OW], buf, o.KW, o.StrideW)
	}
	putScratch(bs)
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
