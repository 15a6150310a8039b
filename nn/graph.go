package nn

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Value is a tensor of a [Graph]: a graph input, a parameter, a constant
// or a node output. The zero Value stands for an absent optional operand.
// A Value returned by a call that failed is invalid: it records no
// further errors when used, and [Graph.Model] returns the first errors.
type Value struct {
	name  string
	dtype rt.DType
	rank  int // -1: unknown
	bad   bool
}

// Name returns the tensor's name in the built model (the key of its
// entry in a Trainer's inputs, outputs, gradients and weights).
func (v Value) Name() string { return v.name }

// DType returns the tensor's element type.
func (v Value) DType() rt.DType { return v.dtype }

// Rank returns the number of dims, or -1 when the graph does not know it.
func (v Value) Rank() int {
	if v.name == "" {
		return -1
	}
	return v.rank
}

// Valid reports whether v names a tensor (it is neither absent nor the
// result of a failed call).
func (v Value) Valid() bool { return v.name != "" && !v.bad }

// Layer is a building block of a network: Forward adds its nodes (and, on
// the first call, its parameters) to g and returns its output. Calling
// Forward again on the same graph reuses the parameters (weight sharing).
type Layer interface {
	Forward(g *Graph, x Value) Value
}

// weight is a graph constant: a trained parameter, a running statistic
// or a fixed tensor.
type weight struct {
	name  string
	dtype rt.DType
	shape []int
	f     []float64 // float data
	i     []int64   // I64 data
	b     []bool    // Bool data
	param bool      // trained
	stat  bool      // BatchNormalization running statistic
}

// node is an operator node of the graph.
type node struct {
	name    string
	op      string
	inputs  []string
	outputs []string
	attrs   model.Attrs
	noGrad  bool
}

type input struct {
	name  string
	dtype rt.DType
	shape []int64
}

// scope is one level of parameter naming. A slot scope (a Sequential's
// child index) is taken as the whole prefix by the first unnamed layer
// bound in it.
type scope struct {
	name string
	slot bool
	used bool
}

// Graph builds a network: inputs, parameters initialised as PyTorch does
// (seeded, deterministic), layers and losses, then a [model.Model] that
// the engine runs and trains. Methods never panic on bad arguments: the
// first errors are returned by [Graph.Model].
//
// Parameter names follow PyTorch's state_dict keys: a layer's prefix (its
// Name, its index in a Sequential, or a generated name such as "linear0")
// joined with dots to the parameter's PyTorch name ("0.weight",
// "encoder.layers.1.self_attn.in_proj_weight").
type Graph struct {
	dtype     rt.DType
	seed      uint64
	inputs    []input
	weights   []*weight
	wIndex    map[string]*weight
	nodes     []*node
	names     map[string]bool // every tensor name in use
	nodeNames map[string]bool
	scopes    []scope
	noGrad    int
	counters  map[string]int
	overrides map[string][]float64
	errs      []error
}

// NewGraph returns an empty graph whose float tensors (inputs by default,
// parameters, activations) have dtype dt, F32 or F64. seed determines
// every parameter's initial value: each parameter draws from its own
// generator, seeded by seed and its name, so that adding a layer does not
// change the others' initial values.
func NewGraph(dt rt.DType, seed uint64) *Graph {
	g := &Graph{dtype: dt, seed: seed, wIndex: map[string]*weight{}, names: map[string]bool{}, nodeNames: map[string]bool{},
		counters: map[string]int{}, overrides: map[string][]float64{}}
	if dt != rt.F32 && dt != rt.F64 {
		g.errorf("graph dtype %s: want f32 or f64", dt)
	}
	return g
}

// DType returns the graph's float dtype.
func (g *Graph) DType() rt.DType { return g.dtype }

// Seed returns the graph's seed.
func (g *Graph) Seed() uint64 { return g.seed }

func (g *Graph) errorf(format string, args ...any) Value {
	if len(g.errs) < 10 {
		g.errs = append(g.errs, fmt.Errorf("nn: "+format, args...))
	}
	return Value{bad: true, rank: -1}
}

