//go:build cgo

package vulkan

import (
	"errors"
	"testing"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// A lost device (VK_ERROR_DEVICE_LOST from the driver, injected here where
// driver results enter) fails every later call with rt.ErrDeviceLost,
// still closes cleanly, and the device can be opened again and used.
func TestDeviceLostRecovery(t *testing.T) {
	testDevice(t)
	t.Setenv("VRUN_CACHE_DIR", t.TempDir())
	b, _ := rt.Lookup("vulkan")
	d, err := b.Open(testIndex())
	if err != nil {
		t.Fatal(err)
	}
	x := newBuf(t, d, rt.F32, 17, nil)
	s, err := d.NewStream(rt.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(&rt.Fill{Y: x.ref([]int{17}, nil), Value: 2}); err != nil {
		t.Fatal(err)
	}
	// The driver reports the loss, e.g. from vkQueueSubmit.
	err = d.(*device).resultErr("vkQueueSubmit", vk.ErrorDeviceLost)
	if !errors.Is(err, rt.ErrDeviceLost) {
		t.Fatalf("resultErr = %v, want rt.ErrDeviceLost", err)
	}
	if err := s.Submit(); !errors.Is(err, rt.ErrDeviceLost) {
		t.Errorf("Submit after loss = %v, want rt.ErrDeviceLost", err)
	}
	if _, err := d.Alloc(64); !errors.Is(err, rt.ErrDeviceLost) {
		t.Errorf("Alloc after loss = %v, want rt.ErrDeviceLost", err)
	}
	if _, err := d.NewStream(rt.StreamOptions{}); !errors.Is(err, rt.ErrDeviceLost) {
		t.Errorf("NewStream after loss = %v, want rt.ErrDeviceLost", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close after loss: %v", err)
	}
	// Open again: a fresh device works.
	d2, err := b.Open(testIndex())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer d2.Close()
	y := newBuf(t, d2, rt.F32, 17, nil)
	backendtest.Run(t, d2, &rt.Fill{Y: y.ref([]int{17}, nil), Value: 3})
	if v := y.read(t, d2)[16]; v != 3 {
		t.Fatalf("after reopen got %v, want 3", v)
	}
}
