//go:build amd64 && !purego

package cpu

//go:generate sh -c "/usr/bin/python3 dconv_amd64_gen.py > dconv_amd64.s && /usr/bin/python3 dconv_amd64_gen.py -decl | gofmt > dconvdecl_gen.go"

// dconvMaxKB is the most output rows one direct-convolution kernel call
// computes (0 where there are none).
func dconvMaxKB() int {
	if kernelLevel() < levelAVX512 {
		return 0
	}
	return len(dconvKernels)
}

// dconvRun sets y[k*ldy+q] = bias[k] + sum over t of w[t*kb+k] *
// x[q+offs[t]] for k < kb and q < n with the AVX-512 kernels of
// dconv_amd64.s (1 <= kb <= dconvMaxKB(), len(offs) >= 1).
func dconvRun(kb, n int, x []float32, offs []int, w, bias, y []float32, ldy int) {
	if n <= 0 {
		return
	}
	hi := 0
	for _, o := range offs {
		if o < 0 {
			panic("cpu: dconvRun: negative offset")
		}
		hi = max(hi, o)
	}
	_ = x[hi+n-1]
	_ = w[len(offs)*kb-1]
	_ = bias[kb-1]
	_ = y[(kb-1)*ldy+n-1]
	dconvKernels[kb-1](n, &x[0], &offs[0], len(offs), &w[0], &bias[0], &y[0], ldy)
}

// deinterleave2 sets even[i] = src[2i] and odd[i] = src[2i+1] for i <
// len(even) == len(odd), and reports whether a kernel did it.
func deinterleave2(even, odd, src []float32) bool {
	n := len(even)
	if kernelLevel() < levelAVX512 || len(odd) != n {
		return false
	}
	if n == 0 {
		return true
	}
	_ = src[2*n-1]
	deint2(&even[0], &odd[0], &src[0], n)
	return true
}
