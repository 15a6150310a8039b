package rt

func hostMemory() (avail, total int64, ok bool) { return meminfo("/proc/meminfo") }
