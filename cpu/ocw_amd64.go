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

// ocwRun computes one tile of a channels-in-lanes convolution, the
// output channels k < 16·nv of one block (the weights packed
// [tap][16·nv], bias 16·nv) at positions j < np: acc[j*16nv + k] =
// a[j][k] + sum over t of w[t*16nv + k] * x[offs[t] + j], a being bias[k]
// when first, else the partial sums in acc of earlier taps; on the last
// chunk clamped to [lo, hi] when clamp. It runs the AVX-512 kernels of
// ocw_amd64.s or the AVX2 ones of ocw_avx2_amd64.s (1 <= np <=
// ocwMaxP(nv), len(offs) >= 1); hiOff is maxOffset(offs), which the caller
// computes once. ocwStore moves finished tiles into the NCHW output.
func ocwRun(nv, np int, x []float32, offs []int, hiOff int, w, bias, acc []float32, first, last, clamp bool, lo, hi float32) {
	nt := len(offs)
	_ = x[hiOff+np-1]
	_ = w[nt*16*nv-1]
	_ = bias[16*nv-1]
	_ = acc[np*16*nv-1]
	if nv > 1 && kernelLevel() < levelAVX512 {
		panic("cpu: ocwRun: AVX2 kernels take one vector")
	}
	flags := 0
	if clamp {
		flags |= 1
	}
	if !first {
		flags |= 2
	}
	if last {
		flags |= 4
	}
	if kernelLevel() < levelAVX512 {
		ocwKernelsA[np-1](&x[0], &offs[0], nt, &w[0], &bias[0], &acc[0], flags, lo, hi)
		return
	}
	ocwKernels[nv-1][np-1](&x[0], &offs[0], nt, &w[0], &bias[0], &acc[0], flags, lo, hi)
}

// ocwStore stores the first kb channels of npos finished positions of
// acc ([npos][16·nv], NHWC) into y: y[k*ldy + j] = acc[j*16nv + k]. With
// AVX-512 it transposes blocks of 16 × 16 in registers (ocwT16), reading
// whole blocks of 16 positions, so acc must hold ocwStoreSlack(nv) more
// items past the last position.
func ocwStore(nv, kb, npos int, acc, y []float32, ldy int) {
	if npos <= 0 || kb <= 0 {
		return
	}
	_ = y[(kb-1)*ldy+npos-1]
	ld := 16 * nv
	if kernelLevel() < levelAVX512 {
		ocwStoreGo(ld, kb, npos, acc, y, ldy)
		return
	}
	_ = acc[(npos+15)/16*16*ld-1] // ocwT16 reads whole rows of 16 positions
	for k0 := 0; k0 < kb; k0 += 16 {
		for j0 := 0; j0 < npos; j0 += 16 {
			ocwT16(&acc[j0*ld+k0], ld, &y[k0*ldy+j0], ldy, min(16, npos-j0), min(16, kb-k0))
		}
	}
}

// ocwStoreSlack is the items that ocwStore may read past the last
// position of acc with nv vectors a position.
func ocwStoreSlack(nv int) int { return 15 * 16 * nv }
