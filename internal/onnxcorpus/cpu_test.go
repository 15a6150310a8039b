package onnxcorpus_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/internal/floors"
	"github.com/vrun-go/vrun/internal/onnxcorpus"
)

// vendoredDir holds the corpus cases copied into the repository by
// testdata/onnx/vendor.sh, so that a fresh clone runs them.
var vendoredDir = filepath.Join("..", "..", "testdata", "onnx", "node")

// TestConformanceVendored runs the vendored cases on the CPU: all pass.
func TestConformanceVendored(t *testing.T) {
	if _, err := os.Stat(vendoredDir); err != nil {
		t.Fatalf("vendored cases missing: %v (run testdata/onnx/vendor.sh)", err)
	}
	c, err := onnxcorpus.OpenDir(vendoredDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Cases) == 0 {
		t.Fatalf("no cases in %s", vendoredDir)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	rep := onnxcorpus.Run(c, dev, nil)
	onnxcorpus.CheckReport(t, rep)
	t.Log(rep.String())
	floors.Check(t, floors.Vendored, dev.Info(), rep.Count(onnxcorpus.Pass))
	for _, r := range rep.Results {
		if r.Status == onnxcorpus.Skip {
			t.Errorf("vendored case %s is skipped: %s", r.Case, r.Reason)
		}
	}
}

// TestConformanceCorpus runs the whole ONNX node-test corpus on the CPU
// when it is present (../shared/onnx-node-tests.tgz or $VRUN_ONNX_CORPUS).
// Every case whose operators are all claimed (engine.SupportedOps) must
// pass, unless onnxcorpus.KnownFailures lists it, and at least the floor
// that internal/floors records must pass.
func TestConformanceCorpus(t *testing.T) {
	p, ok := onnxcorpus.Find()
	if !ok {
		t.Skipf("ONNX node-test corpus not found at %s (set %s to its .tgz)", p, onnxcorpus.Env)
	}
	if testing.Short() {
		t.Skip("-short: the vendored cases run in TestConformanceVendored")
	}
	c, err := onnxcorpus.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	rep := onnxcorpus.Run(c, dev, nil)
	onnxcorpus.CheckReport(t, rep)
	t.Log(rep.String())
	floors.Check(t, floors.Corpus, dev.Info(), rep.Count(onnxcorpus.Pass))
}
