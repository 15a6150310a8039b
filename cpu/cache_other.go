//go:build !linux

package cpu

// l2Bytes returns 0 (unknown) where the level-2 cache size is not read.
func l2Bytes() int { return 0 }
