package export

import (
	"fmt"

	"github.com/vrun-go/vrun/cpu"
	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx"
)

// Trained returns m with the trainer's current weights (trained
// parameters and running statistics), computing only outputs (all of m's
// outputs when none are given). t must be training m.
func Trained(t *engine.Trainer, m *model.Model, outputs ...string) (*model.Model, error) {
	w, err := t.Weights()
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	out, err := m.WithWeights(w)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if len(outputs) > 0 {
		if out, err = out.Prune(outputs...); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	return out, nil
}

// OutputTypes plans m on the CPU to find the element type and shape of
// each output. Dynamic input dims are bound to 2, then to 3: an output
// dim that follows them is dynamic (-1), named after the input dims when
// they share one name.
func OutputTypes(m *model.Model) (map[string]onnx.ValueType, error) {
	dev := cpu.NewDevice()
	defer dev.Close()
	plan := func(v int) (engine.Info, error) {
		shapes := map[string][]int{}
		for _, i := range m.Inputs() {
			t := m.Tensors[i]
			sh := make([]int, len(t.Shape))
			for k, d := range t.Shape {
				sh[k] = int(d)
				if d < 0 {
					sh[k] = v
				}
			}
			shapes[t.Name] = sh
		}
		s, err := engine.New(m, dev, engine.Options{Shapes: shapes})
		if err != nil {
			return engine.Info{}, fmt.Errorf("export: planning the model to find its output types: %w", err)
		}
		defer s.Close()
		return s.Info(), nil
	}
	a, err := plan(2)
	if err != nil {
		return nil, err
	}
	b := a
	name, dynamic := "", false
	for _, i := range m.Inputs() {
		t := m.Tensors[i]
		for k, d := range t.Shape {
			if d >= 0 {
				continue
			}
			n := ""
			if k < len(t.DimNames) {
				n = t.DimNames[k]
			}
			if dynamic && n != name {
				name = ""
			} else if !dynamic {
				name = n
			}
			dynamic = true
		}
	}
	if dynamic {
		if b, err = plan(3); err != nil {
			return nil, err
		}
	}
	out := map[string]onnx.ValueType{}
	for _, i := range m.Outputs() {
		o := m.Tensors[i].Name
		sa, sb := a.OutputShapes[o], b.OutputShapes[o]
		vt := onnx.ValueType{DType: a.OutputTypes[o], Shape: make([]int64, len(sa))}
		if len(sa) != len(sb) {
			return nil, fmt.Errorf("export: output %q has rank %d or %d depending on the input dims", o, len(sa), len(sb))
		}
		for k := range sa {
			vt.Shape[k] = int64(sa[k])
			if sa[k] != sb[k] {
				vt.Shape[k] = -1
				if sa[k] == 2 && sb[k] == 3 && name != "" {
					if vt.DimNames == nil {
						vt.DimNames = make([]string, len(sa))
					}
					vt.DimNames[k] = name
				}
			}
		}
		out[o] = vt
	}
	return out, nil
}

// ONNX writes m to path as an ONNX model of opset 17 (see
// onnx.Export), with the output types OutputTypes finds.
func ONNX(path string, m *model.Model) error {
	outs, err := OutputTypes(m)
	if err != nil {
		return err
	}
	if err := onnx.ExportFile(path, m, onnx.ExportOptions{Outputs: outs}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
