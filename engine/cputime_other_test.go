//go:build !unix

package engine_test

import "time"

// processCPU is not measured on this GOOS.
func processCPU() time.Duration { return 0 }
