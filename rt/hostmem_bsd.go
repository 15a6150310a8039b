//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package rt

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hostMemory reads the physical memory from sysctl; these systems do not
// say cheaply how much of it is free, so half of it counts as available.
func hostMemory() (avail, total int64, ok bool) {
	name := "hw.physmem"
	if runtime.GOOS == "darwin" || runtime.GOOS == "openbsd" || runtime.GOOS == "netbsd" {
		name = "hw.memsize"
		if runtime.GOOS != "darwin" {
			name = "hw.physmem64"
		}
	}
	v, err := unix.SysctlUint64(name)
	if err != nil || v == 0 || v > 1<<60 {
		return 0, 0, false
	}
	return int64(v / 2), int64(v), true
}
