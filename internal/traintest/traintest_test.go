package traintest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	_ "github.com/vrun-go/vrun/clshim"
	"github.com/vrun-go/vrun/cpu"
	_ "github.com/vrun-go/vrun/cudashim"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/traintest"
	"github.com/vrun-go/vrun/rt"
	_ "github.com/vrun-go/vrun/rt/vulkan"
)

func TestCPU(t *testing.T) {
	dev := cpu.NewDevice()
	defer dev.Close()
	traintest.Run(t, dev)
}

// TestSensitive checks that the f32 tolerance still catches a small
// mistake: a learning rate 1% off, or Adam's epsilon off by 100×, fails.
func TestSensitive(t *testing.T) {
	m, err := traintest.Load()
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	for _, tc := range []struct {
		model, opt string
		o          engine.Optimizer
	}{
		{"mlp", "sgd_momentum", engine.Optimizer{Kind: engine.SGD, LR: 0.0505, Momentum: 0.9}},
		{"mlp", "sgd_momentum", engine.Optimizer{Kind: engine.SGD, LR: 0.05, Momentum: 0.9, Dampening: 0.01}},
		{"mlp", "adam", engine.Optimizer{Kind: engine.Adam, LR: 0.01, Eps: 1e-6}},
		{"cnn", "adam", engine.Optimizer{Kind: engine.Adam, LR: 0.0101}},
	} {
		res, err := traintest.Train(context.Background(), dev, m, tc.model, tc.opt, rt.F32, &tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Fail == nil {
			t.Errorf("%s with %+v passes as %s (max rel error %.3g)", tc.model, tc.o, tc.opt, res.MaxRel)
		} else {
			t.Logf("%s %+v: %v", tc.model, tc.o, res.Fail)
		}
	}
}

// TestBackends runs the whole-run references on every other backend that
// opens here (lavapipe and pocl in CI; Vulkan, CUDA and OpenCL on a GPU
// machine). VRUN_TRAINTEST_DEVICES (comma-separated, e.g.
// "vulkan:0,cuda:0,opencl:1") overrides the list.
func TestBackends(t *testing.T) {
	specs := []string{"vulkan", "opencl", "cuda"}
	if s := os.Getenv("VRUN_TRAINTEST_DEVICES"); s != "" {
		specs = strings.Split(s, ",")
	}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			dev, err := rt.Open(spec, nil)
			if err != nil {
				t.Skipf("%s: %v", spec, err)
			}
			defer dev.Close()
			traintest.Run(t, dev)
		})
	}
}
