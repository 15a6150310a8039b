//go:build !unix

package cpu

import "time"

// processCPU is not measured on this GOOS.
func processCPU() time.Duration { return 0 }
