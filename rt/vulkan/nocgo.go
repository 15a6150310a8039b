//go:build !cgo

package vulkan

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

type backend struct{}

func (backend) Name() string { return "vulkan" }

func (backend) Devices() ([]rt.DeviceInfo, error) {
	return nil, fmt.Errorf("vulkan: built without cgo: %w", rt.ErrUnavailable)
}

func (backend) Open(int) (rt.Device, error) {
	return nil, fmt.Errorf("vulkan: built without cgo: %w", rt.ErrUnavailable)
}

// ValidationMessages returns nothing without cgo.
func ValidationMessages() []string { return nil }

func init() { rt.Register(backend{}) }
