package cpu

import (
	"os"
	"path/filepath"
	"strings"
)

// l2Bytes returns the size of the first CPU's level-2 cache as Linux
// reports it (sysfs), 0 when unknown.
func l2Bytes() int {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	for _, d := range dirs {
		if level, _ := os.ReadFile(filepath.Join(d, "level")); strings.TrimSpace(string(level)) != "2" {
			continue
		}
		if typ, _ := os.ReadFile(filepath.Join(d, "type")); strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		size, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			return 0
		}
		return parseCacheSize(string(size))
	}
	return 0
}
