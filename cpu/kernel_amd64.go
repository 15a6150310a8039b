//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// The AVX2+FMA micro-kernels of kernel_amd64.s: 6×16 for f32 and 6×8 for
// f64, twelve YMM accumulators each. Build with -tags purego to use the
// portable Go kernel instead.

//go:noescape
func sgemm6x16(kc int, a, b, c *float32)

//go:noescape
func dgemm6x8(kc int, a, b, c *float64)

const asmKernelName = "AVX2+FMA 6x16 (f32) / 6x8 (f64)"

var haveAVX2FMA = xcpu.X86.HasAVX2 && xcpu.X86.HasFMA

func kern6x16(kc int, a, b, c []float32) {
	if kc <= 0 {
		clear(c[:96])
		return
	}
	_ = a[kc*6-1]
	_ = b[kc*16-1]
	_ = c[95]
	sgemm6x16(kc, &a[0], &b[0], &c[0])
}

func kern6x8(kc int, a, b, c []float64) {
	if kc <= 0 {
		clear(c[:48])
		return
	}
	_ = a[kc*6-1]
	_ = b[kc*8-1]
	_ = c[47]
	dgemm6x8(kc, &a[0], &b[0], &c[0])
}

func asmKernel32() (microKernel[float32], int, int, bool) {
	if !haveAVX2FMA || !useAsm {
		return nil, 0, 0, false
	}
	return kern6x16, 6, 16, true
}

func asmKernel64() (microKernel[float64], int, int, bool) {
	if !haveAVX2FMA || !useAsm {
		return nil, 0, 0, false
	}
	return kern6x8, 6, 8, true
}
