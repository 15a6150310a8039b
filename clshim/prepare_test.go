//go:build cgo

package clshim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/realmodels"
)

// openCounted opens a fresh device (the first tested one), closed with
// the test; its count is of programs built or loaded from the binary
// cache.
func openCounted(t *testing.T, prepare bool) realmodels.Counted {
	t.Helper()
	info := testDevices(t)[0]
	dev, err := Backend{}.Open(info.Index)
	if err != nil {
		t.Fatalf("open %s (%s): %v", info.Spec(), info.Name, err)
	}
	t.Cleanup(func() { dev.Close() })
	d := dev.(*device)
	d.noPrepare = !prepare
	return realmodels.Counted{Dev: d, Built: func() int64 { return int64(d.ProgramsBuilt()) }}
}

// TestPreparedPrograms checks that planning a model builds its programs,
// exactly those its run uses, and that the run builds none.
func TestPreparedPrograms(t *testing.T) { realmodels.CheckPrepared(t, openCounted) }

// TestProgramCacheSecondProcess checks that a second process, which
// loads the first's program binaries, computes the same output.
func TestProgramCacheSecondProcess(t *testing.T) {
	realmodels.CheckSecondProcess(t, "TestProgramCacheSecondProcess", openCounted)
}

// TestColdStartKnobs checks the cold-start experiment knobs read at Open:
// VRUN_CL_OPTS reaches every program (here -DMMA_UNROLL=2, which the GEMM
// must still compute correctly with), VRUN_CL_JOBS sets Prepare's build
// concurrency, VRUN_CL_BUILDCTX builds in other contexts (the programs
// loaded from their binaries must work) and VRUN_CL_BUILDLOG gets one
// line per program built.
func TestColdStartKnobs(t *testing.T) {
	log := filepath.Join(t.TempDir(), "builds.log")
	t.Setenv(BuildOptsEnv, "-DMMA_UNROLL=2")
	t.Setenv(BuildJobsEnv, "3")
	t.Setenv(BuildLogEnv, log)
	t.Setenv(BuildCtxEnv, "2")
	forEachDevice(t, func(t *testing.T, dev *device) {
		if dev.jobs != 3 || !strings.Contains(dev.opts, "-DMMA_UNROLL=2") || dev.nBuildCtx != 2 {
			t.Fatalf("jobs %d, opts %q, %d build contexts: want 3, -DMMA_UNROLL=2, 2", dev.jobs, dev.opts, dev.nBuildCtx)
		}
		defer func() { dev.gemmForce = nil }()
		dev.gemmForce = &gemmShape{32, 32, 16, 4, 4}
		gemmOddSizes(t, dev)
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string // this device's
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, dev.Info().Spec()+"\t") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 || dev.ProgramsBuilt() != len(lines) {
			t.Fatalf("%d log lines for %d programs built:\n%s", len(lines), dev.ProgramsBuilt(), b)
		}
		for _, l := range lines {
			f := strings.Split(l, "\t")
			if len(f) != 9 || (f[4] != "source-ctx" && f[4] != "cache") || !strings.Contains(f[8], "-DMMA_UNROLL=2") {
				t.Fatalf("log line %q: want 9 tab-separated fields, source-ctx or cache, the options", l)
			}
		}
	})
}
