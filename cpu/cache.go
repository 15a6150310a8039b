package cpu

import (
	"strconv"
	"strings"
)

// parseCacheSize parses a cache size as sysfs writes it ("2048K", "1M",
// "512"), in bytes; 0 when it is not one.
func parseCacheSize(s string) int {
	s = strings.TrimSpace(s)
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}
