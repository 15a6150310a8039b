//go:build !amd64 || purego

package cpu

const asmKernelName = ""

func asmKernel32() (microKernel[float32], int, int, bool) { return nil, 0, 0, false }
func asmKernel64() (microKernel[float64], int, int, bool) { return nil, 0, 0, false }
