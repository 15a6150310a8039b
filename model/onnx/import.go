package onnx

import (
	"container/heap"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/model/onnx/onnxpb"
	"github.com/vrun-go/vrun/rt"
)

// Options controls [Import].
type Options struct {
	// BaseDir is the directory that external tensor data locations are
	// relative to. ImportFile sets it to the model file's directory when it
	// is empty; with Import and an empty BaseDir, external data is refused.
	BaseDir string

	// Supported reports whether vrun implements an operator of the default
	// ONNX domain (after normalisation to the latest opset, so "Resize", not
	// "Upsample"). Nil accepts every operator. Import fails with an
	// *UnsupportedError listing every node whose operator is not supported.
	Supported func(op string) bool
}

// Unsupported is one problem reported by [UnsupportedError].
type Unsupported struct {
	Node   string // node name (generated as "Op_index" when the model has none); "" for graph-level items
	Op     string // operator type; "domain/op" outside the default domain
	Opset  int64  // the model's opset version for the operator's domain
	Reason string // why, e.g. "operator not supported"
}

func (u Unsupported) String() string {
	if u.Node == "" && u.Op == "" {
		return u.Reason
	}
	return fmt.Sprintf("node %q (%s, opset %d): %s", u.Node, u.Op, u.Opset, u.Reason)
}

// UnsupportedError lists everything in a model that vrun cannot run, all at
// once. It matches [ErrUnsupported] under errors.Is.
type UnsupportedError struct {
	Items []Unsupported
}

func (e *UnsupportedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "onnx: %d unsupported item(s)", len(e.Items))
	for i, u := range e.Items {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(u.String())
	}
	return b.String()
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ImportFile reads an ONNX model file and converts it with [Import]. If
// opts.BaseDir is empty, external data is looked up next to the file.
func ImportFile(path string, opts Options) (*model.Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Dir(path)
	}
	m, err := Import(data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Import converts a serialized ONNX ModelProto into a vrun model: see the
// package documentation for what is supported and how older opsets are
// normalised. The result passes model.Validate. Errors wrap [ErrInvalid]
// (malformed model), [ErrUnsupported] (an *UnsupportedError, or an
// unsupported tensor type), or are I/O errors reading external data.
func Import(data []byte, opts Options) (*model.Model, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, fmt.Errorf("onnx: %w: protobuf: %v", ErrInvalid, err)
	}
	return ImportProto(&mp, opts)
}

// ImportProto is [Import] for an already-decoded ModelProto, which it does
// not modify.
func ImportProto(mp *onnxpb.ModelProto, opts Options) (*model.Model, error) {
	im := &importer{
		opts:    opts,
		mp:      mp,
		opsets:  map[string]int64{},
		weights: map[string]*rt.Tensor{},
		types:   map[string]tinfo{},
		used:    map[string]bool{},
	}
	m, err := im.run()
	if err != nil {
		var ue *UnsupportedError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, fmt.Errorf("onnx: %w", err)
	}
	return m, nil
}

// tinfo is what the graph declares about a value: its ONNX element type
// (0 unknown) and rank (-1 unknown).
type tinfo struct {
	elem int32
	rank int
}

// inode is a node during import, with tensors still named by string.
type inode struct {
	name   string // node name, for messages and the vrun node
	op     string
	domain string
	attrs  []model.Attr
	in     []string // "" = absent optional input
	out    []string // "" = absent optional output
}

type importer struct {
	opts    Options
	mp      *onnxpb.ModelProto
	opset   int64 // default domain
	opsets  map[string]int64
	weights map[string]*rt.Tensor // initializers, Constant outputs, generated constants
	types   map[string]tinfo
	inputs  []*onnxpb.ValueInfoProto // graph inputs that are not initializers
	outputs []string
	used    map[string]bool // every tensor name in use, for fresh names
	nodes   []*inode
	probs   []Unsupported
	funcs   map[string]bool // "domain/name" of model-local functions
}

