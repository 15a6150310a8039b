//go:build unix

package engine_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) of the process so far.
// On a shared machine it is a steadier measure of work than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
