//go:build amd64 && !purego

package cpu

//go:generate sh -c "/usr/bin/python3 mp33_amd64_gen.py > mp33_amd64.s"

//go:noescape
func mp33s2(y, x *float32, rows, w, off2, n int, masks uint64, ymask int)

//go:noescape
func mp33Y(y, x *float32, rows, w, off2, n, ldy int)

// maxPool33Rows pools 3×3 with stride 2: for r < rows and j < n,
// y[r*n+j] is the max (NaN when any is NaN) of x[2r*w + {0, w, off2} +
// 2j + {0, 1, 2}] (off2 is 2w, or w when the third row of the windows is
// past the plane; 2n < w). It reports false where there is no kernel.
func maxPool33Rows(y, x []float32, rows, w, off2, n int) bool {
	lv := kernelLevel()
	if lv < levelAVX2 {
		return false
	}
	if rows <= 0 || n <= 0 {
		return true
	}
	if 2*n >= w || (off2 != w && off2 != 2*w) {
		panic("cpu: maxPool33Rows: windows outside the row")
	}
	_ = y[rows*n-1]
	_ = x[2*(rows-1)*w+off2+2*n]
	if lv < levelAVX512 {
		mp33Y(&y[0], &x[0], rows, w, off2, n, n)
		return true
	}
	// The last step's masks: m outputs read columns [0, 2m] of it.
	m := n - 16*((n-1)/16)
	cnt := func(c int) uint64 { return uint64(1)<<min(max(c, 0), 16) - 1 }
	masks := cnt(2*m+1) | cnt(2*m+1-16)<<16 | cnt(2*m-1)<<32 | cnt(2*m-1-16)<<48
	mp33s2(&y[0], &x[0], rows, w, off2, n, masks, 1<<m-1)
	return true
}

// maxPool33RowsLd is maxPool33Rows with output rows ldy apart (y[r*ldy +
// j], ldy >= n), in one call at levelAVX2; elsewhere it reports false
// (AVX-512 keeps a call a row).
func maxPool33RowsLd(y, x []float32, rows, w, off2, n, ldy int) bool {
	if kernelLevel() != levelAVX2 {
		return false
	}
	if rows <= 0 || n <= 0 {
		return true
	}
	if 2*n >= w || (off2 != w && off2 != 2*w) || ldy < n {
		panic("cpu: maxPool33RowsLd: windows outside the row")
	}
	_ = y[(rows-1)*ldy+n-1]
	_ = x[2*(rows-1)*w+off2+2*n]
	mp33Y(&y[0], &x[0], rows, w, off2, n, ldy)
	return true
}
