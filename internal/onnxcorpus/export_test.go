package onnxcorpus

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/onnxrt"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
	"github.com/vrun-go/vrun/rt"
)

// exportLimits are the reasons for which Export may refuse a corpus
// case: operators and attributes that opset 17 lacks, and the opset-18
// forms it converts only when the operands are constants of known rank.
// Any other refusal fails the test.
var exportLimits = []string{
	"operator Attention is not in opset 17",
	"operator RMSNormalization is not in opset 17",
	"operator GroupNormalization is not in opset 17",
	"axes computed at run time cannot be an attribute in opset 17",
	"Pad with axes needs opset 18",
	`Pad mode "wrap" needs opset 19`,
	"Resize axes needs opset 18",
	"Resize keep_aspect_ratio_policy",
	`Resize coordinate_transformation_mode "half_pixel_symmetric" needs opset 19`,
	`reduction "max" needs opset 18`,
	`reduction "min" needs opset 18`,
	"AveragePool dilations need opset 19",
	"LpPool dilations need opset 18",
	`SpaceToDepth mode "CRD" needs opset 28`,
	"Range of float16 needs opset 21",
}

// minExported is a floor on the vendored cases that export, re-import
// and pass.
const minExported = 1066

// checkerKnown lists exported cases that the ONNX checker of Debian's
// python3-onnx (1.12) rejects although they are right, with the reason.
var checkerKnown = map[string]string{
	"test_averagepool_2d_ceil_last_window_starts_on_pad": "onnx 1.12's shape inference keeps a last ceil_mode window that starts in the padding; onnxruntime and newer ONNX drop it, as vrun does",
	"test_maxpool_2d_ceil_output_size_reduce_by_one":     "onnx 1.12's shape inference keeps a last ceil_mode window that starts in the padding; onnxruntime and newer ONNX drop it, as vrun does",
}

