package engine

import (
	"github.com/vrun-go/vrun/rt"
)

// TensorInfo describes a model input or output.
type TensorInfo struct {
	Name  string
	DType rt.DType
	// Shape holds the dims; -1 marks a dynamic dim, bound at run time by
	// the inputs' shapes.
	Shape []int64
	// DimNames names the dynamic dims where the model does ("batch"); it
	// is "" elsewhere, and nil when no dim is named.
	DimNames []string
}

// Inputs describes the model's inputs, in the model's order.
func (s *Session) Inputs() []TensorInfo {
	var out []TensorInfo
	for _, i := range s.m.Inputs() {
		mt := &s.m.Tensors[i]
		ti := TensorInfo{Name: mt.Name, DType: mt.DType, Shape: append([]int64{}, mt.Shape...)}
		for d, n := range mt.DimNames {
			if n != "" && d < len(mt.Shape) && mt.Shape[d] < 0 {
				if ti.DimNames == nil {
					ti.DimNames = make([]string, len(mt.Shape))
				}
				ti.DimNames[d] = n
			}
		}
		out = append(out, ti)
	}
	return out
}

// Outputs describes the model's outputs, in the model's order: dtypes
// and shapes as planned. A dim that follows the inputs' dynamic dims is
// -1, named after the input dim it equals ("batch") when there is one;
// finding them plans the model a second time, on the first call only.
func (s *Session) Outputs() []TensorInfo {
	s.outOnce.Do(func() { s.outInfo = s.outputInfo() })
	out := make([]TensorInfo, len(s.outInfo))
	for i, t := range s.outInfo {
		out[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: append([]int64{}, t.Shape...)}
		if t.DimNames != nil {
			out[i].DimNames = append([]string{}, t.DimNames...)
		}
	}
	return out
}

func (s *Session) outputInfo() []TensorInfo {
	base := s.init
	a, err := newPlan(s.m, base, planMode{}, s.opts.FoldDevice)
	if err != nil {
		// Planning worked once (New); describe what the model declares.
		var out []TensorInfo
		for _, i := range s.m.Outputs() {
			mt := &s.m.Tensors[i]
			out = append(out, TensorInfo{Name: mt.Name, DType: mt.DType, Shape: append([]int64{}, mt.Shape...)})
		}
		return out
	}
	// The probe: every dynamic dim larger, by a step of its own (dims of
	// one name alike), so that each output dim that moves tells which
	// input dim it follows.
	probe := map[string][]int{}
	named := map[string][2]int{} // dim name: its value in base and probe
	step := map[string]int{}
	next := 1
	for _, i := range s.m.Inputs() {
		mt := &s.m.Tensors[i]
		sh := append([]int{}, base[mt.Name]...)
		for d, v := range mt.Shape {
			if v >= 0 || d >= len(sh) {
				continue
			}
			name := ""
			if d < len(mt.DimNames) {
				name = mt.DimNames[d]
			}
			inc, ok := step[name]
			if !ok || name == "" {
				inc, next = next, next+1
				if name != "" {
					step[name] = inc
				}
			}
			sh[d] += inc
			if name != "" {
				named[name] = [2]int{sh[d] - inc, sh[d]}
			}
		}
		probe[mt.Name] = sh
	}
	b, _ := newPlan(s.m, probe, planMode{}, s.opts.FoldDevice) // nil: treat every dim as static
	var out []TensorInfo
	for k, t := range a.outputs {
		ti := TensorInfo{Name: t.name, DType: t.dtype, Shape: make([]int64, len(t.shape))}
		var bs []int
		if b != nil {
			bs = b.outputs[k].shape
		}
		for d, v := range t.shape {
			ti.Shape[d] = int64(v)
			if len(bs) != len(t.shape) || bs[d] == v {
				continue
			}
			ti.Shape[d] = -1
			for name, vals := range named {
				if vals[0] == v && vals[1] == bs[d] {
					if ti.DimNames == nil {
						ti.DimNames = make([]string, len(t.shape))
					}
					ti.DimNames[d] = name
				}
			}
		}
		out = append(out, ti)
	}
	return out
}
