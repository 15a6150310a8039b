//go:build !amd64 || purego

package cpu

import "github.com/vrun-go/vrun/rt"

// Forms of binaryF32.
const (
	formVV = iota // y[i] = a[i] op b[i]
	formVS        // y[i] = a[i] op b[0]
	formSV        // y[i] = a[0] op b[i]
)

// unaryF32 computes y = fn(x) with the float32 Go code where it has fn.
func unaryF32(fn rt.UnaryFn, _, _ float64, y, x []float32) bool { return unaryF32Go(fn, y, x) }

// binaryF32 has no vectorised kernels here: the Go loops run.
func binaryF32(rt.BinaryFn, int, []float32, []float32, []float32) bool { return false }

func binaryVecF64(rt.BinaryFn, int, []float64, []float64, []float64) bool { return false }
func affineF64(_, _ []float64, _, _ float64) bool                         { return false }
func sumSqF64([]float64) (float64, bool)                                  { return 0, false }

func sumF32([]float32) (float32, bool)                         { return 0, false }
func maxF32([]float32) (float32, bool)                         { return 0, false }
func expShiftSumF32(_, _ []float32, _ float32) (float32, bool) { return 0, false }
func sumSqDevF32([]float32, float32) (float32, bool)           { return 0, false }
func normApplyF32(_, _, _, _ []float32, _, _ float32) bool     { return false }

func hmaxF32(_, _ []float32, _, _ int) bool { return false }
