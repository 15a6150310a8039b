package cpu

import (
	"os"
	"strconv"
)

// VRUN_CPU_NPMAXN overrides npMaxN in benchmarks, to compare the no-pack
// and packed GEMM drivers side by side.
func init() {
	if v, err := strconv.Atoi(os.Getenv("VRUN_CPU_NPMAXN")); err == nil {
		npMaxN = v
	}
}
