package gradconf

import (
	"testing"

	_ "github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/rt"
)

func openCPU(t *testing.T) rt.Device {
	t.Helper()
	dev, err := rt.Open("cpu", nil)
	if err != nil {
		t.Fatalf("open cpu: %v", err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestCPU checks the gradients of the whole table on the CPU backend.
func TestCPU(t *testing.T) { Run(t, openCPU(t)) }

// TestForwardCPU runs the table's forward outputs through the inference
// engine on the CPU backend.
func TestForwardCPU(t *testing.T) { RunForward(t, openCPU(t)) }
