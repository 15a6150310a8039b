//go:build amd64 && !purego

package cpu

import (
	"math/bits"
	"unsafe"
)

//go:generate sh -c "/usr/bin/python3 dconv_amd64_gen.py > dconv_amd64.s && /usr/bin/python3 dconv_amd64_gen.py -decl | gofmt > dconvdecl_gen.go"

// dconvMaxKB is the most output rows one direct-convolution kernel call
// computes (0 where there are none).
func dconvMaxKB() int {
	switch lv := kernelLevel(); {
	case lv >= levelAVX512:
		return len(dconvKernels)
	case lv == levelAVX2:
		return len(dconvKernelsA)
	}
	return 0
}

// dconvRun sets y[k*ldy+q] = bias[k] + sum over t of w[t*kb+k] *
// x[q+offs[t]] for k < kb and q < n with the AVX-512 kernels of
// dconv_amd64.s or the AVX2 ones of dconv_avx2_amd64.s (1 <= kb <=
// dconvMaxKB(), len(offs) >= 1).
func dconvRun(kb, n int, x []float32, offs []int, w, bias, y []float32, ldy int) {
	if n <= 0 {
		return
	}
	hi := maxOffset("dconvRun", offs)
	_ = x[hi+n-1]
	_ = w[len(offs)*kb-1]
	_ = bias[kb-1]
	_ = y[(kb-1)*ldy+n-1]
	k := dconvKernels[kb-1]
	if kernelLevel() < levelAVX512 {
		k = dconvKernelsA[kb-1]
	}
	k(n, &x[0], &offs[0], len(offs), &w[0], &bias[0], &y[0], ldy)
}

// maxOffset returns the largest tap offset of offs. The assembly indexes x
// with them unchecked, so a negative one is a bug in the caller (who).
func maxOffset(who string, offs []int) int {
	hi := 0
	for _, o := range offs {
		if o < 0 {
			panic("cpu: " + who + ": negative offset")
		}
		hi = max(hi, o)
	}
	return hi
}

// dcwMaxKB returns the most output rows one wide direct-convolution
// kernel call computes with blocks of u vectors (2 or 4; 0 where there
// are no kernels) of dcwLanes() lanes.
func dcwMaxKB(u int) int {
	switch lv := kernelLevel(); {
	case lv >= levelAVX512 && u == 4:
		return len(dcwKernels4)
	case lv >= levelAVX512:
		return len(dcwKernels2)
	case lv == levelAVX2 && u == 4:
		return len(dcwKernelsA4)
	case lv == levelAVX2:
		return len(dcwKernelsA2)
	}
	return 0
}

// dcwLanes is the lanes of the wide kernels' vectors: 16 with AVX-512, 8
// with AVX2.
func dcwLanes() int {
	if kernelLevel() >= levelAVX512 {
		return 16
	}
	return 8
}

// dcwRun computes rows rows of n outputs of kb output channels: for r <
// rows, k < kb and q < n, y[k*ldy + r*ldyr + q] = bias[k] (or, when acc,
// its value before) + sum over t of w[k*ldw+t] * x[r*ldxr + q + offs[t]],
// clamped to [lo, hi] when clamp,
// with the AVX-512 kernels of dconv_amd64.s (or the AVX2 ones of
// dconv_avx2_amd64.s) that take u vectors a block (1 <= kb <=
// dcwMaxKB(u), len(offs) >= 1, rows >= 1).
func dcwRun(u, kb, n int, x []float32, offs []int, w []float32, ldw int, bias, y []float32, ldy int, clamp, acc bool, lo, hi float32, rows, ldxr, ldyr int) {
	if n <= 0 || rows <= 0 {
		return
	}
	dcwRunHi(u, kb, n, x, offs, maxOffset("dcwRun", offs), w, ldw, bias, y, ldy, clamp, acc, lo, hi, rows, ldxr, ldyr)
}

// dcwRunHi is dcwRun with hiOff, a bound on offs (no smaller than any,
// all of which the caller has checked to be >= 0), given: a direct
// convolution's plan computes it once for all its calls, where the scan
// of thousands of taps on every call cost about 5 % of ResNet-18's run.
func dcwRunHi(u, kb, n int, x []float32, offs []int, hiOff int, w []float32, ldw int, bias, y []float32, ldy int, clamp, acc bool, lo, hi float32, rows, ldxr, ldyr int) {
	dcwRunGap(u, kb, n, x, offs, hiOff, w, ldw, bias, y, ldy, clamp, acc, lo, hi, rows, ldxr, ldyr, nil)
}

