package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// vrun -device with a list splits the batch: the test model's outputs
// match NumPy's on logical CPUs and on the CPU with pocl, with -bench;
// bad lists and batches get errors that say what is wrong.
func TestDeviceList(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=3")
	dir := e2e.Dir()
	mlp := filepath.Join(dir, "mlp.bin")
	x := filepath.Join(dir, "mlp", "x.npy")
	for _, c := range []struct {
		args []string
		want []string // in the output
		err  string   // in the error
		cl   bool     // needs OpenCL
	}{
		{args: []string{"-device", "cpu:0,cpu:1,cpu:2", "-i", "x=" + x, "-bench", "3", mlp},
			want: []string{"device   cpu:0,cpu:1,cpu:2  Go CPU", "bench    3 runs"}},
		{args: []string{"-device", "cpu,opencl:0", "-i", "x=" + x, mlp}, cl: true,
			want: []string{"device   cpu:0,opencl:0  Go CPU"}},
		{args: []string{"-device", "cpu,opencl:0", "-shares", "8,1", "-i", "x=" + x, mlp}, cl: true,
			want: []string{"device   cpu:0,opencl:0  Go CPU"}},
		{args: []string{"-device", "cpu:0,cpu:1", "-shares", "1,2,3", mlp}, err: `3 shares for the 2 devices of "cpu:0,cpu:1"`},
		{args: []string{"-device", "cpu:0,cpu:1", "-shares", "1,-2", mlp}, err: `-shares "1,-2": want positive numbers`},
		{args: []string{"info", "-device", "cpu:0,cpu:1", "-shape", "x=4x37", mlp},
			want: []string{"device   cpu:0,cpu:1", "split    each batch across 2 devices"}},
		{args: []string{"-device", "cpu:0,cpu", mlp}, err: `device list "cpu:0,cpu": cpu:0 is listed twice, as "cpu:0" and "cpu"`},
		{args: []string{"-device", "cpu:0,,cpu:1", mlp}, err: "device 2 of 3 is empty"},
		{args: []string{"-device", "cpu:0,cpu:1,cpu:2", "-shape", "x=2x37", mlp}, err: "a batch of 2 rows is smaller than the 3 devices cpu:0,cpu:1,cpu:2"},
		{args: []string{"-device", "cpu:0,cpu:1", filepath.Join(filepath.Dir(dir), "models", "squeezenet1_1.onnx")},
			err: "cannot split the batch across devices: no input has a dynamic leading (batch) dim; inputs: x [1 3 224 224]"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			if c.cl {
				available(t, "opencl")
			}
			outDir := t.TempDir()
			args := c.args
			if c.err == "" && args[0] != "info" {
				args = append([]string{"-o", outDir}, args...)
			}
			out, err := runCLI(t, args...)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if args[0] == "info" {
				return
			}
			got, err := npy.ReadFile(filepath.Join(outDir, "y.npy"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := npy.ReadFile(filepath.Join(dir, "mlp", "y.npy"))
			if err != nil {
				t.Fatal(err)
			}
			if err := e2e.Compare(got, want, e2e.RelTol, e2e.AbsTol); err != nil {
				t.Error(err)
			}
		})
	}
	// -json names every device of the list.
	out, err := runCLI(t, "-json", "-device", "cpu:0,cpu:2", "-shape", "x=5x37", mlp)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Device deviceRef `json:"device"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Device.Spec != "cpu:0,cpu:2" || len(rep.Device.Devices) != 2 || rep.Device.Devices[1].Spec != "cpu:2" {
		t.Errorf("-json device = %+v", rep.Device)
	}
}

// available skips the test when backend cannot start here.
func available(t *testing.T, backend string) {
	t.Helper()
	b, ok := rt.Lookup(backend)
	if !ok {
		t.Skipf("%s not compiled in", backend)
	}
	if _, err := b.Devices(); err != nil {
		t.Skipf("%s: %v", backend, err)
	}
}

// vrun devices shows each device's UUID and its twins: logical devices of
// one physical device (and, on a GPU machine, one GPU through Vulkan and
// CUDA).
func TestDevicesSameAs(t *testing.T) {
	t.Setenv(rt.LogicalDevicesEnv, "cpu=2,vulkan=2")
	out, err := runCLI(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cpu:1 ", "same physical device as: cpu:1"}
	if b, _ := rt.Lookup("vulkan"); b != nil {
		if ds, err := b.Devices(); err == nil && len(ds) >= 2 {
			want = append(want, "uuid: "+ds[0].UUID, "same physical device as: vulkan:1")
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("vrun devices lacks %q:\n%s", w, out)
		}
	}
	out, err = runCLI(t, "devices", "-json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"same_as": [`) || !strings.Contains(out, `"logical": true`) {
		t.Errorf("vrun devices -json lacks same_as or logical:\n%s", out)
	}
}