func (im *importer) problem(n *inode, reason string, args ...any) {
	u := Unsupported{Reason: fmt.Sprintf(reason, args...)}
	if n != nil {
		u.Node, u.Op, u.Opset = n.name, n.op, im.opsets[n.domain]
		if n.domain != "" {
			u.Op = n.domain + "/" + n.op
		}
	}
	im.probs = append(im.probs, u)
}

// fresh returns an unused tensor name based on base.
func (im *importer) fresh(base string) string {
	name := base
	for i := 1; im.used[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	im.used[name] = true
	return name
}

// constant adds a generated weight and returns its name.
func (im *importer) constant(base string, t *rt.Tensor) string {
	name := im.fresh(base)
	im.weights[name] = t
	im.types[name] = tinfo{elem: ONNXType(t.DType), rank: len(t.Shape)}
	return name
}

func (im *importer) run() (*model.Model, error) {
	mp := im.mp
	g := mp.GetGraph()
	if g == nil {
		return nil, invalidf("model has no graph")
	}
	for _, o := range mp.OpsetImport {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if _, dup := im.opsets[d]; dup {
			return nil, invalidf("opset_import lists domain %q twice", d)
		}
		im.opsets[d] = o.GetVersion()
	}
	im.funcs = map[string]bool{}
	for _, f := range mp.Functions {
		im.funcs[f.GetDomain()+"/"+f.GetName()] = true
	}
	var ok bool
	if im.opset, ok = im.opsets[""]; !ok {
		for _, n := range g.Node {
			if d := n.GetDomain(); d == "" || d == "ai.onnx" {
				return nil, invalidf("node %q (%s) is in the default domain, which opset_import does not list", n.GetName(), n.GetOpType())
			}
		}
	}
	if len(g.SparseInitializer) > 0 {
		im.problem(nil, "sparse initializers are not supported")
	}

	// Names and declared types.
	for _, vi := range g.ValueInfo {
		im.declare(vi)
	}
	for _, n := range g.Node {
		for _, s := range n.Input {
			im.used[s] = true
		}
		for _, s := range n.Output {
			im.used[s] = true
		}
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, tp := range g.Initializer {
		name := tp.GetName()
		if name == "" {
			return nil, invalidf("initializer with no name")
		}
		if _, dup := inits[name]; dup {
			return nil, invalidf("initializer %q defined twice", name)
		}
		inits[name] = tp
		t, err := DecodeTensor(tp, im.opts.BaseDir)
		if err != nil {
			return nil, fmt.Errorf("initializer: %w", err)
		}
		im.weights[name] = t
		im.types[name] = tinfo{elem: tp.GetDataType(), rank: len(tp.Dims)}
		im.used[name] = true
	}
	seenIn := map[string]bool{}
	for _, vi := range g.Input {
		name := vi.GetName()
		if name == "" {
			return nil, invalidf("graph input with no name")
		}
		if seenIn[name] {
			return nil, invalidf("graph input %q listed twice", name)
		}
		seenIn[name] = true
		im.used[name] = true
		if tp, ok := inits[name]; ok {
			// IR < 4: initializers are also listed as inputs (overridable
			// defaults). vrun treats them as constant weights.
			if tt := vi.GetType().GetTensorType(); tt != nil && tt.GetElemType() != 0 && tt.GetElemType() != tp.GetDataType() {
				return nil, invalidf("type mismatch: graph input %q is declared %s but its initializer is %s",
					name, DataTypeName(tt.GetElemType()), DataTypeName(tp.GetDataType()))
			}
			continue
		}
		im.declare(vi)
		im.inputs = append(im.inputs, vi)
	}
	seenOut := map[string]bool{}
	for _, vi := range g.Output {
		name := vi.GetName()
		if name == "" {
			return nil, invalidf("graph output with no name")
		}
		if seenOut[name] {
			im.problem(nil, "graph output %q is listed twice", name)
			continue
		}
		seenOut[name] = true
		im.used[name] = true
		im.declare(vi)
		im.outputs = append(im.outputs, name)
		if t := vi.GetType(); t != nil && t.GetTensorType() == nil {
			im.problem(nil, "graph output %q is %s, not a tensor", name, typeKind(t))
		}
	}
	for _, vi := range im.inputs {
		im.checkInput(vi)
	}

	// Nodes: convert attributes and normalise to the latest opset.
	consumed := map[string]int{}
	for _, n := range g.Node {
		for _, s := range n.Input {
			if s != "" {
				consumed[s]++
			}
		}
	}
	for _, o := range im.outputs {
		consumed[o]++
	}
	for i, n := range g.Node {
		if err := im.lower(i, n, consumed); err != nil {
			return nil, err
		}
	}

	if err := im.checkStructure(); err != nil {
		return nil, err
	}
	if err := im.sort(); err != nil {
		return nil, err
	}
	im.eliminate()
	im.fixOutputs()

	if f := im.opts.Supported; f != nil {
		for _, n := range im.nodes {
			if n.domain == "" && !f(n.op) {
				im.problem(n, "operator not supported")
			}
		}
	}
	if len(im.probs) > 0 {
		return nil, &UnsupportedError{Items: im.probs}
	}
	return im.build()
}

// declare records the declared type of a value.
func (im *importer) declare(vi *onnxpb.ValueInfoProto) {
	tt := vi.GetType().GetTensorType()
	if tt == nil || vi.GetName() == "" {
		return
	}
	ti := tinfo{elem: tt.GetElemType(), rank: -1}
	if tt.Shape != nil {
		ti.rank = len(tt.Shape.Dim)
	}
	im.types[vi.GetName()] = ti
}

func typeKind(t *onnxpb.TypeProto) string {
	switch {
	case t.GetSequenceType() != nil:
		return "a sequence"
	case t.GetMapType() != nil:
		return "a map"
	case t.GetOptionalType() != nil:
		return "an optional"
	case t.GetSparseTensorType() != nil:
		return "a sparse tensor"
	case t.GetOpaqueType() != nil:
		return "an opaque value"
	}
	return "a value of unknown type"
}

// checkInput reports a graph input vrun cannot feed.
func (im *importer) checkInput(vi *onnxpb.ValueInfoProto) {
	name := vi.GetName()
	t := vi.GetType()
	tt := t.GetTensorType()
	if tt == nil {
		im.problem(nil, "graph input %q is %s, not a tensor", name, typeKind(t))
		return
	}
	if tt.GetElemType() == 0 {
		im.problem(nil, "graph input %q has no element type", name)
		return
	}
	if _, ok := DType(tt.GetElemType()); !ok {
		im.problem(nil, "graph input %q has element type %s", name, DataTypeName(tt.GetElemType()))
	}
	if tt.Shape == nil {
		im.problem(nil, "graph input %q has unknown rank", name)
	} else if len(tt.Shape.Dim) > model.MaxRank {
		im.problem(nil, "graph input %q has rank %d (limit %d)", name, len(tt.Shape.Dim), model.MaxRank)
	}
}

// checkStructure verifies single assignment and that every value used is
// defined somewhere (before sorting, so order does not matter).
func (im *importer) checkStructure() error {
	producer := map[string]*inode{}
	for _, vi := range im.inputs {
		producer[vi.GetName()] = nil
	}
	for name := range im.weights {
		producer[name] = nil
	}
	for _, n := range im.nodes {
		present := 0
		for _, o := range n.out {
			if o == "" {
				continue
			}
			present++
			if p, dup := producer[o]; dup {
				if p == nil {
					return invalidf("node %q (%s) writes %q, which is a graph input or initializer", n.name, n.op, o)
				}
				return invalidf("value %q is produced by node %q (%s) and by node %q (%s)", o, p.name, p.op, n.name, n.op)
			}
			producer[o] = n
		}
		if present == 0 {
			return invalidf("node %q (%s) has no outputs", n.name, n.op)
		}
	}
	for _, n := range im.nodes {
		for k, s := range n.in {
			if _, ok := producer[s]; s != "" && !ok {
				return invalidf("node %q (%s): input %d %q is not a graph input, an initializer or any node's output", n.name, n.op, k, s)
			}
		}
	}
	for _, o := range im.outputs {
		if _, ok := producer[o]; !ok {
			return invalidf("graph output %q is not produced by any node", o)
		}
	}
	return nil
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sort orders im.nodes topologically, keeping the file order where it is
// already valid, and reports a cycle by node names.
func (im *importer) sort() error {
	prod := map[string]int{}
	for i, n := range im.nodes {
		for _, o := range n.out {
			if o != "" {
				prod[o] = i
			}
		}
	}
	indeg := make([]int, len(im.nodes))
	users := make([][]int, len(im.nodes))
	for i, n := range im.nodes {
		for _, s := range n.in {
			if p, ok := prod[s]; ok && s != "" {
				indeg[i]++
				users[p] = append(users[p], i)
			}
		}
	}
	h := &intHeap{}
	for i, d := range indeg {
		if d == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	order := make([]*inode, 0, len(im.nodes))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, im.nodes[i])
		for _, u := range users[i] {
			if indeg[u]--; indeg[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) < len(im.nodes) {
		var names []string
		for i, d := range indeg {
			if d > 0 {
				names = append(names, fmt.Sprintf("%q (%s)", im.nodes[i].name, im.nodes[i].op))
			}
		}
		more := ""
		if len(names) > 10 {
			more = fmt.Sprintf(" and %d more", len(names)-10)
			names = names[:10]
		}
		return invalidf("the graph has a cycle through nodes %s%s", strings.Join(names, ", "), more)
	}
	im.nodes = order
	return nil
}

// eliminate removes Identity nodes and inference-mode Dropout nodes,
// rewiring their consumers to the node's input. When the removed node's
// output is a graph output, the producer of its input is made to write the
// graph output directly; where that is impossible (the input is a graph
// input, a weight or another graph output) the node stays, as Identity.
func (im *importer) eliminate() {
	isOut := map[string]bool{}
	for _, o := range im.outputs {
		isOut[o] = true
	}
	produced := map[string]bool{}
	for _, n := range im.nodes {
		for _, o := range n.out {
			produced[o] = true
		}
	}
	ren := map[string]string{}
	find := func(s string) string {
		for {
			t, ok := ren[s]
			if !ok {
				return s
			}
			s = t
		}
	}
	kept := im.nodes[:0]
	for _, n := range im.nodes {
		for k, s := range n.in {
			n.in[k] = find(s)
		}
		removable := n.domain == "" && len(n.in) >= 1 && n.in[0] != "" && len(n.out) >= 1 && n.out[0] != "" &&
			(n.op == "Identity" || n.op == "Dropout" && (len(n.out) < 2 || n.out[1] == ""))
		if !removable {
			kept = append(kept, n)
			continue
		}
		x, y := n.in[0], n.out[0]
		switch {
		case !isOut[y]:
			ren[y] = x
		case produced[x] && !isOut[x]:
			ren[x] = y
			// Rewrite x where it was already used and written.
			for _, k := range kept {
				for i, s := range k.in {
					if s == x {
						k.in[i] = y
					}
				}
				for i, s := range k.out {
					if s == x {
						k.out[i] = y
					}
				}
			}
		default:
			n.op, n.attrs, n.in, n.out = "Identity", nil, n.in[:1], n.out[:1]
			kept = append(kept, n)
		}
	}
	im.nodes = kept
}

// fixOutputs makes every graph output the output of a node: a graph
// output that is a weight (an initializer or a Constant) is copied by an
// Identity node from a renamed weight.
func (im *importer) fixOutputs() {
	inputs := map[string]bool{}
	for _, vi := range im.inputs {
		inputs[vi.GetName()] = true
	}
	for _, o := range im.outputs {
		if inputs[o] {
			im.problem(nil, "graph output %q is also a graph input (vrun tensors have one role)", o)
			continue
		}
		w, ok := im.weights[o]
		if !ok {
			continue
		}
		delete(im.weights, o)
		c := im.constant(o+"_value", w)
		im.nodes = append(im.nodes, &inode{name: "Identity_" + o, op: "Identity", in: []string{c}, out: []string{o}})
	}
}

// build makes the vrun model: inputs first, then outputs (both in graph
// order), then weights and intermediates in order of first use. Weights no
// node uses are dropped.
func (im *importer) build() (*model.Model, error) {
	mp := im.mp
	m := &model.Model{}
	meta := func(k, v string) {
		if k == "" {
			return
		}
		for _, kv := range m.Meta {
			if kv[0] == k {
				return
			}
		}
		m.Meta = append(m.Meta, [2]string{k, v})
	}
	producer := mp.GetProducerName()
	if v := mp.GetProducerVersion(); v != "" {
		producer += " " + v
	}
	if producer != "" {
		meta("producer", producer)
	}
	if d := mp.GetDocString(); d != "" {
		meta("description", d)
	}
	meta("onnx.ir_version", strconv.FormatInt(mp.GetIrVersion(), 10))
	var ops []string
	for d, v := range im.opsets {
		if d == "" {
			d = "ai.onnx"
		}
		ops = append(ops, d+":"+strconv.FormatInt(v, 10))
	}
	sort.Strings(ops)
	meta("onnx.opset_import", strings.Join(ops, ","))
	if s := mp.GetGraph().GetName(); s != "" {
		meta("onnx.graph", s)
	}
	if s := mp.GetDomain(); s != "" {
		meta("onnx.domain", s)
	}
	if v := mp.GetModelVersion(); v != 0 {
		meta("onnx.model_version", strconv.FormatInt(v, 10))
	}
	for _, kv := range mp.MetadataProps {
		meta(kv.GetKey(), kv.GetValue())
	}

	index := map[string]int{}
	add := func(t model.Tensor) int {
		index[t.Name] = len(m.Tensors)
		m.Tensors = append(m.Tensors, t)
		return len(m.Tensors) - 1
	}
	for _, vi := range im.inputs {
		tt := vi.GetType().GetTensorType()
		dt, _ := DType(tt.GetElemType())
		t := model.Tensor{Name: vi.GetName(), DType: dt, Role: model.Input}
		named := false
		for _, d := range tt.GetShape().GetDim() {
			v, ok := d.GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue)
			if ok && v.DimValue >= 0 {
				t.Shape = append(t.Shape, v.DimValue)
			} else {
				t.Shape = append(t.Shape, -1)
			}
			t.DimNames = append(t.DimNames, d.GetDimParam())
			named = named || d.GetDimParam() != ""
		}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		if !named {
			t.DimNames = nil
		}
		add(t)
	}
	for _, o := range im.outputs {
		add(model.Tensor{Name: o, Role: model.Output})
	}
	ref := func(s string) int {
		if s == "" {
			return -1
		}
		if i, ok := index[s]; ok {
			return i
		}
		if w, ok := im.weights[s]; ok {
			shape := make([]int64, len(w.Shape))
			for i, d := range w.Shape {
				shape[i] = int64(d)
			}
			return add(model.Tensor{Name: s, DType: w.DType, Shape: shape, Role: model.Weight, Data: w.Data})
		}
		return add(model.Tensor{Name: s, Role: model.Intermediate})
	}
	for _, n := range im.nodes {
		mn := model.Node{Name: n.name, Op: n.op, Attrs: n.attrs}
		for _, s := range n.in {
			mn.Inputs = append(mn.Inputs, ref(s))
		}
		for _, s := range n.out {
			mn.Outputs = append(mn.Outputs, ref(s))
		}
		for len(mn.Inputs) > 0 && mn.Inputs[len(mn.Inputs)-1] < 0 {
			mn.Inputs = mn.Inputs[:len(mn.Inputs)-1]
		}
		for len(mn.Outputs) > 0 && mn.Outputs[len(mn.Outputs)-1] < 0 {
			mn.Outputs = mn.Outputs[:len(mn.Outputs)-1]
		}
		m.Nodes = append(m.Nodes, mn)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return m, nil
}
