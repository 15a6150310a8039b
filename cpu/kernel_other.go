//go:build !amd64 || purego

package cpu

func hwKernelLevel() int { return levelGo }

func asmKernel32(int) (kernelInfo[float32], bool) { return kernelInfo[float32]{}, false }
func asmKernel64(int) (kernelInfo[float64], bool) { return kernelInfo[float64]{}, false }

func packBTAsm[T floatT]([]T, []T, int, int, int) bool { return false }

func npGEMM[T floatT](*gemm[T]) bool { return false }

func npParallel[T floatT](*gemm[T]) bool { return false }

func gemvDotAsm[T floatT](_, _ []T, _, _ int, _ []T, _ int, _ T, _, _ int) bool { return false }

func npApplies[T floatT](*gemm[T]) bool { return false }

func dconvMaxKB() int { return 0 }

func dconvRun(_, _ int, _ []float32, _ []int, _, _, _ []float32, _ int) {}

func dcwMaxKB(int) int { return 0 }

func dcwLanes() int { return 16 }

func dcwRun(_, _, _ int, _ []float32, _ []int, _ []float32, _ int, _, _ []float32, _ int, _, _ bool, _, _ float32, _, _, _ int) {
}

func dcwRunHi(_, _, _ int, _ []float32, _ []int, _ int, _ []float32, _ int, _, _ []float32, _ int, _, _ bool, _, _ float32, _, _, _ int) {
}

func dcwRunGap(_, _, _ int, _ []float32, _ []int, _ int, _ []float32, _ int, _, _ []float32, _ int, _, _ bool, _, _ float32, _, _, _ int, _ []uint64) {
}

func dw3Plane(int, []float32, []float32, []float32, []float32, int, int, int, float32, float32, float32) bool {
	return false
}

func maxPool22Rows(_, _ []float32, _, _, _, _ int) bool { return false }

func deinterleave2(_, _, _ []float32) bool { return false }

func interleave2(_, _, _ []float32) bool { return false }

func gemvAxpyAsm[T floatT](_, _ []T, _ int, _ []T, _, _ int) bool { return false }

func gemvAxpyFast() bool { return false }

func ocwMaxP(int) int { return 0 }

func ocwMaxV() int { return 4 }

func ocwRun(_, _ int, _ []float32, _ []int, _ int, _, _, _ []float32, _, _, _ bool, _, _ float32) {
	panic("cpu: ocwRun without kernels")
}

func ocwStore(nv, kb, npos int, acc, y []float32, ldy int) { ocwStoreGo(16*nv, kb, npos, acc, y, ldy) }

func ocwStoreSlack(int) int { return 0 }

func maxPool33Rows(_, _ []float32, _, _, _, _ int) bool { return false }

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

func pwMaxKB(int) int { return 0 }

func pwRun(_, _, _, _, _ int, _ []float32, _ int, _ []float32, _ int, _, _ []float32, _ int, _, _ bool, _, _ float32) {
	panic("cpu: pwRun without kernels")
}
