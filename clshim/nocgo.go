//go:build !cgo

package clshim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// Backend is the OpenCL backend. Built without cgo it has no devices.
type Backend struct{}

// Name returns "opencl".
func (Backend) Name() string { return BackendName }

// Devices reports that the backend was built without cgo.
func (Backend) Devices() ([]rt.DeviceInfo, error) {
	return nil, fmt.Errorf("opencl: built without cgo: %w", rt.ErrUnavailable)
}

// Open reports that the backend was built without cgo.
func (Backend) Open(int) (rt.Device, error) {
	return nil, fmt.Errorf("opencl: built without cgo: %w", rt.ErrUnavailable)
}

func init() { rt.Register(Backend{}) }
