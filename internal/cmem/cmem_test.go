package cmem

import (
	"runtime"
	"testing"
)

// Stats reports glibc's heap on Linux with cgo, and Trim never fails.
func TestStatsTrim(t *testing.T) {
	u, h, ok := Stats()
	Trim()
	if ok && !SetMmapThreshold(128<<10) {
		t.Error("SetMmapThreshold(128 KiB) failed with glibc")
	}
	if !ok {
		if runtime.GOOS == "linux" {
			t.Logf("no mallinfo2 here (not glibc, or built without cgo)")
		}
		return
	}
	if u <= 0 || h < u {
		t.Errorf("Stats = %d in use of %d", u, h)
	}
}
