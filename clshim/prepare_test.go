//go:build cgo

package clshim

import (
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
