//go:build !unix

package dist_test

import "time"

// processCPU is not measured on this GOOS.
func processCPU() time.Duration { return 0 }
