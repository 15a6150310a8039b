//go:build cgo

package vulkan

import (
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// With VRUN_VK_VALIDATION=1, a validation error caused on one of two open
// devices is reported by that device only, and kept for
// ValidationMessages: the shim's messenger works, and messages go to the
// device whose objects they name although the instance is shared.
func TestValidationAttribution(t *testing.T) {
	testDevice(t)
	in, _ := sharedInstance()
	if !in.validate {
		t.Skip("VRUN_VK_VALIDATION is not set")
	}
	ValidationMessages() // earlier tests' (none expected; TestMain checks)
	b, _ := rt.Lookup("vulkan")
	var ds [2]*device
	for i := range ds {
		x, err := b.Open(testIndex())
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = x.(*device)
		defer x.Close()
	}
	// A zero-sized buffer is invalid (VUID-VkBufferCreateInfo-size-00912).
	h, r := ds[1].vd.createBuffer(0, 0x20)
	if h != 0 && r == 0 {
		ds[1].vd.destroyBuffer(h)
	}
	if err := ds[0].valErr(); err != nil {
		t.Errorf("device 0 reports device 1's message: %v", err)
	}
	err := ds[1].valErr()
	if err == nil || !strings.Contains(err.Error(), "VUID-VkBufferCreateInfo-size-00912") {
		t.Errorf("device 1 reports %v, want VUID-VkBufferCreateInfo-size-00912", err)
	}
	if all := ValidationMessages(); len(all) != 1 {
		t.Errorf("ValidationMessages = %q, want the one message", all)
	}
}
