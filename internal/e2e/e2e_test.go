package e2e_test

import (
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/e2e"
)

func TestCPU(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	e2e.Check(t, dev)
}

// TestConcurrentCPU runs Concurrent on the CPU backend; CI runs it under
// -race (the Vulkan and OpenCL tests call Concurrent on theirs).
func TestConcurrentCPU(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	e2e.Concurrent(t, dev)
}
