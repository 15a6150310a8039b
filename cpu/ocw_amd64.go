//go:build amd64 && !purego

package cpu

//go:generate sh -c "/usr/bin/python3 ocw_amd64_gen.py > ocw_amd64.s && /usr/bin/python3 ocw_amd64_gen.py -decl | gofmt > ocwdecl_gen.go"
//go:generate sh -c "/usr/bin/python3 ocw_amd64_gen.py -avx2 > ocw_avx2_amd64.s && /usr/bin/python3 ocw_amd64_gen.py -avx2decl | gofmt > ocwavx2decl_gen.go"

// ocwMaxP returns the most positions one channels-in-lanes kernel call
// computes with nv vectors of output channels (1 to 4; 0 where there are
// no kernels; with AVX2 there are kernels for one vector only).
func ocwMaxP(nv int) int {
	switch lv := kernelLevel(); {
	case lv == levelAVX2 && nv == 1:
		return len(ocwKernelsA)
	case lv < levelAVX512 || nv < 1 || nv > len(ocwKernels):
		return 0
	}
	return len(ocwKernels[nv-1])
}

// ocwMaxV is the most vectors of 16 output channels of a block: 4 with
// AVX-512, 1 with AVX2.
func ocwMaxV() int {
	if kernelLevel() >= levelAVX512 {
		return len(ocwKernels)
	}
	return 1
}

// ocwRun computes one tile of a channels-in-lanes convolution for output
// channels k < kb (kb <= 16·nv; the weights packed [tap][16·nv], bias
// 16·nv) and positions j < np: s[j][k] = a[j][k] + sum over t of
// w[t*16nv + k] * x[offs[t] + j], a being bias[k] when first, else the
// partial sums acc[j*16nv + k] of earlier taps; when last, y[k*ldy + j] =
// s[j][k] (clamped to [lo, hi] when clamp), else acc[j*16nv + k] =
// s[j][k]. It runs the AVX-512 kernels of ocw_amd64.s or the AVX2 ones of
// ocw_avx2_amd64.s (1 <= np <= ocwMaxP(nv), len(offs) >= 1); hiOff is
// maxOffset(offs), which the caller computes once.
func ocwRun(nv, kb, np int, x []float32, offs []int, hiOff int, w, bias, acc []float32, first, last bool, y []float32, ldy int, clamp bool, lo, hi float32) {
	nt := len(offs)
	_ = x[hiOff+np-1]
	_ = w[nt*16*nv-1]
	_ = bias[16*nv-1]
	if kb <= 16*(nv-1) || kb > 16*nv {
		panic("cpu: ocwRun: channel count outside the block")
	}
	flags := 0
	if clamp {
		flags |= 1
	}
	if !first {
		flags |= 2
	}
	if kernelLevel() < levelAVX512 {
		ocwRunA(kb, np, x, offs, w, bias, acc, first, last, y, ldy, clamp, lo, hi)
		return
	}
	yp, ap := &bias[0], &bias[0]
	if last {
		flags |= 4
		_ = y[(kb-1)*ldy+np-1]
		yp = &y[0]
	}
	if !first || !last {
		_ = acc[np*16*nv-1]
		ap = &acc[0]
	}
	mask := 1<<(kb-16*(nv-1)) - 1
	ocwKernels[nv-1][np-1](&x[0], &offs[0], nt, &w[0], &bias[0], ap, yp, ldy, mask, flags, lo, hi)
}

// ocwRunA is ocwRun with the AVX2 kernels (one vector of 16 channels):
// the kernel leaves the tile in acc (NHWC; allocated when the caller
// passes none), from which the last chunk copies it into y.
func ocwRunA(kb, np int, x []float32, offs []int, w, bias, acc []float32, first, last bool, y []float32, ldy int, clamp bool, lo, hi float32) {
	if len(acc) < np*16 {
		acc = make([]float32, np*16)
	}
	a := acc[:np*16]
	flags := 0
	if clamp {
		flags |= 1
	}
	if !first {
		flags |= 2
	}
	if last {
		flags |= 4
		_ = y[(kb-1)*ldy+np-1]
	}
	ocwKernelsA[np-1](&x[0], &offs[0], len(offs), &w[0], &bias[0], &a[0], flags, lo, hi)
	if !last {
		return
	}
	for k := 0; k < kb; k++ {
		yr := y[k*ldy : k*ldy+np]
		for j := range yr {
			yr[j] = a[j*16+k]
		}
	}
}
