package conformance

import (
	"testing"

	_ "github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/rt"
)

// TestCPU runs the conformance table on the CPU backend.
func TestCPU(t *testing.T) {
	dev, err := rt.Open("cpu", nil)
	if err != nil {
		t.Fatalf("open cpu: %v", err)
	}
	defer dev.Close()
	Run(t, dev)
}
