//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
