//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// A Vulkan device lost in the middle of a data-parallel run on two
// VkDevices of one physical device (VRUN_LOGICAL_DEVICES=vulkan=2), the
// loss injected where driver results enter as in TestDeviceLostRecovery:
// the error names the lost device, the model's buffers on both devices
// are released, later runs fail with the same error, and both devices
// close cleanly.
func TestParallelDeviceLost(t *testing.T) {
	testDevice(t)
	t.Setenv("VRUN_CACHE_DIR", t.TempDir())
	t.Setenv(rt.LogicalDevicesEnv, "vulkan=2")
	list := fmt.Sprintf("vulkan:%d,vulkan:%d", 2*testIndex(), 2*testIndex()+1)
	devs, err := rt.OpenList(list, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.CloseAll(devs); err != nil {
			t.Errorf("closing after the loss: %v", err)
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, 8*5)
	for i := range w {
		w[i] = float32(rng.Float64() - 0.5)
	}
	b := model.NewBuilder()
	x := b.Input("x", rt.F32, -1, 8)
	b.DimNames(x, "batch", "")
	b.Output(b.Op("Relu", []string{b.Op("MatMul", []string{x, b.Weight("w", rt.F32, []int64{8, 5}, w)}, nil)}, nil))
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	dp, err := engine.NewParallelSession(m, devs, engine.Options{Dims: map[string]int{"batch": 6}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	xv := make([]float32, 6*8)
	for i := range xv {
		xv[i] = float32(rng.Float64())
	}
	in := map[string]*rt.Tensor{"x": rt.FromFloat32(xv, 6, 8)}
	if _, err := dp.Run(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	live := func(d rt.Device) int {
		dd := d.(*device)
		dd.mu.Lock()
		defer dd.mu.Unlock()
		return len(dd.buffers)
	}
	if live(devs[0]) == 0 || live(devs[1]) == 0 {
		t.Fatal("no buffers on the devices while the model is planned")
	}
	lost := devs[1].Info().Spec()
	devs[1].(*device).resultErr("vkQueueSubmit", vk.ErrorDeviceLost)
	_, err = dp.Run(context.Background(), in)
	var de *engine.DeviceError
	if !errors.Is(err, rt.ErrDeviceLost) || !errors.As(err, &de) || de.Device != lost || !strings.Contains(err.Error(), "device "+lost) {
		t.Fatalf("got %v, want a DeviceError naming %s that matches rt.ErrDeviceLost", err, lost)
	}
	for _, d := range devs {
		if n := live(d); n != 0 {
			t.Errorf("%s holds %d buffers after the loss, want 0", d.Info().Spec(), n)
		}
	}
	if _, err2 := dp.Run(context.Background(), in); !errors.Is(err2, rt.ErrDeviceLost) {
		t.Errorf("run after the loss: %v", err2)
	}
}
