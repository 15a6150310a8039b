//go:build cgo

package vulkan

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/vrun-go/vrun/internal/optimconf"
	"github.com/vrun-go/vrun/internal/optimref"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/rt"
)

// TestOptimStep checks OptimStep against torch.optim (testdata/optimstep)
// on the Vulkan device.
func TestOptimStep(t *testing.T) { optimconf.Run(t, testDevice(t)) }

// TestOptimizers trains every optimizer configuration of testdata/optim
// for 20 steps on the Vulkan device and compares the weights after each
// step with torch.optim's.
func TestOptimizers(t *testing.T) { optimref.Check(t, testDevice(t)) }

// TestOptimShaderConstants checks the update rules, H slots and flag bits
// that shaders/optim.comp defines against package rt.
func TestOptimShaderConstants(t *testing.T) {
	// The package directory (go test) or the repository root (a prebuilt
	// test binary run from a copy of the tree).
	p, err := repo.Path("shaders/optim.comp")
	if err != nil {
		t.Skipf("shaders/optim.comp not found (run from the package directory or the repository root): %v", err)
	}
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"FN_SGD": int(rt.OptimSGD), "FN_ADAM": int(rt.OptimAdam), "FN_ADAGRAD": int(rt.OptimAdaGrad), "FN_RMSPROP": int(rt.OptimRMSProp),
		"H_LR": rt.OptimLR, "H_FIRST": rt.OptimFirst, "H_STEPSIZE": rt.OptimStepSize, "H_BC2SQRT": rt.OptimBC2Sqrt, "H_DECAY": rt.OptimDecay,
		"F_SCALE": rt.OptimFlagScale, "F_WD": rt.OptimFlagWD, "F_MOMENTUM": rt.OptimFlagMomentum, "F_NESTEROV": rt.OptimFlagNesterov,
		"F_DECOUPLED": rt.OptimFlagDecoupled, "F_CENTERED": rt.OptimFlagCentered,
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define ((?:FN|H|F)_\w+) (\d+)u$`).FindAllStringSubmatch(string(src), -1) {
		got[m[1]], _ = strconv.Atoi(m[2])
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("optim.comp: %s = %d (defined: %v), rt has %d", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("optim.comp defines %d constants, want %d", len(got), len(want))
	}
}
