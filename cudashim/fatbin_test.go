//go:build cgo

package cudashim

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vrun-go/vrun/internal/backendtest"
	"github.com/vrun-go/vrun/rt"
)

// TestFatbinFor checks when a module loads its fatbin (no GPU needed).
func TestFatbinFor(t *testing.T) {
	fb := []byte{1}
	t.Setenv(fatbinEnv, "")
	if got, why := fatbinFor("embedded", ptxOverride, fb); got == nil || why != "" {
		t.Errorf("embedded PTX: fatbinFor = %v, %q; want the fatbin", got, why)
	}
	if got, why := fatbinFor("/tmp/k.ptx", ptxOverride, fb); got != nil || why != ptxOverride+" replaces the PTX" {
		t.Errorf("override: fatbinFor = %v, %q", got, why)
	}
	if got, why := fatbinFor("embedded", ptxOverride, nil); got != nil || why != "fatbin not built" {
		t.Errorf("placeholder fatbin: fatbinFor = %v, %q", got, why)
	}
	t.Setenv(fatbinEnv, "0")
	if got, why := fatbinFor("embedded", ptxOverride, fb); got != nil || why != fatbinEnv+"=0" {
		t.Errorf("%s=0: fatbinFor = %v, %q", fatbinEnv, got, why)
	}
	d := &Device{loads: [3]string{"SASS sm_90 (fatbin)", "", "SASS sm_90 (fatbin)"}}
	if got := d.withKernelsDetail(rt.DeviceInfo{}).Details; len(got) != 1 || got[0] != [2]string{"kernels", "SASS sm_90 (fatbin)"} {
		t.Errorf("kernels detail %q", got)
	}
	d.loads[2] = "PTX JIT (x)"
	if got := d.withKernelsDetail(rt.DeviceInfo{}).Details[0][1]; got != "kernels.ptx: SASS sm_90 (fatbin); optim.ptx: PTX JIT (x)" {
		t.Errorf("mixed kernels detail %q", got)
	}
}

// TestFatbinAndPTX opens device 0 twice: loading the embedded fatbins (the
// default) and JIT-compiling the PTX (VRUN_CUDA_FATBIN=0). It checks how
// each device loaded its modules (SASS on sm_80..sm_89 and sm_90 GPUs, the
// PTX elsewhere) and that both compute the same small ops, each within a
// stated tolerance of a float64 reference and of each other, and the
// indexed ops exactly alike. It logs the two open times; run with
// CUDA_CACHE_DISABLE=1 so the PTX path cannot use the driver's JIT cache.
func TestFatbinAndPTX(t *testing.T) {
	if gpuSkip != "" {
		t.Skip(gpuSkip)
	}
	for _, env := range []string{ptxOverride, indexedPTXOverride, optimPTXOverride} {
		if os.Getenv(env) != "" {
			t.Skipf("%s is set", env)
		}
	}
	t.Setenv(fatbinEnv, "")
	start := time.Now()
	fat := openTest(t, false)
	fatOpen := time.Since(start)
	t.Setenv(fatbinEnv, "0")
	start = time.Now()
	jit := openTest(t, false)
	jitOpen := time.Since(start)
	t.Logf("%s (sm_%d), CUDA_CACHE_DISABLE=%q", fat.info.Name, fat.cc, os.Getenv("CUDA_CACHE_DISABLE"))
	t.Logf("default: %s (open %v)", kernelsOf(fat), fatOpen.Round(time.Millisecond))
	t.Logf("%s=0: %s (open %v)", fatbinEnv, kernelsOf(jit), jitOpen.Round(time.Millisecond))

	arch := sassFor([]int{80, 90}, fat.cc)
	for i, fb := range [][]byte{embeddedFatbin, embeddedIndexedFatbin, embeddedOptimFatbin} {
		if jit.loads[i] != "" && jit.loads[i] != "PTX JIT ("+fatbinEnv+"=0)" {
			t.Errorf("%s=0: module %d loaded as %q", fatbinEnv, i, jit.loads[i])
		}
		got := fat.loads[i]
		switch {
		case got == "":
		case len(fb) == 0:
			if got != "PTX JIT (fatbin not built)" {
				t.Errorf("module %d has no fatbin but loaded as %q", i, got)
			}
		case arch != 0:
			if want := fmt.Sprintf("SASS sm_%d (fatbin)", arch); got != want {
				t.Errorf("module %d on sm_%d loaded as %q, want %q", i, fat.cc, got, want)
			}
		default:
			if !strings.HasPrefix(got, "PTX JIT (the fatbin has no SASS for sm_") {
				t.Errorf("module %d on sm_%d loaded as %q, want the PTX JIT", i, fat.cc, got)
			}
		}
	}

	rng := rand.New(rand.NewSource(15))
	tol := map[rt.DType]float64{rt.F64: 1e-13, rt.F32: 2e-6, rt.F16: 2e-3}
	for _, dt := range []rt.DType{rt.F32, rt.F16, rt.F64} {
		for _, fn := range []rt.UnaryFn{rt.Exp, rt.Tanh, rt.Gelu, rt.Erf, rt.Sigmoid} {
			x := randTensor(rng, dt, 37, 19)
			var got [2]*rt.Tensor
			for k, d := range []*Device{fat, jit} {
				_, xr := devTensor(t, d, x)
				y0, _ := rt.NewTensor(dt, 37, 19)
				_, yr := devTensor(t, d, y0)
				backendtest.Run(t, d, &rt.Unary{Fn: fn, X: xr, Y: yr})
				got[k] = &rt.Tensor{DType: dt, Shape: x.Shape, Data: readBack(t, d, yr, len(y0.Data))}
			}
			for i := 0; i < x.Len(); i++ {
				want := fn.Apply(x.Float64(i), 0, 0)
				a, b := got[0].Float64(i), got[1].Float64(i)
				lim := tol[dt] * (1 + math.Abs(want))
				if math.Abs(a-want) > lim || math.Abs(b-want) > lim || math.Abs(a-b) > lim {
					t.Fatalf("%s %s(%v): fatbin %v, PTX %v, float64 %v (tolerance %.2g)", dt, fn, x.Float64(i), a, b, want, lim)
				}
			}
		}
	}
	// The built-in GEMM kernel (cuBLAS is off on both devices).
	for _, d := range []*Device{fat, jit} {
		checkGEMM(t, d, rt.F32, 2, 33, 65, 17, false, true, true)
	}
	if fat.noIndexed == "" && jit.noIndexed == "" {
		runIndexedDiff(t, jit, fat)
	}
}

// kernelsOf is the "kernels" entry of d's Details.
func kernelsOf(d *Device) string {
	for _, kv := range d.Info().Details {
		if kv[0] == "kernels" {
			return kv[1]
		}
	}
	return "(no kernels detail)"
}
