package engine

import (
	"errors"
	"fmt"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// storage says where a tensor's bytes live.
type storage uint8

const (
	inArena   storage = iota // intermediates, inputs, outputs, temporaries
	inWeights                // weights and plan-time constants
)

// tensor is the planner's view of one value.
type tensor struct {
	id    int
	name  string
	dtype rt.DType
	shape []int
	// value holds the contents when known at plan time: weights and
	// constants folded from them (shapes, BatchNorm factors, ...).
	value *rt.Tensor
	// init holds the initial contents of a mutable weight (a trained
	// parameter, BatchNorm running statistics, optimizer state): it lives
	// in the weight buffer like a constant, but its value is not known at
	// plan time, so nothing folds it.
	init *rt.Tensor
	// persist, when set, keys a plan-level weight-buffer tensor (the
	// parameter block, optimizer state) that all plans of a session share.
	persist string
	// block, when set, is the flat weight block this trained parameter
	// lives in, at byte offset blockOff.
	block    *tensor
	blockOff int64

	root *tensor // the tensor that owns the storage; itself if it owns it
	// rootOff is the byte offset of this tensor's bytes in its root's:
	// 0 but for Concat inputs computed in place in the Concat's output
	// (elideConcats).
	rootOff int64
	aliases []*tensor
	where   storage
	input   bool // a graph input, written at step 0
	output  bool // a graph output, read at the end
	defined bool // shape and dtype known
	used    bool // some op reads or writes its storage

	first, last int   // steps, for roots
	lastUse     int   // last step that reads this tensor (graph outputs: end)
	readers     int   // how many nodes read this tensor
	offset      int64 // byte offset of a root in the arena or weight buffer

	// act, when non-nil, is the still-empty activation epilogue of the
	// MatMul or Conv that wrote this tensor: an activation node reading it
	// can fuse into that op instead of launching its own.
	act *rt.Activation
	// conv, when non-nil, is the Conv that wrote this tensor, with its
	// weight and bias tensors, so that a BatchNormalization reading it can
	// fold into the Conv's constants.
	conv         *rt.Conv
	convW, convB *tensor
	// halfOf, when set, is the f32 constant whose values this f16 copy
	// holds (precision f16: halfWeights).
	halfOf *tensor
}

// isOutput reports whether root t is a graph output, itself or through
// an alias.
func (t *tensor) isOutput() bool {
	for _, a := range append([]*tensor{t}, t.aliases...) {
		if a.output {
			return true
		}
	}
	return false
}

func (t *tensor) bytes() int64 { return rt.NumElements(t.shape) * int64(t.dtype.Size()) }

func (t *tensor) String() string { return fmt.Sprintf("%q %s%v", t.name, t.dtype, t.shape) }

// slot is the placeholder buffer that lowered ops reference until the
// arena is planned; bind replaces it with the real buffer and offset.
type slot struct{ t *tensor }

func (s slot) Size() int64 { return 1 << 62 }
func (s slot) Free()       {}

// step is one lowered node.
type step struct {
	node *model.Node // nil for plan-level steps
	ops  []rt.Op
}

// plan is the device-independent result of planning for one set of input
// shapes.
type plan struct {
	m        *model.Model
	mode     planMode
	tensors  []*tensor // model tensors first, then temporaries and constants
	steps    []step
	inputs   []*tensor
	outputs  []*tensor
	arena    int64 // arena bytes
	sum      int64 // sum of all intermediate tensor sizes, without reuse
	numOps   int
	opCounts map[string]int
	fold     *folder   // evaluates constant nodes while planning
	half     halfStats // what the precision pass did (precision.go)

	// Training plans only.
	gradOut  []gradResult // gradients the caller may read after a step
	keep     []*tensor    // arena roots that live to the end of the step
	hyper    *tensor      // per-step optimizer values, fed like an input
	optState []*tensor    // optimizer state in the weight buffer
	masks    []dropMask   // Dropout masks, fed like inputs
	optFrom  int          // index of the optimizer step in steps; 0 without one
	paramsG  *tensor      // the flat gradient block of the trained parameters
	// segCuts, when set (segSet), are the launch indices at which the
	// recording of forward and backward starts a new segment: the
	// gradient buckets of a data-parallel trainer are reduced between
	// segments (overlap.go).
	segCuts []int
	segSet  bool
}

// PlanError reports a planning failure at a node.
type PlanError struct {
	Node string // node name (or "#index op" when unnamed)
	Op   string
	Err  error
}

func (e *PlanError) Error() string {
	return fmt.Sprintf("engine: node %s (%s): %v", e.Node, e.Op, e.Err)
}

func (e *PlanError) Unwrap() error { return e.Err }

// ErrShape is wrapped by shape and dtype inference errors.
var ErrShape = errors.New("shape mismatch")

const arenaAlign = 256

// planMode selects how a model is planned: for inference (the zero
// value) or as a training step.
type planMode struct {
	// train lowers ops as in training: BatchNormalization uses batch
	// statistics and updates its running statistics, Dropout applies a
	// mask fed per step; nothing is fused or computed in place.
	train bool
	// mutable holds the model weights (by tensor index) whose values
	// change at run time: trained parameters and running statistics.
	mutable map[int]bool
	// params lists the trained parameters (model weight indices, all
	// mutable) that live in one flat block; see paramBlock.
	params []int
	// grad, when set, appends the backward pass and the optimizer step.
	grad *gradSpec
	// supports, when set, is the device's Supports: optional ops (rt.Fused)
	// are emitted only where it accepts them.
	supports func(rt.Op) error
	// half, when set (Options.Precision f16), is the device's Supports:
	// constant MatMul and Conv weights are stored in f16 where it accepts
	// the op so (precision.go).
	half func(rt.Op) error
}

// optional reports whether the plan may emit the optional op (rt.Fused):
// an inference plan whose device, and fold device if one is open, runs it.
func (p *plan) optional(op rt.Op) bool {
	m := p.mode
	if m.train || m.grad != nil || m.supports == nil || m.supports(op) != nil {
		return false
	}
	return p.fold.dev == nil || p.fold.dev.Supports(op) == nil
}

// newPlan plans m for the given input shapes (inputs whose shapes are not
// given use the model's, which must then be static). Constant nodes are
// evaluated on foldDev, or when it is nil on a device opened for this plan
// through the rt registry (see Options.FoldDevice).
func newPlan(m *model.Model, shapes map[string][]int, mode planMode, foldDev rt.Device) (*plan, error) {
	p := &plan{m: m, mode: mode, opCounts: map[string]int{}, fold: &folder{dev: foldDev}}
	defer p.fold.close()
	for i := range m.Tensors {
		mt := &m.Tensors[i]
		t := &tensor{id: i, name: mt.Name, dtype: mt.DType}
		t.root = t
		switch mt.Role {
		case model.Weight:
			t.shape = toInts(mt.Shape)
			t.value = &rt.Tensor{DType: mt.DType, Shape: t.shape, Data: mt.Data}
			if mode.mutable[i] {
				t.init, t.value = t.value, nil
			}
			t.where = inWeights
			t.defined = true
		case model.Input:
			t.input = true
			if s, ok := shapes[mt.Name]; ok {
				if err := checkShape(mt, s, " in Options.Shapes"); err != nil {
					return nil, err
				}
				t.shape = append([]int(nil), s...)
			} else {
				for d, v := range mt.Shape {
					if v < 0 {
						name := "?"
						if d < len(mt.DimNames) && mt.DimNames[d] != "" {
							name = mt.DimNames[d]
						}
						return nil, inputErr(mt.Name, ErrShape, "input %q: dim %d (%s) is dynamic; give its shape in Options.Shapes", mt.Name, d, name)
					}
				}
				t.shape = toInts(mt.Shape)
				if err := checkShape(mt, t.shape, " in the model"); err != nil {
					return nil, err
				}
			}
			t.defined = true
			p.inputs = append(p.inputs, t)
		case model.Output:
			t.output = true
			p.outputs = append(p.outputs, t)
		}
		p.tensors = append(p.tensors, t)
	}
	if err := p.paramBlock(mode.params); err != nil {
		return nil, err
	}
	end := len(m.Nodes) + 1
	for _, t := range p.tensors {
		t.lastUse = -1
		if t.output {
			t.lastUse = end
		}
	}
	for i := range m.Nodes {
		seen := map[int]bool{}
		for _, in := range m.Nodes[i].Inputs {
			if in >= 0 && in < len(p.tensors) {
				t := p.tensors[in]
				if !seen[in] {
					seen[in] = true
					t.readers++
				}
				if !t.output {
					t.lastUse = max(t.lastUse, i+1)
				}
			}
		}
	}
	p.steps = make([]step, len(m.Nodes))
	for i := range m.Nodes {
		n := &m.Nodes[i]
		if err := p.lowerNode(i+1, n); err != nil {
			name := n.Name
			if name == "" {
				name = fmt.Sprintf("#%d", i)
			}
			return nil, &PlanError{Node: name, Op: n.Op, Err: err}
		}
	}
	for _, t := range p.outputs {
		if !t.defined {
			return nil, fmt.Errorf("engine: output %q is never computed", t.name)
		}
	}
	if mode.grad != nil {
		if err := p.differentiate(mode.grad); err != nil {
			return nil, err
		}
		end = len(p.steps) + 1
		for _, t := range p.tensors {
			if t.output {
				t.lastUse = end
			}
		}
		for _, t := range p.keep {
			t.lastUse = end
		}
	}
	p.fuseAttention()
	p.fuseBias()
	p.fuseGelu()
	p.fuseSepConv()
	p.sinkTransposes()
	p.fuseMatMulResidual()
	p.fuseActivation()
	p.fuseElementwise()
	if err := p.halfWeights(); err != nil {
		return nil, err
	}
	p.elideConcats()
	if err := p.layout(end); err != nil {
		return nil, err
	}
	return p, nil
}

// lowerNode infers the node's output shapes and lowers it to primitives.
func (p *plan) lowerNode(stepIdx int, n *model.Node) error {
	def, ok := ops[n.Op]
	if !ok {
		return fmt.Errorf("%w: op %q", ErrUnsupportedOp, n.Op)
	}
	c := &nodeCtx{p: p, n: n, step: stepIdx}
	for j, idx := range n.Inputs {
		if idx < 0 {
			c.in = append(c.in, nil)
			continue
		}
		if idx >= len(p.tensors) {
			return fmt.Errorf("input %d: tensor index %d out of range", j, idx)
		}
		t := p.tensors[idx]
		if !t.defined {
			return fmt.Errorf("input %d (%q) is used before it is computed", j, t.name)
		}
		c.in = append(c.in, t)
	}
	for _, idx := range n.Outputs {
		if idx < 0 { // an absent optional output
			c.out = append(c.out, nil)
			continue
		}
		if idx >= len(p.tensors) {
			return fmt.Errorf("output tensor index %d out of range", idx)
		}
		t := p.tensors[idx]
		if t.defined {
			return fmt.Errorf("output %q is written twice", t.name)
		}
		c.out = append(c.out, t)
	}
	if len(c.in) < def.minIn || (def.maxIn >= 0 && len(c.in) > def.maxIn) {
		return fmt.Errorf("has %d inputs, want %s", len(c.in), inputRange(def.minIn, def.maxIn))
	}
	for j := 0; j < def.minIn; j++ {
		if c.in[j] == nil {
			return fmt.Errorf("required input %d is missing", j)
		}
	}
	if err := def.fn(c); err != nil {
		return err
	}
	if _, err := p.tryFold(c); err != nil {
		return err
	}
	for _, t := range c.out {
		if t != nil && !t.defined {
			return fmt.Errorf("output %q was not produced (internal error)", t.name)
		}
	}
	p.steps[stepIdx-1] = step{node: n, ops: c.ops}
	for _, o := range c.ops {
		p.opCounts[o.OpName()]++
	}
	p.numOps += len(c.ops)
	return nil
}

func inputRange(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// layout computes lifetimes of arena roots and places them.
func (p *plan) layout(end int) error {
	// Storage is needed by what the final ops touch (fusion and folding
	// may have dropped earlier references) and by the outputs.
	for _, t := range p.tensors {
		t.used = false
	}
	for _, st := range p.steps {
		for _, op := range st.ops {
			rt.MapRefs(op, func(_ string, r *rt.Ref) {
				if sl, ok := r.Buf.(slot); ok {
					sl.t.used = true
				}
			})
		}
	}
	for _, t := range p.outputs {
		t.root.used = true
	}
	var roots []*tensor
	for _, t := range p.tensors {
		if t.root != t || t.where != inArena || !t.defined || (!t.used && !t.input) {
			continue
		}
		last := t.first
		if t.input {
			t.first = 0
		}
		for _, a := range append([]*tensor{t}, t.aliases...) {
			last = max(last, a.lastUse)
			if a.output {
				last = end
			}
		}
		t.last = max(last, t.first)
		roots = append(roots, t)
	}
	ls := make([]rt.Lifetime, len(roots))
	for i, t := range roots {
		ls[i] = rt.Lifetime{Size: t.bytes(), First: t.first, Last: t.last}
	}
	ap, err := rt.PlanArena(ls, arenaAlign)
	if err != nil {
		return err
	}
	for i, t := range roots {
		t.offset = ap.Offsets[i]
	}
	p.arena = ap.Size
	// What a runtime without reuse would allocate: every intermediate,
	// output and temporary tensor on its own (views and in-place results
	// included), aligned the same way.
	p.sum = 0
	for _, t := range p.tensors {
		if t.defined && t.root.where == inArena && !t.input && (t.used || t.root.used) {
			p.sum += (t.bytes() + arenaAlign - 1) &^ (arenaAlign - 1)
		}
	}
	return nil
}

func toInts(s []int64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}
