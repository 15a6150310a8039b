//go:build !linux || !cgo

package cmem

// Stats returns ok = false: the C heap's use is not known here.
func Stats() (inUse, heap int64, ok bool) { return 0, 0, false }

// Trim does nothing here.
func Trim() {}

// SetMmapThreshold does nothing here and reports false.
func SetMmapThreshold(n int) bool { return false }
