package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Plans by value.
//
// The engine needs some values when it plans: a Reshape's shape, a
// Slice's starts and axes, a Resize's sizes, a TopK's k. Exported models
// keep them as weights or compute them from shapes, which planning folds;
// some models (and most of the ONNX node tests) take them as graph inputs
// instead. When planning fails with a *NotConstantError, the session
// learns which graph inputs it must plan by value, and Run plans for the
// values it is given: those inputs become constants of the plan, and the
// plan is kept under their values as well as the input shapes, so that
// each new value plans once and a repeated one reuses its plan.
//
// The inputs learnt are the one the error names, when it is a graph
// input; otherwise (a value computed from graph inputs, such as a window
// size cast to float or pads taken from a crop's shape) every small
// integer input: rank 0 or 1 with at most maxValueElems elements.

// maxValueElems bounds the integer inputs that a plan takes by value when
// the value it needs is computed from graph inputs.
const maxValueElems = 16

// ValueInputs returns the graph inputs that the session plans by value,
// in the model's order (see Run); nil when there are none.
func (s *Session) ValueInputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.valIn)
}

// notConstant returns the *NotConstantError in err, or nil.
func notConstant(err error) *NotConstantError {
	var nc *NotConstantError
	if errors.As(err, &nc) {
		return nc
	}
	return nil
}

// learnValues adds to s.valIn the graph inputs that planning needs by
// value, after the error nc, for inputs of the given shapes; it reports
// whether it added any.
func (s *Session) learnValues(nc *NotConstantError, shapes map[string][]int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	add := map[string]bool{}
	if i := s.m.TensorIndex(nc.Input); i >= 0 && s.m.Tensors[i].Role == model.Input {
		add[nc.Input] = true
	} else {
		for _, i := range s.m.Inputs() {
			mt := &s.m.Tensors[i]
			sh := shapes[mt.Name]
			if mt.DType.IsInt() && len(sh) <= 1 && rt.NumElements(sh) <= maxValueElems {
				add[mt.Name] = true
			}
		}
	}
	n := len(s.valIn)
	var names []string
	for _, i := range s.m.Inputs() {
		name := s.m.Tensors[i].Name
		if add[name] || slices.Contains(s.valIn, name) {
			names = append(names, name)
		}
	}
	s.valIn = names
	return len(names) > n
}

// runValues returns the values of the inputs that s plans by value, or
// nil when there are none.
func (s *Session) runValues(inputs map[string]*rt.Tensor) map[string]*rt.Tensor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.valIn) == 0 {
		return nil
	}
	vals := make(map[string]*rt.Tensor, len(s.valIn))
	for _, name := range s.valIn {
		vals[name] = inputs[name]
	}
	return vals
}

// planValues returns the plan for the input shapes and the values of the
// inputs planned by value, creating it on first use.
func (s *Session) planValues(shapes map[string][]int, vals map[string]*rt.Tensor) (*planState, error) {
	var key strings.Builder
	key.WriteString("values;")
	key.WriteString(shapeKey(shapes, s.m))
	for _, i := range s.m.Inputs() {
		if v, ok := vals[s.m.Tensors[i].Name]; ok {
			fmt.Fprintf(&key, "%s=%s;", s.m.Tensors[i].Name, hex.EncodeToString(v.Data))
		}
	}
	ps, err := s.planModel(func() *model.Model { return withValues(s.m, vals) }, shapes, s.mode, key.String())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.last, s.lastCh = ps, nil
	s.mu.Unlock()
	return ps, nil
}

// withValues returns a copy of m in which the named inputs are weights
// holding copies of the given values.
func withValues(m *model.Model, vals map[string]*rt.Tensor) *model.Model {
	mm := &model.Model{Meta: m.Meta, Nodes: m.Nodes, Tensors: slices.Clone(m.Tensors)}
	for name, v := range vals {
		t := &mm.Tensors[mm.TensorIndex(name)]
		t.Role, t.Data, t.DimNames = model.Weight, slices.Clone(v.Data), nil
		t.Shape = make([]int64, len(v.Shape))
		for d, n := range v.Shape {
			t.Shape[d] = int64(n)
		}
	}
	return mm
}
