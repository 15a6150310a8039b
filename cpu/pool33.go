package cpu

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// maxPool33 runs a 3×3 stride-2 f32 MaxPool with a top and left padding
// of 0 (squeezenet's, in ceil mode or not) or 1 (ResNet's, after its
// first convolution) with the row kernels of mp33_amd64.s (mp33s2,
// AVX-512; mp33Y, AVX2): each output row from its three input rows in one
// pass (two where the window's first or last row is padding: the kernel
// reads the second one twice), the windows that reach past an edge in Go.
// It reports false where it does not apply. Before it, such a pool took a row copy, two Max passes and a
// strided horizontal max per output row.
func maxPool33(o *rt.Pool, x, y []float32) bool {
	NC, H, W, OH, OW := o.NC, o.H, o.W, o.OH, o.OW
	pt, pl := o.PadT, o.PadL
	if !mp33On || o.KH != 3 || o.KW != 3 || o.StrideH != 2 || o.StrideW != 2 || pt < 0 || pt > 1 || pl < 0 || pl > 1 || o.DilH != 1 || o.DilW != 1 {
		return false
	}
	if OH < 1 || OW < 1 || H < 3 || W < 3 || 2*(OH-1)-pt >= H || 2*(OW-1)-pl >= W || !maxPool33Rows(nil, nil, 0, 0, 0, 0) {
		return false
	}
	// Columns [pl, pl+nf) have windows inside the row, starting at input
	// column 2·ow - pl; rows [pt, hf) windows inside the plane.
	nf := max(0, min(OW, (W-3+pl)/2+1)-pl)
	hf := min(OH, (H-3+pt)/2+1)
	plane := func(c int) {
		xp := x[c*H*W : (c+1)*H*W]
		yp := y[c*OH*OW : (c+1)*OH*OW]
		switch {
		case pl == 0 && nf == OW && hf > pt:
			maxPool33Rows(yp[pt*OW:], xp[(2*pt-pt)*W:], hf-pt, W, 2*W, OW)
			if pt == 0 && hf == OH {
				// No window reaches past an edge (squeezenet's): the
				// loop below, a check an output, took about a third of
				// the AVX2 kernel's time on 256×27×27.
				return
			}
		case hf > pt && nf > 0 && maxPool33RowsLd(yp[pt*OW+pl:], xp[(2*pt-pt)*W+2*pl-pl:], hf-pt, W, 2*W, nf, OW):
			// The rows in one call, OW apart (AVX2).
		default:
			for oh := pt; oh < hf; oh++ {
				maxPool33Rows(yp[oh*OW+pl:oh*OW+pl+nf], xp[(2*oh-pt)*W+2*pl-pl:], 1, W, 2*W, nf)
			}
		}
		for oh := 0; oh < OH; oh++ {
			f0, f1 := pl, pl+nf // columns done by the kernel
			switch {
			case oh >= pt && oh < hf && f0 == 0 && f1 == OW:
				continue // the whole row from the kernel
			case oh < pt || oh >= hf:
				f0, f1 = 0, 0
				r0 := max(0, 2*oh-pt) // the window's first row inside the plane
				if r0+1 < H && nf > 0 {
					// Two input rows inside the plane.
					maxPool33Rows(yp[oh*OW+pl:oh*OW+pl+nf], xp[r0*W+pl:], 1, W, W, nf)
					f0, f1 = pl, pl+nf
				}
			}
			ow := 0
			if pl == 1 && f0 != 0 {
				// The left column's window is input columns 0 and 1
				// (ResNet's pool): inline, where maxWindow took a fifth
				// of the pool's time.
				m := float32(math.Inf(-1))
				for r := max(0, 2*oh-pt); r < min(H, 2*oh-pt+3); r++ {
					m = max(m, xp[r*W], xp[r*W+1])
				}
				yp[oh*OW] = m
				ow = 1
			}
			for ; ow < OW; ow++ {
				if ow == f0 && f1 > f0 {
					ow = f1 - 1
					continue
				}
				yp[oh*OW+ow] = maxWindow(xp, H, W, 2*oh-pt, 2*ow-pl, 3, 3)
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
// w0) of the H×W plane xp (h0 and w0 may be negative: padding), over its
// positions inside the plane.
func maxWindow(xp []float32, H, W, h0, w0, kh, kw int) float32 {
	m := float32(math.Inf(-1))
	j0, j1 := max(w0, 0), max(w0, 0, min(W, w0+kw))
	for i := max(h0, 0); i < min(H, h0+kh); i++ {
		for _, v := range xp[i*W+j0 : i*W+j1] {
			m = max(m, v) // NaN if either is
		}
	}
	return m
}
