package onnxcorpus

import (
	"testing"

	"github.com/vrun-go/vrun/internal/floors"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/rt"
)

// VendoredDir is the repository path of the vendored cases, copied from
// the corpus by testdata/onnx/vendor.sh so that a fresh clone runs them.
const VendoredDir = "testdata/onnx/node"

// RunTest is a backend's corpus test: it runs the whole corpus on dev when
// [Find] finds it (and the test is not -short), else the vendored cases.
// It fails on every failure that KnownFailures does not list, on every
// listed case that passes, and when fewer cases pass than the floor that
// internal/floors records for the device; it logs the summary (the whole
// report with -v) and returns the report.
func RunTest(t *testing.T, dev rt.Device) *Report {
	t.Helper()
	var c *Corpus
	suite := floors.Vendored
	if p, ok := Find(); ok && !testing.Short() {
		var err error
		if c, err = Open(p); err != nil {
			t.Fatal(err)
		}
		suite = floors.Corpus
	} else {
		dir, err := repo.Path(VendoredDir)
		if err != nil {
			t.Fatal(err)
		}
		if c, err = OpenDir(dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("ONNX corpus not found at %s (or -short): running the %d vendored cases", p, len(c.Cases))
	}
	rep := Run(c, dev, nil)
	info := dev.Info()
	t.Logf("ONNX node tests (%s) on %s (%s): %s", suite, info.Spec(), info.Name, rep.Summary())
	CheckReport(t, rep)
	floors.Check(t, suite, info, rep.Count(Pass))
	if testing.Verbose() {
		t.Log(rep.String())
	}
	return rep
}

// CheckReport fails t for every failure that KnownFailures does not list
// and for every listed case that passes.
func CheckReport(t testing.TB, rep *Report) {
	t.Helper()
	for _, r := range rep.Results {
		why, known := KnownFailures[r.Case]
		switch {
		case r.Status == Fail && !known:
			t.Errorf("%s: %s (ops %v)", r.Case, r.Reason, r.Ops)
		case r.Status == Fail:
			t.Logf("%s: known failure: %s", r.Case, why)
		case r.Status == Pass && known:
			t.Errorf("%s passes but is listed in KnownFailures (%s): remove it", r.Case, why)
		}
	}
}
