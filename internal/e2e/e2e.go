package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Models are the end-to-end test models, by name.
var Models = []string{"mlp", "cnn"}

// Dir returns the testdata/e2e directory of the source tree, or "" if it
// cannot be found (then the models fail to load with a clear error).
func Dir() string {
	d, _ := repo.Path("testdata/e2e")
	return d
}

// RelTol is the relative tolerance against NumPy's float64 outputs, for
// f32 models; AbsTol guards values near zero.
const (
	RelTol = 1e-5
	AbsTol = 1e-7
)

// Compare reports the worst element of got against want, or an error if
// any element is off by more than atol + rtol*|want|.
func Compare(got, want *rt.Tensor, rtol, atol float64) error {
	if got.Len() != want.Len() {
		return fmt.Errorf("got shape %v, want %v", got.Shape, want.Shape)
	}
	worst, wi := -1.0, 0
	for i := 0; i < got.Len(); i++ {
		g, w := got.Float64(i), want.Float64(i)
		if math.IsNaN(g) != math.IsNaN(w) {
			return fmt.Errorf("element %d: got %v, want %v", i, g, w)
		}
		if e := math.Abs(g-w) / (atol + rtol*math.Abs(w)); e > worst {
			worst, wi = e, i
		}
	}
	if worst > 1 {
		return fmt.Errorf("element %d: got %.9g, want %.9g (error %.3g× tolerance rtol=%g atol=%g)", wi, got.Float64(wi), want.Float64(wi), worst, rtol, atol)
	}
	return nil
}

// testCase is a test model with its input and NumPy's output.
type testCase struct {
	m       *model.Model
	x, want *rt.Tensor
}

// load reads the test model name with its input and NumPy's output from
// [Dir]; any error fails t. The caller closes the model.
func load(t testing.TB, name string) testCase {
	t.Helper()
	dir := Dir()
	m, err := model.Load(filepath.Join(dir, name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := npy.ReadFile(filepath.Join(dir, name, "x.npy"))
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	want, err := npy.ReadFile(filepath.Join(dir, name, "y.npy"))
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return testCase{m, x, want}
}

// Check runs every test model on dev and compares with NumPy.
func Check(t *testing.T, dev rt.Device) {
	forEachModel(t, func(t *testing.T, c testCase) {
		s, err := engine.New(c.m, dev, engine.Options{Shapes: map[string][]int{"x": c.x.Shape}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for run := 0; run < 2; run++ { // the second run replays the recorded stream
			out, err := s.Run(context.Background(), map[string]*rt.Tensor{"x": c.x})
			if err != nil {
				t.Fatal(err)
			}
			if err := Compare(out["y"], c.want, RelTol, AbsTol); err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
		}
	})
}

// forEachModel runs f on every test model, loaded, in a subtest named
// after the model.
func forEachModel(t *testing.T, f func(t *testing.T, c testCase)) {
	for _, name := range Models {
		t.Run(name, func(t *testing.T) {
			c := load(t, name)
			defer c.m.Close()
			f(t, c)
		})
	}
}
