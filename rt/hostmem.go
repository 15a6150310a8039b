package rt

import (
	"os"
	"strconv"
	"strings"
)

// fallbackHostMemory is what HostMemory assumes where the OS does not say
// how much memory is free: a conservative 4 GiB.
const fallbackHostMemory = 4 << 30

// HostMemory returns the host memory available to new allocations and the
// total, in bytes. On Linux they come from /proc/meminfo (MemAvailable and
// MemTotal, or the cgroup limit when lower), on Windows from
// GlobalMemoryStatusEx, on macOS and the BSDs from sysctl (where half the
// physical memory counts as available); elsewhere, and where the query
// fails, a conservative 4 GiB.
func HostMemory() (avail, total int64) {
	avail, total, ok := hostMemory()
	if !ok {
		return fallbackHostMemory, fallbackHostMemory
	}
	return avail, max(total, avail)
}

func hostMemoryName() string {
	if _, _, ok := hostMemory(); ok {
		return "host memory available"
	}
	return "host memory assumed available (the OS does not say)"
}

// meminfo reads MemAvailable and MemTotal from a /proc/meminfo file, and
// lowers both to a cgroup v2 memory limit when one is set.
func meminfo(path string) (avail, total int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			continue
		}
		switch key {
		case "MemAvailable":
			avail = kb << 10
		case "MemTotal":
			total = kb << 10
		}
	}
	if avail <= 0 || total <= 0 {
		return 0, 0, false
	}
	if lim, free := cgroupLimit(); lim > 0 && lim < total {
		total = lim
		avail = min(avail, free)
	}
	return avail, total, true
}

// cgroupLimit returns the cgroup v2 memory limit of this process and the
// memory it leaves free, or zeros when no limit is set.
func cgroupLimit() (limit, free int64) {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0, 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0, 0 // "max": no limit
	}
	free = v
	if cur, err := os.ReadFile("/sys/fs/cgroup/memory.current"); err == nil {
		if u, err := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64); err == nil && u >= 0 {
			free = max(v-u, 0)
		}
	}
	return v, free
}
