//go:build cgo

package vulkan

import (
	"errors"
	"testing"

	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/rt"
)

// openCounted opens a fresh device (not the shared one, whose pipelines
// earlier tests created), closed with the test.
func openCounted(t *testing.T, prepare bool) realmodels.Counted {
	t.Helper()
	testDevice(t) // skips without a device
	dev, err := backend{}.Open(testIndex())
	if err != nil {
		if errors.Is(err, rt.ErrUnavailable) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	d := dev.(*device)
	d.noPrepare = !prepare
	return realmodels.Counted{Dev: d, Built: d.PipelinesCreated}
}

// TestPreparedPipelines checks that planning a model creates its
// pipelines, exactly those its run uses, and that the run creates none.
func TestPreparedPipelines(t *testing.T) { realmodels.CheckPrepared(t, openCounted) }

// TestPipelineCacheSecondProcess checks that a second process, which
// loads the first's pipeline cache, computes the same output.
func TestPipelineCacheSecondProcess(t *testing.T) {
	realmodels.CheckSecondProcess(t, "TestPipelineCacheSecondProcess", openCounted)
}
