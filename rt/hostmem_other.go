//go:build !linux && !windows && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package rt

func hostMemory() (avail, total int64, ok bool) { return 0, 0, false }
