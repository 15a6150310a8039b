//go:build !amd64 || purego

package cpu

func dw3Flat(_, _, _, _ []float32, _ int, _, _, _ float32) bool { return false }

func maxPool33RowsLd(_, _ []float32, _, _, _, _, _ int) bool { return false }
