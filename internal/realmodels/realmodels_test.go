package realmodels_test

import (
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/realmodels"
	"github.com/vrun-go/vrun/rt"
)

// TestCPU checks the committed models (and any in $VRUN_MODELS_DIR) on the
// CPU backend.
func TestCPU(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	realmodels.Check(t, dev)
}

func TestMaxError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want []float32
		rel       float64
		worst     int
	}{
		{"equal", []float32{1, -2, 3}, []float32{1, -2, 3}, 0, 0},
		{"relative to max", []float32{1, -2, 3.5}, []float32{1, -2, 4}, 0.125, 2},
		{"near zero", []float32{0.001, 2}, []float32{0, 2}, 0.0005, 0},
		{"all zero", []float32{0.5, 0}, []float32{0, 0}, 0.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, worst, err := realmodels.MaxError(rt.FromFloat32(tc.got, len(tc.got)), rt.FromFloat32(tc.want, len(tc.want)))
			if err != nil {
				t.Fatal(err)
			}
			if d := rel - tc.rel; d > 1e-6 || d < -1e-6 || worst != tc.worst {
				t.Errorf("MaxError = %g at %d, want %g at %d", rel, worst, tc.rel, tc.worst)
			}
		})
	}
	if _, _, err := realmodels.MaxError(rt.FromFloat32([]float32{1}, 1), rt.FromFloat32([]float32{1, 2}, 2)); err == nil {
		t.Error("MaxError accepted tensors of different sizes")
	}
}