// TestExportCorpus exports every vendored corpus case that passes on the
// CPU to ONNX opset 17 (with its graph inputs that the engine needs at
// plan time bound as initializers, and the output types of its expected
// outputs), imports the file back and checks the expected outputs again.
// When python3-onnx is installed, the ONNX checker checks every file;
// when onnxruntime-node is, onnxruntime runs them all (in one process,
// about a minute; not with -short) against the expected outputs.
func TestExportCorpus(t *testing.T) {
	c, err := OpenDir(filepath.Join("..", "..", "testdata", "onnx", "node"))
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.NewDevice()
	defer dev.Close()
	dir := t.TempDir()
	var files []string
	var runs []onnxrt.Request
	var runCases []*Case
	passed, unsupported := 0, map[string][]string{}
	for _, cs := range c.Cases {
		if r := RunCase(cs, dev); r.Status != Pass {
			continue
		}
		m, err := onnx.Import(cs.ModelBytes, onnx.Options{Supported: engine.SupportedOps})
		if err != nil {
			t.Fatalf("%s: %v", cs.Name, err)
		}
		ok := true
		for k, ds := range cs.DataSets {
			_, bound, err := runSet(m, dev, ds)
			if err != nil {
				t.Fatalf("%s: %v", cs.Name, err)
			}
			mm := bindInputs(m, ds.Inputs, bound)
			outs := map[string]onnx.ValueType{}
			for name, o := range ds.Outputs {
				vt := onnx.ValueType{DType: o.DType, Shape: make([]int64, len(o.Shape))}
				for d, n := range o.Shape {
					vt.Shape[d] = int64(n)
				}
				outs[name] = vt
			}
			b, err := onnx.ExportBytes(mm, onnx.ExportOptions{Outputs: outs})
			if err != nil {
				if errors.Is(err, onnx.ErrUnsupported) {
					unsupported[cs.Name] = append(unsupported[cs.Name], err.Error())
					ok = false
					break
				}
				t.Errorf("%s: export: %v", cs.Name, err)
				ok = false
				break
			}
			if k == 0 {
				p := filepath.Join(dir, cs.Name+".onnx")
				if d := os.Getenv("VRUN_EXPORT_DUMP"); d != "" {
					p = filepath.Join(d, cs.Name+".onnx")
				}
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
				runs = append(runs, onnxrt.Request{Path: p, Inputs: map[string]*rt.Tensor{}})
				runCases = append(runCases, cs)
				for name, v := range ds.Inputs {
					if i := mm.TensorIndex(name); i >= 0 && mm.Tensors[i].Role == model.Input {
						runs[len(runs)-1].Inputs[name] = v
					}
				}
			}
			m2, err := onnx.Import(b, onnx.Options{Supported: engine.SupportedOps})
			if err != nil {
				t.Errorf("%s: re-import: %v", cs.Name, err)
				ok = false
				break
			}
			rest := ds
			rest.Inputs = map[string]*rt.Tensor{}
			for name, v := range ds.Inputs {
				if m2.TensorIndex(name) >= 0 && m2.Tensors[m2.TensorIndex(name)].Role == model.Input {
					rest.Inputs[name] = v
				}
			}
			out, _, err := runSet(m2, dev, rest)
			if err != nil {
				t.Errorf("%s: data set %d after export: %v", cs.Name, k, err)
				ok = false
				break
			}
			for _, name := range ds.OutputNames {
				if msg := Compare(out[name], ds.Outputs[name]); msg != "" {
					t.Errorf("%s: data set %d after export: output %q: %s", cs.Name, k, name, msg)
					ok = false
				}
			}
		}
		if ok {
			passed++
		}
	}
	var names []string
	for name := range unsupported {
		names = append(names, name)
	}
	sort.Strings(names)
	reasons := map[string]int{}
	for _, name := range names {
		for _, msg := range unsupported[name] {
			for _, item := range strings.Split(msg, "; ") {
				known := false
				for _, l := range exportLimits {
					if strings.Contains(item, l) {
						known, reasons[l] = true, reasons[l]+1
					}
				}
				if !known {
					t.Errorf("%s does not export: %s", name, item)
				}
			}
		}
	}
	if passed < minExported {
		t.Errorf("%d cases export and pass, fewer than %d (minExported)", passed, minExported)
	}
	t.Logf("%d cases exported to opset 17, re-imported and passed; %d cannot be written in opset 17: %v", passed, len(unsupported), reasons)
	if len(files) == 0 {
		return
	}
	t.Run("checker", func(t *testing.T) {
		fails := onnxrt.CheckEach(t, onnx.ExportOpset, onnx.ExportIRVersion, files...)
		for _, p := range files {
			name := strings.TrimSuffix(filepath.Base(p), ".onnx")
			msg, bad := fails[p]
			_, known := checkerKnown[name]
			switch {
			case bad && !known:
				t.Errorf("%s: %s", name, msg)
			case !bad && known:
				t.Errorf("%s passes the checker but is listed in checkerKnown: remove it", name)
			}
		}
		t.Logf("%d of %d files pass the ONNX checker", len(files)-len(fails), len(files))
	})
	t.Run("onnxruntime", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short")
		}
		onnxrt.NodeModules(t)
		res := onnxrt.RunBatch(t, runs)
		ran, matched, refused := 0, 0, map[string]int{}
		for i, r := range res {
			name := runCases[i].Name
			if r.Err != "" {
				refused[ortReason(r.Err)]++
				continue
			}
			ran++
			ds := runCases[i].DataSets[0]
			ok := true
			for _, o := range ds.OutputNames {
				if msg := Compare(r.Outputs[o], ds.Outputs[o]); msg != "" {
					if why, known := ortKnown[name]; !known {
						t.Errorf("%s: onnxruntime output %q: %s", name, o, msg)
					} else {
						t.Logf("%s: known: %s", name, why)
					}
					ok = false
				}
			}
			if ok {
				matched++
			}
		}
		if matched < minORT {
			t.Errorf("%d exported cases match in onnxruntime, fewer than %d (minORT)", matched, minORT)
		}
		t.Logf("onnxruntime ran %d of %d exported cases, %d with the expected outputs; it refused %d: %v", ran, len(runs), matched, len(runs)-ran, refused)
	})
}

// ortKnown lists exported cases whose outputs in onnxruntime differ from
// the expected ones, with the reason.
var ortKnown = map[string]string{
	"test_resize_downsample_scales_cubic_align_corners":  "onnxruntime gives the same output for the corpus's own opset-19 model: its align_corners downsampling by scales differs from the ONNX reference",
	"test_resize_downsample_scales_linear_align_corners": "onnxruntime gives the same output for the corpus's own opset-19 model: its align_corners downsampling by scales differs from the ONNX reference",
}

// minORT is a floor on the exported cases whose outputs onnxruntime
// reproduces.
const minORT = 1049

// ortReason shortens an onnxruntime error to a grouping key.
func ortReason(err string) string {
	if i := strings.Index(err, "Could not find an implementation for "); i >= 0 {
		s := err[i+len("Could not find an implementation for "):]
		if j := strings.Index(s, " node"); j >= 0 {
			s = s[:j]
		}
		return "no kernel " + s
	}
	if len(err) > 120 {
		err = err[:120]
	}
	return err
}