// dcwRunGap is dcwRunHi that, given a gap table (gapTable, AVX-512 and
// rows = 1 only), stores the outputs of each vector compressed: the n
// outputs are a flat run over rows of wq, of which the first ow are
// real, and only those are stored, rows ow apart in y (y[k*ldy +
// r*ow + c] for output q = r*wq + c); acc reads y the same way.
func dcwRunGap(u, kb, n int, x []float32, offs []int, hiOff int, w []float32, ldw int, bias, y []float32, ldy int, clamp, acc bool, lo, hi float32, rows, ldxr, ldyr int, tab []uint64) {
	if n <= 0 || rows <= 0 {
		return
	}
	nt := len(offs)
	_ = x[(rows-1)*ldxr+hiOff+n-1]
	_ = w[(kb-1)*ldw+nt-1]
	_ = bias[kb-1]
	c := 0
	if clamp {
		c |= 1
	}
	if acc {
		c |= 2
	}
	var tp *uint64
	if tab != nil {
		if rows != 1 || kernelLevel() < levelAVX512 || len(tab) < (n+15)/16 {
			panic("cpu: dcwRunGap: a gap table needs AVX-512, one row and an entry a vector")
		}
		// The last real output, from the last vector's entry.
		e := tab[(n-1)/16]
		m := uint16(e) & uint16(1<<((n-1)%16+1)-1)
		_ = y[(kb-1)*ldy+max(0, int(int32(e>>32))+bits.OnesCount16(m)-1)]
		c |= 4
		tp = &tab[0]
	} else {
		_ = y[(kb-1)*ldy+(rows-1)*ldyr+n-1]
	}
	var k dcwKernel
	switch avx512 := kernelLevel() >= levelAVX512; {
	case avx512 && u == 4:
		k = dcwKernels4[kb-1]
	case avx512:
		k = dcwKernels2[kb-1]
	case u == 4:
		k = dcwKernelsA4[kb-1]
	default:
		k = dcwKernelsA2[kb-1]
	}
	k(n, &x[0], &offs[0], nt, &w[0], ldw, &bias[0], &y[0], ldy, c, lo, hi, rows, ldxr, ldyr, tp)
}

// dw3Plane computes a depthwise 3×3 convolution of one plane with stride
// s (1 or 2) and one row and column of padding at the top and left:
// y[o*n+i] = clamp(bias + sum over r, k < 3 of w[3r+k] * X[s*o+r-1][s*i+k-1],
// lo, hi) for o < oh and i < n = len(y)/oh, X being x (h rows of width
// elements) inside the plane and 0 outside; zero holds width zeros. It
// reports false where there is no kernel (AVX-512, or AVX2 with
// dw_amd64.s's).
func dw3Plane(s int, y, x, zero, w []float32, width, h, oh int, bias, lo, hi float32) bool {
	lv := kernelLevel()
	if lv < levelAVX2 || (s != 1 && s != 2) {
		return false
	}
	if oh <= 0 || len(y) == 0 {
		return true
	}
	n := len(y) / oh
	_ = y[oh*n-1]
	_ = x[h*width-1]
	_ = zero[width-1]
	_ = w[8]
	switch {
	case lv >= levelAVX512 && s == 1:
		dw3s1(&y[0], n, &x[0], &zero[0], &w[0], width, bias, lo, hi, h, oh)
	case lv >= levelAVX512:
		dw3s2(&y[0], n, &x[0], &zero[0], &w[0], width, bias, lo, hi, h, oh)
	case s == 1:
		dw3s1Y(&y[0], n, &x[0], &zero[0], &w[0], width, bias, lo, hi, h, oh)
	default:
		dw3s2Y(&y[0], n, &x[0], &zero[0], &w[0], width, bias, lo, hi, h, oh)
	}
	return true
}