// Err returns the errors recorded so far, joined, or nil.
func (g *Graph) Err() error { return errors.Join(g.errs...) }

// check reports whether every given value is usable (absent optional
// operands are allowed); a value from a failed call makes it false
// without a new error.
func (g *Graph) check(vs ...Value) bool {
	for _, v := range vs {
		if v.bad {
			return false
		}
		if v.name != "" && !g.names[v.name] {
			g.errorf("value %q does not belong to this graph", v.name)
			return false
		}
	}
	return true
}

func (g *Graph) claim(name string) bool {
	if name == "" {
		g.errorf("empty name")
		return false
	}
	if g.names[name] {
		g.errorf("name %q used twice", name)
		return false
	}
	g.names[name] = true
	return true
}

// Input declares a graph input of the graph's float dtype. Dims of -1 are
// bound when the model is planned (engine.TrainOptions.Shapes or the
// first step's inputs).
func (g *Graph) Input(name string, shape ...int) Value {
	return g.InputOf(name, g.dtype, shape...)
}

// InputOf declares a graph input of dtype dt (class targets and token ids
// are rt.I64).
func (g *Graph) InputOf(name string, dt rt.DType, shape ...int) Value {
	if !g.claim(name) {
		return Value{bad: true, rank: -1}
	}
	s := make([]int64, len(shape))
	for i, d := range shape {
		s[i] = int64(d)
	}
	g.inputs = append(g.inputs, input{name: name, dtype: dt, shape: s})
	return Value{name: name, dtype: dt, rank: len(shape)}
}

// Scope runs f with name pushed onto the parameter prefix: layers bound
// inside get names such as "name.fc.weight".
func (g *Graph) Scope(name string, f func()) {
	g.scopes = append(g.scopes, scope{name: name})
	defer func() { g.scopes = g.scopes[:len(g.scopes)-1] }()
	f()
}

// slot runs f in a slot scope: the first unnamed layer bound directly
// inside takes name as its whole prefix (a Sequential's child index).
func (g *Graph) slot(name string, f func()) {
	g.scopes = append(g.scopes, scope{name: name, slot: true})
	defer func() { g.scopes = g.scopes[:len(g.scopes)-1] }()
	f()
}

