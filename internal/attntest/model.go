package attntest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/repo"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/npy"
	"github.com/vrun-go/vrun/rt"
)

// Models runs the transformer models on d with plan-time fusion and with
// engine.Options.NoFusion: testdata/models/transformer (two attention
// layers) and, when $VRUN_MODELS_DIR holds bert.onnx and bert.x.npy (from
// testdata/models/export.py), the 12-layer BERT encoder. When d supports
// rt.Attention (fused) the fused plan must have one per layer, else none;
// either way the two runs agree within 1e-5 of the output's largest
// magnitude.
func Models(t *testing.T, d rt.Device, fused bool) {
	dir, err := repo.Path("testdata/models")
	if err != nil {
		t.Fatal(err)
	}
	models := []struct {
		path   string
		layers int
	}{{filepath.Join(dir, "transformer"), 2}}
	if extra := os.Getenv("VRUN_MODELS_DIR"); extra != "" {
		models = append(models, struct {
			path   string
			layers int
		}{filepath.Join(extra, "bert"), 12})
	}
	for _, mc := range models {
		t.Run(filepath.Base(mc.path), func(t *testing.T) {
			if _, err := os.Stat(mc.path + ".onnx"); err != nil {
				t.Skipf("no model: %v", err)
			}
			m, err := onnx.ImportFile(mc.path+".onnx", onnx.Options{Supported: engine.SupportedOps})
			if err != nil {
				t.Fatal(err)
			}
			x, err := npy.ReadFile(mc.path + ".x.npy")
			if err != nil {
				t.Fatal(err)
			}
			in, out := m.Tensors[m.Inputs()[0]].Name, m.Tensors[m.Outputs()[0]].Name
			var got [2][]float64
			for i, noFusion := range []bool{false, true} {
				s, err := engine.New(m, d, engine.Options{NoFusion: noFusion, Shapes: map[string][]int{in: x.Shape}})
				if err != nil {
					t.Fatal(err)
				}
				n := s.Info().OpCounts["Attention"]
				t.Logf("NoFusion %v: %d ops, %d Attention", noFusion, s.Info().Ops, n)
				if noFusion && n != 0 {
					t.Errorf("NoFusion: %d Attention ops", n)
				}
				if want := mc.layers; !noFusion && (fused && n != want || !fused && n != 0) {
					t.Errorf("%d Attention ops, want %d (one per layer) or none (fused %v)", n, want, fused)
				}
				res, err := s.Run(context.Background(), map[string]*rt.Tensor{in: x})
				s.Close()
				if err != nil {
					t.Fatal(err)
				}
				got[i] = res[out].Float64s()
			}
			scale := 0.0
			for _, v := range got[1] {
				scale = max(scale, math.Abs(v))
			}
			for j := range got[0] {
				if !(math.Abs(got[0][j]-got[1][j]) <= 1e-5*scale) {
					t.Fatalf("y[%d]: fused %v, unfused %v", j, got[0][j], got[1][j])
				}
			}
		})
	}
}
