package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// maxPool33 runs a 3×3 stride-2 f32 MaxPool without top or left padding
// (squeezenet's, in ceil mode or not) with the row kernel of
// mp33_amd64.s: each output row from its three input rows in one pass,
// the windows that reach past the right or bottom edge (ceil mode) in Go.
// It reports false where it does not apply. Before it, such a pool took
// a row copy, two Max passes and a strided horizontal max per output row.
func maxPool33(o *rt.Pool, x, y []float32) bool {
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	if !mp33On || o.KH != 3 || o.KW != 3 || o.StrideH != 2 || o.StrideW != 2 || o.PadT != 0 || o.PadL != 0 || o.DilH != 1 || o.DilW != 1 {
		return false
	}
	if OH < 1 || OW < 1 || H < 3 || W < 3 || 2*(OH-1) >= H || 2*(OW-1) >= W || !maxPool33Rows(nil, nil, 0, 0, 0, 0) {
		return false
	}
	nf := min(OW, (W-3)/2+1) // columns whose windows are inside the row
	hf := min(OH, (H-3)/2+1) // rows whose windows are inside the plane
	plane := func(c int) {
		xp := x[c*H*W : (c+1)*H*W]
		yp := y[c*OH*OW : (c+1)*OH*OW]
		if nf == OW {
			maxPool33Rows(yp, xp, hf, W, 2*W, OW)
		} else {
			for oh := 0; oh < hf; oh++ {
				maxPool33Rows(yp[oh*OW:oh*OW+nf], xp[2*oh*W:], 1, W, 2*W, nf)
			}
		}
		for oh := 0; oh < OH; oh++ {
			ow0 := nf
			if oh >= hf {
				ow0 = 0
				if 2*oh+1 < H && nf > 0 {
					// Two input rows left.
					maxPool33Rows(yp[oh*OW:oh*OW+nf], xp[2*oh*W:], 1, W, W, nf)
					ow0 = nf
				}
			}
			for ow := ow0; ow < OW; ow++ {
				yp[oh*OW+ow] = maxWindow(xp, H, W, 2*oh, 2*ow, 3, 3)
			}
		}
	}
	if NC*OH*OW < 1<<13 {
		for c := 0; c < NC; c++ {
			plane(c)
		}
		return true
	}
	parallelFor(NC, max(1, (1<<13)/(OH*OW)), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			plane(c)
		}
	})
	return true
}

// mp33On routes 3×3 stride-2 max pools through maxPool33 (benchmarks
// switch it off to compare: VRUN_CPU_MP33=0).
var mp33On = true

// maxWindow is the max (NaN when any is NaN) of the kh×kw window at (h0,
// w0) of the H×W plane xp, over its positions inside the plane.
func maxWindow(xp []float32, H, W, h0, w0, kh, kw int) float32 {
	m := float32(math.Inf(-1))
	for i := h0; i < min(H, h0+kh); i++ {
		for j := w0; j < min(W, w0+kw); j++ {
			v := xp[i*W+j]
			if v != v {
				return v
			}
			m = max(m, v)
		}
	}
	return m
}
