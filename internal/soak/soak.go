package soak

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/vrun-go/vrun/internal/cmem"
)

// Status returns the fields of /proc/self/status (Linux), such as VmRSS,
// VmHWM and Threads, with their values as written ("105432 kB").
func Status() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// KB parses a /proc/self/status size such as "105432 kB" into bytes.
func KB(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("soak: size %q: %w", v, err)
	}
	return n << 10, nil
}

// Sample is one reading of the process's memory.
type Sample struct {
	RSS     int64 // VmRSS: resident set size, bytes
	Anon    int64 // RssAnon: anonymous resident memory (heaps), bytes
	File    int64 // RssFile: resident file mappings (libraries, mmaps), bytes
	GoHeap  int64 // Go heap in use after a collection, bytes
	Malloc  int64 // C malloc: bytes handed out and not freed (glibc), or -1
	CHeap   int64 // C malloc: bytes of its heaps (glibc), or -1
	Threads int
}

func (s Sample) String() string {
	c := ""
	if s.Malloc >= 0 {
		c = fmt.Sprintf(", malloc %s in use of %s", MiB(s.Malloc), MiB(s.CHeap))
	}
	return fmt.Sprintf("rss %s (anon %s, file %s), go heap %s%s, %d threads",
		MiB(s.RSS), MiB(s.Anon), MiB(s.File), MiB(s.GoHeap), c, s.Threads)
}

// MiB formats n bytes in MiB.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Measure collects garbage, returns freed Go memory to the OS and reads
// /proc/self/status.
func Measure() (Sample, error) {
	runtime.GC()
	debug.FreeOSMemory()
	st, err := Status()
	if err != nil {
		return Sample{}, err
	}
	var s Sample
	for _, f := range []struct {
		key string
		dst *int64
	}{{"VmRSS", &s.RSS}, {"RssAnon", &s.Anon}, {"RssFile", &s.File}} {
		if v, ok := st[f.key]; ok {
			if *f.dst, err = KB(v); err != nil {
				return Sample{}, err
			}
		}
	}
	s.Threads, _ = strconv.Atoi(st["Threads"])
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.GoHeap = int64(ms.HeapInuse)
	s.Malloc, s.CHeap = -1, -1
	if u, h, ok := cmem.Stats(); ok {
		s.Malloc, s.CHeap = u, h
	}
	return s, nil
}

// Growth is the RSS growth over samples after the first warm of them:
// the largest RSS after warm-up less the RSS at its end, and the
// Theil–Sen slope through those samples (the median of the slopes between
// every pair), in bytes per sample. Unlike a least-squares line, the
// median is not pulled up by one sample where the driver's allocator
// happened to hold a few more pages; a steady leak still shows in full.
func Growth(samples []Sample, warm int) (peak int64, slope float64) {
	if warm < 1 {
		warm = 1
	}
	if warm > len(samples) {
		return 0, 0
	}
	base := samples[warm-1].RSS
	rest := samples[warm-1:]
	for _, s := range rest {
		peak = max(peak, s.RSS-base)
	}
	var slopes []float64
	for i := range rest {
		for j := i + 1; j < len(rest); j++ {
			slopes = append(slopes, float64(rest[j].RSS-rest[i].RSS)/float64(j-i))
		}
	}
	if len(slopes) == 0 {
		return peak, 0
	}
	slices.Sort(slopes)
	h := len(slopes) / 2
	if len(slopes)%2 == 1 {
		return peak, slopes[h]
	}
	return peak, (slopes[h-1] + slopes[h]) / 2
}