func (g *Graph) scopePrefix() string {
	var parts []string
	for _, s := range g.scopes {
		if s.name != "" {
			parts = append(parts, s.name)
		}
	}
	return strings.Join(parts, ".")
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

// layerPrefix returns the parameter prefix of a layer being bound: its
// name within the current scopes. In a fresh slot scope (a Sequential's
// child) the layer's name, if any, replaces the slot's; elsewhere an
// unnamed layer gets a generated name kind<n>, counted per scope.
func (g *Graph) layerPrefix(name, kind string) string {
	if n := len(g.scopes); n > 0 && g.scopes[n-1].slot && !g.scopes[n-1].used {
		// A named layer in a slot replaces the slot's name.
		g.scopes[n-1].used = true
		if name != "" {
			g.scopes[n-1].name = name
		}
		return g.scopePrefix()
	}
	if name != "" {
		return join(g.scopePrefix(), name)
	}
	key := "layer:" + g.scopePrefix() + ":" + kind
	for {
		k := g.counters[key]
		g.counters[key]++
		p := join(g.scopePrefix(), kind+strconv.Itoa(k))
		if !g.prefixUsed(p) {
			return p
		}
	}
}

func (g *Graph) prefixUsed(p string) bool {
	for n := range g.names {
		if n == p || strings.HasPrefix(n, p+".") {
			return true
		}
	}
	return false
}

// NoGrad runs f with gradient recording off: the nodes f adds pass no
// gradient to their inputs, like code under torch.no_grad(). Parameters
// used only inside NoGrad get a zero gradient and an optimizer without
// weight decay leaves them unchanged. [Graph.TrainOptions] lists the
// nodes in engine.TrainOptions.NoGrad.
func (g *Graph) NoGrad(f func()) {
	g.noGrad++
	defer func() { g.noGrad-- }()
	f()
}

// Init fills a new parameter's values (row-major) from a seeded
// generator.
type Init func(r *rand.Rand, v []float64)

// Param adds a trained parameter named name (inside the current scopes)
// with the given shape, initialised by init (zeros when nil). Layers call
// it; custom layers may too.
func (g *Graph) Param(name string, shape []int, init Init) Value {
	return g.addFloat(join(g.scopePrefix(), name), shape, init, true, false)
}

// Const adds a float constant of the graph's dtype (not trained).
func (g *Graph) Const(name string, shape []int, data []float64) Value {
	if len(data) != numel(shape) {
		return g.errorf("constant %q: %d values for shape %v", name, len(data), shape)
	}
	return g.addFloat(g.constName(name), shape, func(_ *rand.Rand, v []float64) { copy(v, data) }, false, false)
}

// ConstInt64 adds an int64 constant (indices, shapes).
func (g *Graph) ConstInt64(name string, shape []int, data []int64) Value {
	if len(data) != numel(shape) {
		return g.errorf("constant %q: %d values for shape %v", name, len(data), shape)
	}
	full := g.constName(name)
	if !g.claim(full) {
		return Value{bad: true, rank: -1}
	}
	w := &weight{name: full, dtype: rt.I64, shape: slices.Clone(shape), i: slices.Clone(data)}
	g.weights = append(g.weights, w)
	g.wIndex[full] = w
	return Value{name: full, dtype: rt.I64, rank: len(shape)}
}

// constName returns a fresh name for a constant: name in the current
// scopes, or a generated one when name is empty or taken.
func (g *Graph) constName(name string) string {
	if name == "" {
		name = "const"
	}
	full := join(g.scopePrefix(), name)
	for g.names[full] {
		full = join(g.scopePrefix(), name+"_"+strconv.Itoa(g.counters["const:"+name]))
		g.counters["const:"+name]++
	}
	return full
}

func (g *Graph) scalar(v float64) Value { return g.Const("", nil, []float64{v}) }

func (g *Graph) ints(v ...int64) Value { return g.ConstInt64("", []int{len(v)}, v) }

func (g *Graph) addFloat(name string, shape []int, init Init, param, stat bool) Value {
	for _, d := range shape {
		if d < 0 {
			return g.errorf("parameter %q: negative dim in shape %v", name, shape)
		}
	}
	if !g.claim(name) {
		return Value{bad: true, rank: -1}
	}
	w := &weight{name: name, dtype: g.dtype, shape: slices.Clone(shape), f: make([]float64, numel(shape)),
		param: param, stat: stat}
	if init != nil {
		h := fnv.New64a()
		h.Write([]byte(name))
		init(rand.New(rand.NewPCG(g.seed, h.Sum64())), w.f)
	}
	if ov, ok := g.overrides[name]; ok {
		if len(ov) != len(w.f) {
			g.errorf("SetParam %q: %d values, parameter has shape %v", name, len(ov), shape)
		} else {
			copy(w.f, ov)
		}
	}
	g.weights = append(g.weights, w)
	g.wIndex[name] = w
	return Value{name: name, dtype: g.dtype, rank: len(shape)}
}

// SetParam overrides the initial value of a parameter (or a running
// statistic) by name, for example with weights exported from PyTorch. v
// may have any float dtype; its values are converted to the graph's
// dtype. A name that no layer has created yet is applied when one does;
// [Graph.Model] reports names that never matched.
func (g *Graph) SetParam(name string, v *rt.Tensor) error {
	if v == nil || !v.DType.IsFloat() {
		return fmt.Errorf("nn: SetParam %q: want a float tensor", name)
	}
	if err := v.Check(); err != nil {
		return fmt.Errorf("nn: SetParam %q: %w", name, err)
	}
	vals := v.Float64s()
	if w, ok := g.wIndex[name]; ok {
		if w.f == nil || (!w.param && !w.stat) {
			return fmt.Errorf("nn: SetParam %q: not a parameter or running statistic", name)
		}
		if !slices.Equal(w.shape, v.Shape) && !(len(w.shape) == 0 && v.Len() == 1) {
			return fmt.Errorf("nn: SetParam %q: shape %v, parameter has shape %v", name, v.Shape, w.shape)
		}
		copy(w.f, vals)
		return nil
	}
	g.overrides[name] = vals
	return nil
}

// ParamValue returns the current initial value of a parameter or running
// statistic, in the graph's dtype.
func (g *Graph) ParamValue(name string) (*rt.Tensor, error) {
	w, ok := g.wIndex[name]
	if !ok || w.f == nil || (!w.param && !w.stat) {
		return nil, fmt.Errorf("nn: no parameter %q", name)
	}
	return rt.FromFloat64(w.dtype, w.f, w.shape...), nil
}

// Params returns the names of the trained parameters, in creation order.
func (g *Graph) Params() []string {
	var out []string
	for _, w := range g.weights {
		if w.param {
			out = append(out, w.name)
		}
	}
	return out
}

// Buffers returns the names of the running statistics (BatchNorm's
// running_mean and running_var), which a Trainer updates but does not
// differentiate.
func (g *Graph) Buffers() []string {
	var out []string
	for _, w := range g.weights {
		if w.stat {
			out = append(out, w.name)
		}
	}
	return out
}

// NoGradNodes returns the names of the nodes added inside [Graph.NoGrad].
func (g *Graph) NoGradNodes() []string {
	var out []string
	for _, n := range g.nodes {
		if n.noGrad {
			out = append(out, n.name)
		}
	}
	return out
}

// Op adds a node of the ONNX operator op (any op the engine plans, see
// docs/ops.md) with one output. Absent optional inputs are zero Values.
func (g *Graph) Op(op string, inputs []Value, attrs model.Attrs) Value {
	return g.op(op, inputs, attrs, -1)
}

// OpN adds a node with n outputs.
func (g *Graph) OpN(op string, inputs []Value, n int, attrs model.Attrs) []Value {
	return g.opN(op, inputs, attrs, n, nil)
}

// op adds a one-output node whose output has the given rank (-1 unknown)
// and the dtype of its first input.
func (g *Graph) op(op string, inputs []Value, attrs model.Attrs, rank int) Value {
	return g.opN(op, inputs, attrs, 1, []int{rank})[0]
}

func (g *Graph) opN(op string, inputs []Value, attrs model.Attrs, n int, ranks []int) []Value {
	outs := make([]Value, n)
	for i := range outs {
		outs[i] = Value{bad: true, rank: -1}
	}
	if n < 1 || !g.check(inputs...) {
		return outs
	}
	prefix := g.scopePrefix()
	var name string
	for {
		k := g.counters["node:"+op]
		g.counters["node:"+op]++
		name = join(prefix, op+"_"+strconv.Itoa(k))
		if !g.names[name] && !g.names[name+":0"] && !g.nodeNames[name] {
			break
		}
	}
	g.nodeNames[name] = true
	nd := &node{name: name, op: op, attrs: attrs, noGrad: g.noGrad > 0}
	for _, in := range inputs {
		nd.inputs = append(nd.inputs, in.name)
	}
	dt := g.dtype
	if len(inputs) > 0 && inputs[0].name != "" {
		dt = inputs[0].dtype
	}
	for i := range outs {
		on := name
		if n > 1 {
			on = name + ":" + strconv.Itoa(i)
		}
		if !g.claim(on) {
			return outs
		}
		rank := -1
		if i < len(ranks) {
			rank = ranks[i]
		}
		nd.outputs = append(nd.outputs, on)
		outs[i] = Value{name: on, dtype: dt, rank: rank}
	}
	g.nodes = append(g.nodes, nd)
	return outs
}

// withDType returns v marked with dtype dt (for ops whose output dtype
// differs from their first input's).
func withDType(v Value, dt rt.DType) Value {
	if v.Valid() {
		v.dtype = dt
	}
	return v
}

// Model builds the model that computes outputs (typically the network's
// output and the loss). Only the nodes, inputs and weights the outputs
// depend on are kept, so one graph can yield a training model (with the
// loss and its target input) and an inference model. The graph may be
// extended and built again.
func (g *Graph) Model(outputs ...Value) (*model.Model, error) {
	if err := g.Err(); err != nil {
		return nil, err
	}
	if len(outputs) == 0 {
		return nil, errors.New("nn: Model: no outputs")
	}
	for name := range g.overrides {
		if _, ok := g.wIndex[name]; !ok {
			return nil, fmt.Errorf("nn: SetParam %q: no such parameter", name)
		}
	}
	producer := map[string]*node{}
	for _, n := range g.nodes {
		for _, o := range n.outputs {
			producer[o] = n
		}
	}
	need := map[string]bool{}
	var stack []string
	for _, o := range outputs {
		if !o.Valid() {
			return nil, errors.New("nn: Model: an output is absent or invalid")
		}
		if !g.names[o.name] {
			return nil, fmt.Errorf("nn: Model: output %q does not belong to this graph", o.name)
		}
		stack = append(stack, o.name)
	}
	keepNode := map[*node]bool{}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if need[t] {
			continue
		}
		need[t] = true
		if n := producer[t]; n != nil && !keepNode[n] {
			keepNode[n] = true
			for _, in := range n.inputs {
				if in != "" {
					stack = append(stack, in)
				}
			}
		}
	}
	b := model.NewBuilder()
	for _, in := range g.inputs {
		if need[in.name] {
			b.Input(in.name, in.dtype, in.shape...)
		}
	}
	for _, w := range g.weights {
		if !need[w.name] {
			continue
		}
		sh := make([]int64, len(w.shape))
		for i, d := range w.shape {
			sh[i] = int64(d)
		}
		switch {
		case w.dtype == rt.I64:
			b.Weight(w.name, w.dtype, sh, w.i)
		case w.dtype == rt.Bool:
			b.Weight(w.name, w.dtype, sh, w.b)
		case w.dtype == rt.F32:
			f := make([]float32, len(w.f))
			for i, v := range w.f {
				f[i] = float32(v)
			}
			b.Weight(w.name, w.dtype, sh, f)
		default:
			b.Weight(w.name, w.dtype, sh, w.f)
		}
	}
	outNames := map[string]bool{}
	for _, n := range g.nodes {
		if keepNode[n] {
			b.Node(n.name, n.op, n.inputs, n.outputs, n.attrs)
			for _, o := range n.outputs {
				outNames[o] = true
			}
		}
	}
	for _, o := range outputs {
		name := o.name
		if !outNames[name] {
			// An input or weight as an output: through an Identity node.
			id := name + ".out"
			for g.names[id] || outNames[id] {
				id += "_"
			}
			b.Node(id, "Identity", []string{name}, []string{id}, nil)
			outNames[id] = true
			name = id
		}
		b.Output(name)
	}
	return b.Build()
}

// TrainOptions returns engine training options for m (built by
// [Graph.Model]) that minimise loss: Loss, Params (the graph's trained
// parameters present in m), Frozen (every other float weight of m:
// constants such as class weights or a positional-encoding table, which
// the engine would otherwise train when Params is empty) and NoGrad (the
// nodes of m added inside [Graph.NoGrad]). The caller adds an optimizer,
// shapes and a seed.
func (g *Graph) TrainOptions(m *model.Model, loss Value) engine.TrainOptions {
	opts := engine.TrainOptions{Loss: loss.name}
	for _, name := range g.Params() {
		if m.TensorIndex(name) >= 0 {
			opts.Params = append(opts.Params, name)
		}
	}
	for _, t := range m.Tensors {
		if w := g.wIndex[t.Name]; t.Role == model.Weight && t.DType.IsFloat() && (w == nil || (!w.param && !w.stat)) {
			opts.Frozen = append(opts.Frozen, t.Name)
		}
	}
	inModel := map[string]bool{}
	for _, n := range m.Nodes {
		inModel[n.Name] = true
	}
	for _, name := range g.NoGradNodes() {
		if inModel[name] {
			opts.NoGrad = append(opts.NoGrad, name)
		}
	}
	return opts
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
