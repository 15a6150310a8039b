//go:build cgo

package vulkan

import (
	"testing"

	"github.com/vrun-go/vrun/internal/conformance"
	"github.com/vrun-go/vrun/internal/e2e"
)

// TestConformance runs the shared op conformance table (NumPy references)
// through the engine on the Vulkan device.
func TestConformance(t *testing.T) { conformance.Run(t, testDevice(t)) }

// TestModels runs the end-to-end MLP and CNN models on the Vulkan device.
func TestModels(t *testing.T) { e2e.Check(t, testDevice(t)) }
