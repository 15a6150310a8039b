package realmodels

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Models are the committed models in testdata/models, by name.
var Models = []string{"squeezenet1_1", "transformer", "lstm"}

// References are the reference outputs every committed model has: NAME.REF.npy.
var References = []string{"torch", "ort"}

// EnvDir names the environment variable giving a directory of extra models.
const EnvDir = "VRUN_MODELS_DIR"

// Tol bounds the error of every output element relative to the output's
// largest magnitude: |got - want| <= Tol * max|want|. Elementwise relative
// error is meaningless here: logits near zero (and a randomly initialised
// network's outputs are mostly near zero) carry only the rounding noise of
// the large terms that cancelled in them. f32 throughout, deep models, and
// references computed with other summation orders.
const Tol = 1e-4

// Dir returns the testdata/models directory of the source tree, or "" if
// it cannot be found.
func Dir() string {
	d, _ := repo.Path("testdata/models")
	return d
}

// MaxError returns max|got - want| / max|want| and the index of the worst
// element. Shapes must hold the same number of elements; a NaN on either
// side counts as an infinite error.
func MaxError(got, want *rt.Tensor) (rel float64, worst int, err error) {
	if got.Len() != want.Len() {
		return 0, 0, fmt.Errorf("got shape %v, want %v", got.Shape, want.Shape)
	}
	scale, maxd := 0.0, -1.0
	for i := 0; i < want.Len(); i++ {
		scale = math.Max(scale, math.Abs(want.Float64(i)))
	}
	for i := 0; i < got.Len(); i++ {
		d := math.Abs(got.Float64(i) - want.Float64(i))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if d > maxd {
			maxd, worst = d, i
		}
	}
	if scale == 0 {
		scale = 1
	}
	return maxd / scale, worst, nil
}

// entry is one model to check.
type entry struct {
	name, dir string
	required  bool // committed: every file must be there
}

// models lists the committed models and the extra ones in $VRUN_MODELS_DIR
// (those with an input and at least one reference, and a name other than
// a committed model's).
func models() []entry {
	var out []entry
	for _, n := range Models {
		out = append(out, entry{name: n, dir: Dir(), required: true})
	}
	extra := os.Getenv(EnvDir)
	if extra == "" {
		return out
	}
	files, _ := filepath.Glob(filepath.Join(extra, "*.onnx"))
	sort.Strings(files)
	for _, f := range files {
		n := strings.TrimSuffix(filepath.Base(f), ".onnx")
		if slices.Contains(Models, n) || !exists(filepath.Join(extra, n+".x.npy")) {
			continue
		}
		for _, r := range References {
			if exists(filepath.Join(extra, n+"."+r+".npy")) {
				out = append(out, entry{name: n, dir: extra})
				break
			}
		}
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Check imports every model, runs it on dev, and compares its output with
// each reference within Tol. It then converts the model to vrun's
// model.bin format (model.WriteFile, model.Load), runs that, and checks
// that the outputs agree with the ONNX import's. The errors are logged
// (go test -v) for the record.
func Check(t *testing.T, dev rt.Device) {
	for _, e := range models() {
		name := e.name
		if !e.required {
			name = "extra/" + e.name
		}
		t.Run(name, func(t *testing.T) { check(t, dev, e) })
	}
}

func check(t *testing.T, dev rt.Device, e entry) {
	base := filepath.Join(e.dir, e.name)
	m, err := onnx.ImportFile(base+".onnx", onnx.Options{Supported: engine.SupportedOps})
	if err != nil {
		t.Fatal(err)
	}
	x, err := npy.ReadFile(base + ".x.npy")
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(m, dev, x)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range References {
		p := base + "." + r + ".npy"
		if !e.required && !exists(p) {
			continue
		}
		want, err := npy.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, i, err := MaxError(got, want)
		if err != nil {
			t.Fatalf("vs %s: %v", r, err)
		}
		t.Logf("vs %s: max error %.3g of max|want| (worst element %d: got %.7g, want %.7g)", r, rel, i, got.Float64(i), want.Float64(i))
		if !(rel <= Tol) {
			t.Errorf("vs %s: max error %.3g of max|want| exceeds %g (element %d: got %.7g, want %.7g)", r, rel, Tol, i, got.Float64(i), want.Float64(i))
		}
	}

	// The same model through vrun's own format.
	bin := filepath.Join(t.TempDir(), e.name+".bin")
	if err := model.WriteFile(bin, m); err != nil {
		t.Fatal(err)
	}
	mb, err := model.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	gotBin, err := run(mb, dev, x)
	if err != nil {
		t.Fatalf("converted model: %v", err)
	}
	rel, i, err := MaxError(gotBin, got)
	if err != nil {
		t.Fatalf("converted model: %v", err)
	}
	if !(rel <= Tol) {
		t.Errorf("converted model: max error %.3g of max|onnx output| (element %d: got %.7g, want %.7g)", rel, i, gotBin.Float64(i), got.Float64(i))
	} else if rel != 0 {
		t.Logf("converted model: differs from the ONNX import by %.3g of max|output|", rel)
	}
}

// run plans m on dev for x's shape and returns the output. The models
// have one input and one output.
func run(m *model.Model, dev rt.Device, x *rt.Tensor) (*rt.Tensor, error) {
	ins, outs := m.Inputs(), m.Outputs()
	if len(ins) != 1 || len(outs) != 1 {
		return nil, fmt.Errorf("model has %d inputs and %d outputs, want 1 and 1", len(ins), len(outs))
	}
	in, out := m.Tensors[ins[0]].Name, m.Tensors[outs[0]].Name
	s, err := engine.New(m, dev, engine.Options{Shapes: map[string][]int{in: x.Shape}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res, err := s.Run(context.Background(), map[string]*rt.Tensor{in: x})
	if err != nil {
		return nil, err
	}
	y, ok := res[out]
	if !ok {
		return nil, fmt.Errorf("no output %q", out)
	}
	return y, nil
}
