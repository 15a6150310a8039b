package ortpeer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vrun-go/vrun"
	"github.com/vrun-go/vrun/export"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Model is a benchmark model: the graph vrun runs, the ONNX file
// onnxruntime loads and the inputs both get.
type Model struct {
	Name   string
	Path   string // the file vrun loaded (ONNX or model.bin)
	ONNX   string // the ONNX file onnxruntime loads
	Graph  *model.Model
	Inputs map[string]*rt.Tensor
}

// Close releases the graph.
func (m *Model) Close() {
	if m.Graph != nil {
		m.Graph.Close()
	}
}

// Keep returns a filter for FindModels from a comma-separated list of
// names ("" keeps every model).
func Keep(only string) func(string) bool {
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	return func(name string) bool { return len(want) == 0 || want[name] }
}

// RepoModels lists the repository's benchmark models that keep accepts:
// every testdata/models/NAME.onnx with its input NAME.x.npy, and the
// end-to-end models testdata/e2e/NAME.bin with NAME/x.npy, named
// "e2e_NAME" and exported to ONNX in tmp for onnxruntime.
func RepoModels(tmp string, keep func(string) bool) ([]*Model, error) {
	var out []*Model
	fail := func(err error) ([]*Model, error) {
		for _, m := range out {
			m.Close()
		}
		return nil, err
	}
	dir, err := repo.Path("testdata/models")
	if err != nil {
		return nil, err
	}
	onnxFiles, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
	sort.Strings(onnxFiles)
	for _, p := range onnxFiles {
		name := strings.TrimSuffix(filepath.Base(p), ".onnx")
		if !keep(name) {
			continue
		}
		m, err := LoadModel(name, p, p, filepath.Join(dir, name+".x.npy"))
		if err != nil {
			return fail(err)
		}
		out = append(out, m)
	}
	e2e, err := repo.Path("testdata/e2e")
	if err != nil {
		return fail(err)
	}
	bins, _ := filepath.Glob(filepath.Join(e2e, "*.bin"))
	sort.Strings(bins)
	for _, p := range bins {
		name := strings.TrimSuffix(filepath.Base(p), ".bin")
		if !keep("e2e_" + name) {
			continue
		}
		m, err := LoadModel("e2e_"+name, p, "", filepath.Join(e2e, name, "x.npy"))
		if err != nil {
			return fail(err)
		}
		if err := m.ExportONNX(tmp); err != nil {
			m.Close()
			return fail(err)
		}
		out = append(out, m)
	}
	return out, nil
}

// ExportONNX writes m's graph as tmp/NAME.onnx for onnxruntime when m
// was not loaded from ONNX.
func (m *Model) ExportONNX(tmp string) error {
	if m.ONNX != "" {
		return nil
	}
	op := filepath.Join(tmp, m.Name+".onnx")
	if err := export.ONNX(op, m.Graph); err != nil {
		return fmt.Errorf("%s: export to ONNX: %w", m.Path, err)
	}
	m.ONNX = op
	return nil
}

// LoadModel reads the graph vrun runs (path) and its input: x.npy for the
// first input when given, deterministic random values otherwise (dynamic
// dims bound to 1). onnxPath is the ONNX file for onnxruntime ("" when
// there is none yet: see ExportONNX).
func LoadModel(name, path, onnxPath, xnpy string) (*Model, error) {
	g, err := vrun.LoadGraph(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Name: name, Path: path, ONNX: onnxPath, Graph: g, Inputs: map[string]*rt.Tensor{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for k, i := range g.Inputs() {
		mt := g.Tensors[i]
		if k == 0 && xnpy != "" {
			t, err := npy.ReadFile(xnpy)
			if err != nil {
				g.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			m.Inputs[mt.Name] = t
			continue
		}
		shape := make([]int, len(mt.Shape))
		for d, v := range mt.Shape {
			shape[d] = max(int(v), 1)
		}
		t, err := rt.NewTensor(mt.DType, shape...)
		if err != nil {
			g.Close()
			return nil, err
		}
		for j := 0; j < t.Len(); j++ {
			if mt.DType.IsFloat() {
				t.SetFloat64(j, rng.Float64()*2-1)
			} else {
				t.SetFloat64(j, float64(rng.IntN(2)))
			}
		}
		m.Inputs[mt.Name] = t
	}
	return m, nil
}

// Median is the median of v (the upper one for an even count), NaN for
// none.
func Median(v []float64) float64 { return Quantiles(v, 0.5)[0] }

// Quantiles returns the q-quantiles of v for each q in qs (element
// floor(q·len) of v sorted, so 0.5 is Median's), sorting a copy once;
// NaN for none.
func Quantiles(v []float64, qs ...float64) []float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = math.NaN()
		if len(s) > 0 {
			out[i] = s[min(len(s)-1, int(q*float64(len(s))))]
		}
	}
	return out
}

// MaxDiff is the largest |got - want| over every output, relative to the
// largest |want| of that output; +Inf when an output is missing or of
// another size.
func MaxDiff(got map[string]*rt.Tensor, want map[string]*rt.Tensor) float64 {
	worst := 0.0
	for name, w := range want {
		g := got[name]
		if g == nil || g.Len() != w.Len() {
			return math.Inf(1)
		}
		scale, d := 0.0, 0.0
		for i := 0; i < w.Len(); i++ {
			scale = max(scale, math.Abs(w.Float64(i)))
			d = max(d, math.Abs(g.Float64(i)-w.Float64(i)))
		}
		if scale > 0 {
			d /= scale
		}
		worst = max(worst, d)
	}
	return worst
}