// maxPool22Rows pools row pairs 2×2 with stride 2: for r < rows and j <
// n, y[r*n+j] is the max (NaN when any is NaN) of x[r*ldx + 2j + {0, 1}]
// and x[r*ldx + width + 2j + {0, 1}] (2n <= width). It reports false
// where there is no kernel.
func maxPool22Rows(y, x []float32, rows, width, n, ldx int) bool {
	lv := kernelLevel()
	if lv < levelAVX2 {
		return false
	}
	if rows <= 0 || n <= 0 {
		return true
	}
	_ = y[rows*n-1]
	_ = x[(rows-1)*ldx+width+2*n-1]
	if lv >= levelAVX512 {
		mp22(&y[0], &x[0], rows, width, n, ldx)
	} else {
		mp22Y(&y[0], &x[0], rows, width, n, ldx)
	}
	return true
}

// deinterleave2 sets even[i] = src[2i] and odd[i] = src[2i+1] for i <
// len(even) == len(odd), and reports whether a kernel did it.
func deinterleave2(even, odd, src []float32) bool {
	n := len(even)
	lv := kernelLevel()
	if lv < levelAVX2 || len(odd) != n {
		return false
	}
	if n == 0 {
		return true
	}
	_ = src[2*n-1]
	if lv >= levelAVX512 {
		deint2(&even[0], &odd[0], &src[0], n)
	} else {
		deint2Y(&even[0], &odd[0], &src[0], n)
	}
	return true
}

// gemvAxpyAsm adds sum over p < len(x) of x[p]·mat[p*ld+j] to acc[j] for
// j in [j0, j1), streaming mat row by row, eight rows a pass (AVX-512 or
// AVX2+FMA), and reports whether the kernels apply.
func gemvAxpyAsm[T floatT](x, mat []T, ld int, acc []T, j0, j1 int) bool {
	if !gemvAxpyFast() {
		return false
	}
	k, n := len(x), j1-j0
	if n <= 0 || k == 0 {
		return true
	}
	_ = mat[(k-1)*ld+j1-1]
	_ = acc[j1-1]
	var z T
	f64 := unsafe.Sizeof(z) == 8
	k8, k1 := gemvAcc8S, gemvAcc1S
	d8, d1 := gemvAcc8D, gemvAcc1D
	if kernelLevel() < levelAVX512 {
		k8, k1 = gemvAcc8SY, gemvAcc1SY
		d8, d1 = gemvAcc8DY, gemvAcc1DY
	}
	p := 0
	for ; p+8 <= k; p += 8 {
		if f64 {
			d8((*float64)(unsafe.Pointer(&acc[j0])), (*float64)(unsafe.Pointer(&mat[p*ld+j0])), ld, (*float64)(unsafe.Pointer(&x[p])), n)
		} else {
			k8((*float32)(unsafe.Pointer(&acc[j0])), (*float32)(unsafe.Pointer(&mat[p*ld+j0])), ld, (*float32)(unsafe.Pointer(&x[p])), n)
		}
	}
	for ; p < k; p++ {
		if f64 {
			d1((*float64)(unsafe.Pointer(&acc[j0])), (*float64)(unsafe.Pointer(&mat[p*ld+j0])), ld, (*float64)(unsafe.Pointer(&x[p])), n)
		} else {
			k1((*float32)(unsafe.Pointer(&acc[j0])), (*float32)(unsafe.Pointer(&mat[p*ld+j0])), ld, (*float32)(unsafe.Pointer(&x[p])), n)
		}
	}
	return true
}

// gemvAxpyFast reports whether gemvAxpyAsm has kernels here.
func gemvAxpyFast() bool { return kernelLevel() >= levelAVX2 }

// interleave2 sets dst[2i] = a[i] and dst[2i+1] = b[i] for i < len(a) ==
// len(b) (len(dst) >= 2·len(a)), and reports whether a kernel did it.
func interleave2(dst, a, b []float32) bool {
	n := len(a)
	lv := kernelLevel()
	if lv < levelAVX2 || len(b) != n {
		return false
	}
	if n == 0 {
		return true
	}
	_ = dst[2*n-1]
	if lv >= levelAVX512 {
		int2(&dst[0], &a[0], &b[0], n)
	} else {
		int2Y(&dst[0], &a[0], &b[0], n)
	}
	return true
}
