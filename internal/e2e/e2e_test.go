package e2e_test

import (
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/rt"
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

// TestStressGCCPU opens, uses and closes CPU devices again and again in
// two goroutines under GOGC=1 (e2e.StressGC).
func TestStressGCCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	e2e.StressGC(t, func() (rt.Device, error) { return cpu.NewDevice(), nil }, 2, 10)
}

// TestDataParallelCPU splits the test models' batches across three
// logical CPU devices (VRUN_CPU_DEVICES=3).
func TestDataParallelCPU(t *testing.T) {
	t.Setenv("VRUN_CPU_DEVICES", "3")
	for _, list := range []string{"cpu:0,cpu:1", "cpu:0,cpu:1,cpu:2"} {
		t.Run(list, func(t *testing.T) {
			devs, err := rt.OpenList(list, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.CloseAll(devs)
			e2e.DataParallel(t, devs)
		})
	}
}
