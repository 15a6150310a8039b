//go:build !amd64 || purego

package cpu

func dw3Flat(_, _, _, _ []float32, _ int, _, _, _ float32) bool { return false }
