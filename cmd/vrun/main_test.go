package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/internal/e2e"
	"github.com/vrun-go/vrun/internal/onnxcorpus"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/npy"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestDemo(t *testing.T) {
	for _, args := range [][]string{nil, {"demo"}, {"-device", "cpu"}} {
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{"device     cpu:0", "accuracy   355/360 = 98.61%", "label→prediction"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
}

// vrun on the test models with -i and -o writes outputs that match NumPy.
func TestRunModelFiles(t *testing.T) {
	dir := e2e.Dir()
	for _, name := range e2e.Models {
		t.Run(name, func(t *testing.T) {
			outDir := t.TempDir()
			out, err := runCLI(t, filepath.Join(dir, name+".bin"), "-i", "x="+filepath.Join(dir, name, "x.npy"), "-o", outDir, "-bench", "3", "-profile")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"device   cpu:0", "output   y", "top-5 of row 0:", "bench    3 runs", "median", "profile", "memory   arenas", "pool: in use"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			got, err := npy.ReadFile(filepath.Join(outDir, "y.npy"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := npy.ReadFile(filepath.Join(dir, name, "y.npy"))
			if err != nil {
				t.Fatal(err)
			}
			if err := e2e.Compare(got, want, e2e.RelTol, e2e.AbsTol); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRandomInputsAreDeterministic(t *testing.T) {
	model := filepath.Join(e2e.Dir(), "mlp.bin")
	a, err := runCLI(t, model, "-shape", "x=3x37")
	if err != nil {
		t.Fatal(err)
	}
	b, err := runCLI(t, model, "-shape", "x=3x37")
	if err != nil {
		t.Fatal(err)
	}
	first := func(s string) string {
		_, after, _ := strings.Cut(s, "first:")
		v, _, _ := strings.Cut(after, "\n")
		return v
	}
	if first(a) == "" || first(a) != first(b) {
		t.Errorf("random inputs differ between runs:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "f32[3 37]") {
		t.Errorf("-shape not applied:\n%s", a)
	}
}

func TestInfo(t *testing.T) {
	out, err := runCLI(t, "info", filepath.Join(e2e.Dir(), "cnn.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"params", "nodes    13", "Conv×3", "arena", "of intermediate tensors", "saved by reuse"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
}

func TestDevices(t *testing.T) {
	out, err := runCLI(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cpu:0") {
		t.Errorf("devices lacks cpu:0:\n%s", out)
	}
}

func TestErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.bin")
	if err := os.WriteFile(bad, []byte("VRUNMDL\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(e2e.Dir(), "mlp.bin")
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"-nosuchflag"}, true, "flag provided but not defined"},
		{[]string{"a.bin", "b.bin"}, true, "expected one model file"},
		{[]string{"-shape", "x=3xq", model}, true, `bad dim "q"`},
		{[]string{"-i", "noequals", model}, true, "want name=file.npy"},
		{[]string{"info"}, true, "info needs one model file"},
		{[]string{"missing.bin"}, false, "missing.bin"},
		{[]string{bad}, false, "truncated"},
		{[]string{"-device", "nosuch", model}, false, `unknown backend "nosuch"`},
		{[]string{"-i", "zz=x.npy", model}, false, `no input "zz"`},
	} {
		_, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
			continue
		}
		var ue usageError
		if errors.As(err, &ue) != tc.usage {
			t.Errorf("%v: usage error = %v, want %v", tc.args, !tc.usage, tc.usage)
		}
	}
}

func TestHelp(t *testing.T) {
	out, err := runCLI(t, "-h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "vrun devices") || !strings.Contains(out, "-bench") {
		t.Errorf("help is missing parts:\n%s", out)
	}
}

// A model that takes a shape as a graph input (the ONNX node test
// test_reshape_extended_dims) runs with the shape given by -i: the engine
// plans for the value given, and the output matches the test's.
func TestShapeInput(t *testing.T) {
	src, err := repo.Path("testdata/onnx/node/test_reshape_extended_dims")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caseDir := filepath.Join(dir, "corpus", "test_reshape_extended_dims")
	for _, f := range []string{"model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/input_1.pb", "test_data_set_0/output_0.pb"} {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(caseDir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := onnxcorpus.OpenDir(filepath.Join(dir, "corpus"))
	if err != nil || len(c.Cases) != 1 || len(c.Cases[0].DataSets) != 1 {
		t.Fatalf("corpus case: %v", err)
	}
	ds := c.Cases[0].DataSets[0]
	args := []string{"-device", "cpu", "-o", filepath.Join(dir, "out")}
	for _, name := range ds.InputNames {
		p := filepath.Join(dir, name+".npy")
		if err := npy.WriteFile(p, ds.Inputs[name]); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-i", name+"="+p)
	}
	out, err := runCLI(t, append(args, filepath.Join(caseDir, "model.onnx"))...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range ds.OutputNames {
		got, err := npy.ReadFile(filepath.Join(dir, "out", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		if msg := onnxcorpus.Compare(got, ds.Outputs[name]); msg != "" {
			t.Errorf("output %q: %s", name, msg)
		}
	}
}
