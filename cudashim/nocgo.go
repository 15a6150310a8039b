//go:build !cgo

package cudashim

import (
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// Backend is the CUDA backend; without cgo it cannot load the driver and
// reports itself unavailable.
type Backend struct{}

// Name returns "cuda".
func (Backend) Name() string { return BackendName }

// Devices reports that the backend needs cgo.
func (Backend) Devices() ([]rt.DeviceInfo, error) {
	return nil, fmt.Errorf("cuda: built without cgo: %w", rt.ErrUnavailable)
}

// Open reports that the backend needs cgo.
func (Backend) Open(int) (rt.Device, error) {
	return nil, fmt.Errorf("cuda: built without cgo: %w", rt.ErrUnavailable)
}

func init() { rt.Register(Backend{}) }
