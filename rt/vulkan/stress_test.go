//go:build cgo

package vulkan

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/rt"
)

var (
	stressCycles = flag.Int("vk.stress", envInt("VRUN_VK_STRESS", 10),
		"Open/Close cycles per goroutine of TestStressGC (env VRUN_VK_STRESS)")
	reopenCycles = flag.Int("vk.reopen", envInt("VRUN_VK_REOPEN", 10),
		"Open/Close cycles of TestReopen (env VRUN_VK_REOPEN)")
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestStressGC runs the end-to-end models through the engine in two
// goroutines, each opening its own device, running both models twice and
// closing it, again and again, with the garbage collector running almost
// continuously (GOGC=1) and a third goroutine forcing collections. Before
// every Vulkan call went through vkshim.h, goki/vulkan's finalizers freed
// struct arguments during calls under exactly this load.
func TestStressGC(t *testing.T) {
	testDevice(t)
	if testing.Short() {
		t.Skip("short")
	}
	e2e.StressGC(t, func() (rt.Device, error) {
		b, _ := rt.Lookup("vulkan")
		return b.Open(testIndex())
	}, 2, *stressCycles)
	if n := openDevices(); n != 1 { // the shared test device
		t.Errorf("%d devices hold the instance after the cycles, want 1 (the shared test device)", n)
	}
}

// TestReopen opens, uses and closes a device again and again, with a
// garbage collection and a read of /proc/self/status between Close and
// the next Open (as the soak test that found NVIDIA's driver failing to
// load a second time did). Every device uses the one process-wide
// instance, which stays when no device holds it.
func TestReopen(t *testing.T) {
	testDevice(t)
	in, err := sharedInstance()
	if err != nil {
		t.Fatal(err)
	}
	held := openDevices()
	b, _ := rt.Lookup("vulkan")
	for i := 0; i < *reopenCycles; i++ {
		d, err := b.Open(testIndex())
		if err != nil {
			t.Fatalf("cycle %d: Open: %v", i, err)
		}
		if n := openDevices(); n != held+1 {
			t.Errorf("cycle %d: %d devices hold the instance, want %d", i, n, held+1)
		}
		y := newBuf(t, d, rt.F32, 33, nil)
		s, err := d.NewStream(rt.StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Launch(&rt.Fill{Y: y.ref([]int{33}, nil), Value: float64(i)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		if v := y.read(t, d)[32]; v != float64(i) {
			t.Fatalf("cycle %d: read %v, want %d", i, v, i)
		}
		s.Close()
		if err := d.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", i, err)
		}
		if n := openDevices(); n != held {
			t.Errorf("cycle %d: %d devices hold the instance after Close, want %d", i, n, held)
		}
		runtime.GC()
		if runtime.GOOS == "linux" {
			if _, err := os.ReadFile("/proc/self/status"); err != nil {
				t.Fatal(err)
			}
		}
		if again, _ := sharedInstance(); again != in || again.h.p != in.h.p {
			t.Fatalf("cycle %d: the instance changed", i)
		}
	}
}
