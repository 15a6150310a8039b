package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/internal/cmem"
	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

var (
	cycles  = flag.Int("soak.cycles", envInt("VRUN_SOAK_CYCLES", 0), "Load/Run/Close cycles per backend (env VRUN_SOAK_CYCLES; 0: each backend's CI count)")
	runs    = flag.Int("soak.runs", envInt("VRUN_SOAK_RUNS", 0), "runs of one loaded model after the cycles (env VRUN_SOAK_RUNS; 0: each backend's CI count)")
	devices = flag.String("soak.devices", os.Getenv("VRUN_SOAK_DEVICES"), "comma-separated devices to soak (env VRUN_SOAK_DEVICES; empty: cpu, vulkan, opencl and cuda where available)")
	modelFl = flag.String("soak.model", "", "model to soak, with NAME.x.npy and NAME.torch.npy beside it (default: testdata/models/squeezenet1_1.onnx)")
	verbose = flag.Bool("soak.log", false, "log every sample")
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// budget is a backend's soak: its CI counts and the RSS growth allowed
// after warm-up.
type budget struct {
	cycles, runs int // CI counts
}

// The bound, for every backend: after warm-up (the first max(3, cycles/10)
// cycles), RSS stays within maxGrowth plus growthPerCycle for each later
// cycle of the baseline, and with 6 or more later cycles the least-squares
// slope stays under maxSlope per cycle. Before vrun released what it held
// (issue 12, item 11), lavapipe grew by about 2 MiB per squeezenet cycle
// with the mmap threshold fixed (4 MiB without), pocl by 1.7 MiB and
// NVIDIA's OpenCL by 1.6 MiB without.
const (
	maxGrowth      = 8 << 20
	growthPerCycle = 64 << 10
	maxSlope       = 512 << 10
)

var budgets = map[string]budget{
	"cpu":    {cycles: 10, runs: 10},
	"vulkan": {cycles: 12, runs: 3}, // lavapipe: 1.5-3 s a cycle, 1-2.5 s a run
	"opencl": {cycles: 9, runs: 3},
	"cuda":   {cycles: 10, runs: 10},
}

var mallocMode = flag.String("soak.malloc", "fixed", `glibc's mmap threshold: "fixed" at 128 KiB (malloc keeps no freed large block, so RSS follows what is held) or "default" (glibc's own, which keeps freed blocks of the drivers in its arenas: RSS then also grows with fragmentation)`)

func TestMain(m *testing.M) {
	flag.Parse()
	// RSS is measured for vrun and the driver, not for the validation
	// layer (rt/vulkan's tests run with it).
	os.Unsetenv("VRUN_VK_VALIDATION")
	if *mallocMode != "default" {
		cmem.SetMmapThreshold(128 << 10)
	}
	if os.Getenv("VRUN_CACHE_DIR") == "" {
		if dir, err := os.MkdirTemp("", "vrun-soak-cache"); err == nil {
			os.Setenv("VRUN_CACHE_DIR", dir)
			code := m.Run()
			os.RemoveAll(dir)
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}

// TestSoak loads the model on each backend, runs it once, checks the
// output against PyTorch's and closes it, cycle after cycle, with a
// garbage collection and a read of /proc/self/status between Close and
// the next Load (the sequence after which NVIDIA's Vulkan driver could not
// be loaded again). It then loads the model once and runs it again and
// again. RSS after warm-up must stay within the backend's budget.
func TestSoak(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	path := *modelFl
	if path == "" {
		dir := realmodels.Dir()
		if dir == "" {
			t.Fatal("testdata/models not found")
		}
		path = filepath.Join(dir, "squeezenet1_1.onnx")
	}
	base := strings.TrimSuffix(path, filepath.Ext(path))
	x, err := npy.ReadFile(base + ".x.npy")
	if err != nil {
		t.Fatal(err)
	}
	want, err := npy.ReadFile(base + ".torch.npy")
	if err != nil {
		t.Fatal(err)
	}
	devs := []string{"cpu", "vulkan", "opencl", "cuda"}
	if *devices != "" {
		devs = strings.Split(*devices, ",")
	}
	for _, dev := range devs {
		t.Run(dev, func(t *testing.T) { soak(t, dev, path, x, want) })
	}
}

func soak(t *testing.T, dev, path string, x, want *rt.Tensor) {
	name, _, err := rt.ParseSpec(dev)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := budgets[name]
	if !ok {
		b = budgets["cpu"]
	}
	if *cycles > 0 {
		b.cycles = *cycles
	}
	if *runs > 0 {
		b.runs = *runs
	}
	if b.cycles < 2 {
		t.Fatalf("-soak.cycles %d: need at least 2", b.cycles)
	}
	warm := min(max(3, b.cycles/10), b.cycles-1)

	// One cycle: Load, Run, compare, Close.
	cycle := func(i int) error {
		m, err := vrun.Load(path, vrun.Options{Device: dev})
		if err != nil {
			return err
		}
		in := m.Inputs()[0].Name
		out, err := m.Run(context.Background(), map[string]*rt.Tensor{in: x})
		if err == nil {
			err = check(out, want)
		}
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		return err
	}
	start := time.Now()
	if err := cycle(0); err != nil {
		if errors.Is(err, rt.ErrUnavailable) {
			t.Skipf("%s: %v", dev, err)
		}
		t.Fatalf("cycle 0: %v", err)
	}
	s0, err := Measure()
	if err != nil {
		t.Fatal(err)
	}
	samples := []Sample{s0}
	t.Logf("cycle 0 (%v): %v", time.Since(start).Round(time.Millisecond), s0)
	for i := 1; i < b.cycles; i++ {
		if err := cycle(i); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		s, err := Measure() // GC and /proc/self/status between Close and Load
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
		if *verbose {
			t.Logf("cycle %d: %v", i, s)
		}
	}
	last := samples[len(samples)-1]
	peak, slope := Growth(samples, warm)
	bound := int64(maxGrowth + growthPerCycle*(b.cycles-warm))
	t.Logf("%d cycles in %v (malloc %s): %v; after %d warm-up cycles RSS rose by at most %s (bound %s), slope %s/cycle",
		b.cycles, time.Since(start).Round(time.Millisecond), *mallocMode, last, warm, MiB(peak), MiB(bound), MiB(int64(slope)))
	if peak > bound {
		t.Errorf("RSS grew by %s after warm-up (cycle %d: %s, last: %s), bound %s",
			MiB(peak), warm-1, MiB(samples[warm-1].RSS), MiB(last.RSS), MiB(bound))
	}
	if b.cycles-warm >= 6 && slope > maxSlope {
		t.Errorf("RSS grows by %s per cycle after warm-up, bound %s", MiB(int64(slope)), MiB(maxSlope))
	}

	// One model, many runs.
	start = time.Now()
	m, err := vrun.Load(path, vrun.Options{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := m.Inputs()[0].Name
	every := max(b.runs/10, 1)
	var rs []Sample
	for i := 0; i < b.runs; i++ {
		out, err := m.Run(context.Background(), map[string]*rt.Tensor{in: x})
		if err == nil && (i == 0 || i == b.runs-1) {
			err = check(out, want)
		}
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if (i+1)%every == 0 {
			s, err := Measure()
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, s)
			if *verbose {
				t.Logf("run %d: %v", i, s)
			}
		}
	}
	if len(rs) >= 3 {
		peak, slope := Growth(rs, 1)
		t.Logf("%d runs in %v: %v; RSS rose by at most %s after the first %d, slope %s per %d runs",
			b.runs, time.Since(start).Round(time.Millisecond), rs[len(rs)-1], MiB(peak), every, MiB(int64(slope)), every)
		if peak > maxGrowth {
			t.Errorf("RSS grew by %s over %d runs of one model, bound %s", MiB(peak), b.runs, MiB(maxGrowth))
		}
	}
}

// check compares the model's one output with PyTorch's.
func check(out map[string]*rt.Tensor, want *rt.Tensor) error {
	if len(out) != 1 {
		return fmt.Errorf("%d outputs, want 1", len(out))
	}
	for _, got := range out {
		rel, i, err := realmodels.MaxError(got, want)
		if err != nil {
			return err
		}
		if !(rel <= realmodels.Tol) {
			return fmt.Errorf("output differs from PyTorch's by %.3g of max|want| at %d, tolerance %g", rel, i, realmodels.Tol)
		}
	}
	return nil
}
