package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// chunkPlan runs a batch that does not fit the device as chunks of rows
// of its leading dim, replayed through the recording of one plan for a
// chunk.
type chunkPlan struct {
	ps        *planState // the plan for one chunk of rows
	rows      int        // rows per chunk
	total     int        // rows of the whole batch
	split     []bool     // by plan input: split along the leading dim, or fed whole
	outShapes [][]int    // by plan output: the shape for the whole batch
	reason    string     // the limit the whole batch exceeds
}

// prepare returns what runs inputs of the given shapes: a plan, or a plan
// for a chunk of rows with the chunking, when the whole batch does not fit
// the device but the model keeps the rows of its leading dim apart.
func (s *Session) prepare(shapes map[string][]int) (*planState, *chunkPlan, error) {
	key := shapeKey(shapes, s.m)
	s.mu.Lock()
	if cp, ok := s.chunks[key]; ok {
		s.last, s.lastCh = cp.ps, cp
		s.mu.Unlock()
		return cp.ps, cp, nil
	}
	s.mu.Unlock()
	ps, err := s.planFor(shapes)
	if err == nil {
		s.mu.Lock()
		s.last, s.lastCh = ps, nil
		s.mu.Unlock()
		return ps, nil, nil
	}
	var fe *fitError
	if !errors.As(err, &fe) || !fe.scales || s.mode.train || s.mode.grad != nil {
		return nil, nil, err
	}
	cp, cerr := s.planChunks(shapes, fe)
	if cerr != nil {
		return nil, nil, fmt.Errorf("%w; nor can it run in chunks of the batch: %v", err, cerr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, fmt.Errorf("engine: session %w", rt.ErrClosed)
	}
	s.chunks[key] = cp
	s.last, s.lastCh = cp.ps, cp
	return cp.ps, cp, nil
}

// planChunks finds the largest chunk of rows whose plan fits the device,
// and checks that the model keeps rows apart, so that running the chunks
// one after another computes what the whole batch would.
func (s *Session) planChunks(shapes map[string][]int, fe *fitError) (*chunkPlan, error) {
	n, _, split := batchRows(s.m, shapes)
	if n < 2 {
		return nil, errors.New("no input has a dynamic leading dim of two or more rows")
	}
	need, limit := fe.err.Need, fe.err.Limit
	rows := n
	var ps *planState
	for {
		next := rows - 1
		if need > 0 && limit > 0 {
			next = min(next, int(float64(rows)*float64(limit)/float64(need)*0.9))
		}
		if next < 1 {
			return nil, fmt.Errorf("one row does not fit either")
		}
		rows = next
		var err error
		ps, err = s.planFor(withRows(shapes, split, rows))
		if err == nil {
			break
		}
		var fe2 *fitError
		if !errors.As(err, &fe2) || !fe2.scales {
			return nil, fmt.Errorf("with %d rows: %s", rows, strings.TrimPrefix(err.Error(), "engine: "))
		}
		need, limit = fe2.err.Need, fe2.err.Limit
	}
	sp := &splitter{m: s.m, full: fe.p, part: ps.p, n: n, rows: rows, batched: map[int]bool{}}
	for name := range split {
		sp.batched[s.m.TensorIndex(name)] = true
	}
	if err := sp.check(); err != nil {
		return nil, err
	}
	cp := &chunkPlan{ps: ps, rows: rows, total: n, reason: fe.err.Error()}
	var outBytes int64
	for i, t := range ps.p.inputs {
		cp.split = append(cp.split, split[t.name])
		if ps.p.inputs[i].id != fe.p.inputs[i].id {
			return nil, errors.New("the plans' inputs differ (internal error)")
		}
	}
	for i, t := range fe.p.outputs {
		cp.outShapes = append(cp.outShapes, append([]int(nil), t.shape...))
		outBytes = rt.AddBytes(outBytes, t.bytes())
		if ps.p.outputs[i].id != t.id {
			return nil, errors.New("the plans' outputs differ (internal error)")
		}
	}
	if err := rt.CheckHostAlloc("storing the outputs of the whole batch", outBytes); err != nil {
		return nil, err
	}
	return cp, nil
}

// runChunked runs the batch in chunks of cp.rows rows through one
// recording. The last chunk's spare rows repeat its last row.
func (s *Session) runChunked(ctx context.Context, cp *chunkPlan, inputs map[string]*rt.Tensor) (map[string]*rt.Tensor, error) {
	p := cp.ps.p
	outs := make([]*rt.Tensor, len(p.outputs))
	for i, t := range p.outputs {
		outs[i] = &rt.Tensor{DType: t.dtype, Shape: append([]int(nil), cp.outShapes[i]...), Data: make([]byte, rt.TensorBytes(t.dtype, cp.outShapes[i]))}
	}
	for start := 0; start < cp.total; start += cp.rows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(cp.rows, cp.total-start)
		_, _, err := s.exec(ctx, cp.ps, func(i int, t *tensor, dst []byte) error {
			src := inputs[t.name].Data
			if !cp.split[i] {
				copy(dst, src)
				return nil
			}
			rb := len(dst) / cp.rows
			copy(dst, src[start*rb:(start+n)*rb])
			for r := n; r < cp.rows; r++ {
				copy(dst[r*rb:(r+1)*rb], src[(start+n-1)*rb:(start+n)*rb])
			}
			return nil
		}, func(c *execCtx) error {
			for i := range p.outputs {
				rb := len(c.outBufs[i]) / cp.rows
				copy(outs[i].Data[start*rb:], c.outBufs[i][:n*rb])
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make(map[string]*rt.Tensor, len(outs))
	for i, t := range p.outputs {
		out[t.name] = outs[i]
	}
	return out, nil
}

// splitter decides whether a model keeps the rows of its batch (the
// leading dim of the batched inputs) apart: whether every node that reads
// a batched tensor computes each row of its outputs from the same row of
// its batched inputs, and every model output is batched. It compares the
// plan of the whole batch (n rows) with the plan of a chunk (rows): a
// batched tensor has n rows in one and rows in the other and the same
// other dims; every other tensor a batched node reads must be the same in
// both (a shape computed from the batch size may only set a Reshape's,
// Expand's or Resize's output shape, which the row check covers).
type splitter struct {
	m          *model.Model
	full, part *plan
	n, rows    int
	batched    map[int]bool // model tensor indices
}

// splitRule checks node n, which reads a batched tensor, and returns the
// inputs that may differ between the two plans, and whether the node's
// outputs are batched.
type splitRule func(sp *splitter, n *model.Node) (free []int, batched bool, err error)

func (sp *splitter) check() error {
	for _, i := range sp.m.Inputs() {
		if sp.batched[i] {
			if err := sp.rowsOK(i); err != nil {
				return err
			}
		}
	}
	for k := range sp.m.Nodes {
		n := &sp.m.Nodes[k]
		if err := sp.node(n); err != nil {
			name := n.Name
			if name == "" {
				name = fmt.Sprintf("#%d", k)
			}
			return fmt.Errorf("node %s (%s) %v", name, n.Op, err)
		}
	}
	for _, i := range sp.m.Outputs() {
		if !sp.batched[i] {
			return fmt.Errorf("output %q does not have the batch as its leading dim", sp.m.Tensors[i].Name)
		}
	}
	return nil
}

func (sp *splitter) node(n *model.Node) error {
	any := false
	for _, i := range n.Inputs {
		if i >= 0 && sp.batched[i] {
			any = true
		}
	}
	if !any {
		return nil
	}
	rule := splitRules[n.Op]
	if rule == nil {
		return errors.New("may mix the rows of the batch")
	}
	free, batched, err := rule(sp, n)
	if err != nil {
		return err
	}
	for j, i := range n.Inputs {
		if i < 0 || sp.batched[i] || contains(free, j) {
			continue
		}
		if !sp.same(i) {
			return fmt.Errorf("reads %q, which depends on the batch size", sp.m.Tensors[i].Name)
		}
	}
	if !batched {
		return nil
	}
	for _, o := range n.Outputs {
		if o < 0 {
			continue
		}
		sp.batched[o] = true
		if err := sp.rowsOK(o); err != nil {
			return err
		}
	}
	return nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// rowsOK checks that batched tensor i has n rows in the whole plan, rows
// rows in the chunk's, and the same other dims.
func (sp *splitter) rowsOK(i int) error {
	f, p := sp.full.tensors[i].shape, sp.part.tensors[i].shape
	if len(f) == 0 || len(f) != len(p) || f[0] != sp.n || p[0] != sp.rows || !sameShape(f[1:], p[1:]) {
		return fmt.Errorf("makes %q of shape %v for %d rows, %v for %d: not the batch as its leading dim", sp.m.Tensors[i].Name, f, sp.n, p, sp.rows)
	}
	return nil
}

// same reports whether tensor i is the same in both plans.
func (sp *splitter) same(i int) bool {
	f, p := sp.full.tensors[i], sp.part.tensors[i]
	if !sameShape(f.shape, p.shape) || f.dtype != p.dtype || (f.value == nil) != (p.value == nil) {
		return false
	}
	return f.value == nil || bytes.Equal(f.value.Data, p.value.Data)
}

func (sp *splitter) in(n *model.Node, j int) (int, bool) {
	if j >= len(n.Inputs) || n.Inputs[j] < 0 {
		return -1, false
	}
	return n.Inputs[j], true
}

func (sp *splitter) isB(n *model.Node, j int) bool {
	i, ok := sp.in(n, j)
	return ok && sp.batched[i]
}

func (sp *splitter) rank(i int) int { return len(sp.full.tensors[i].shape) }

// consts returns the value of constant input j of n in the whole plan.
func (sp *splitter) consts(n *model.Node, j int) ([]int64, bool) {
	i, ok := sp.in(n, j)
	if !ok || sp.full.tensors[i].value == nil {
		return nil, false
	}
	return sp.full.tensors[i].value.Int64s(), true
}

func attrI(n *model.Node, name string, def int64) int64 {
	if a, ok := n.Attr(name); ok {
		return a.Int
	}
	return def
}

func attrIs(n *model.Node, name string) ([]int64, bool) {
	if a, ok := n.Attr(name); ok {
		return a.Ints, true
	}
	return nil, false
}

func normAxis(a int64, rank int) int64 {
	if a < 0 {
		a += int64(rank)
	}
	return a
}

var errInput0 = errors.New("reads the batch through an input other than its data")

// onlyFirst is a rule for ops whose output rows come from the rows of
// input 0 alone (elementwise functions, Conv, pools, per-sample
// normalisation); the other inputs must not be batched.
func onlyFirst(free ...int) splitRule {
	return func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if !sp.isB(n, 0) {
			return nil, false, errInput0
		}
		for j := 1; j < len(n.Inputs); j++ {
			if sp.isB(n, j) {
				return nil, false, errInput0
			}
		}
		return free, true, nil
	}
}

// axisAtLeast1 is onlyFirst for ops that work along one axis (attribute
// name, default def), which must not be the batch's.
func axisAtLeast1(name string, def int64) splitRule {
	return func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		if normAxis(attrI(n, name, def), sp.rank(n.Inputs[0])) < 1 {
			return nil, false, errors.New("works along the batch's axis")
		}
		return nil, true, nil
	}
}

// broadcast is the rule for NumPy-broadcasting elementwise ops: batched
// operands have the output's rank; the others broadcast along the batch.
func broadcast(sp *splitter, n *model.Node) ([]int, bool, error) {
	r := 0
	for j := range n.Inputs {
		if i, ok := sp.in(n, j); ok {
			r = max(r, sp.rank(i))
		}
	}
	for j := range n.Inputs {
		i, ok := sp.in(n, j)
		if !ok {
			continue
		}
		sh := sp.full.tensors[i].shape
		if sp.batched[i] && len(sh) != r {
			return nil, false, errors.New("broadcasts a batched operand to a higher rank")
		}
		if !sp.batched[i] && len(sh) == r && sh[0] != 1 {
			return nil, false, fmt.Errorf("combines the batch with %q, whose leading dim is not 1", sp.m.Tensors[i].Name)
		}
	}
	return nil, true, nil
}

func matmulRule(sp *splitter, n *model.Node) ([]int, bool, error) {
	a, b := n.Inputs[0], n.Inputs[1]
	r := max(sp.rank(a), sp.rank(b))
	switch {
	case sp.batched[a] && sp.batched[b]:
		if sp.rank(a) != r || sp.rank(b) != r || r < 3 {
			return nil, false, errors.New("multiplies batched operands across rows")
		}
	case sp.batched[a]:
		if sp.rank(a) != r || r < 2 {
			return nil, false, errors.New("broadcasts the batch to a higher rank")
		}
		if sb := sp.full.tensors[b].shape; r >= 3 && len(sb) == r && sb[0] != 1 {
			return nil, false, errors.New("multiplies the batch with a batched weight")
		}
	default: // b batched
		if sp.rank(b) != r || r < 3 {
			return nil, false, errors.New("reads the batch as a matrix")
		}
		if sa := sp.full.tensors[a].shape; len(sa) == r && sa[0] != 1 {
			return nil, false, errors.New("multiplies the batch with a batched operand")
		}
	}
	return nil, true, nil
}

func gemmRule(sp *splitter, n *model.Node) ([]int, bool, error) {
	if !sp.isB(n, 0) || sp.isB(n, 1) || sp.isB(n, 2) || attrI(n, "transA", 0) != 0 {
		return nil, false, errors.New("does not take the batch as the rows of A")
	}
	if c, ok := sp.in(n, 2); ok {
		if sh := sp.full.tensors[c].shape; len(sh) == 2 && sh[0] != 1 {
			return nil, false, errors.New("adds a C with one row per batch row")
		}
	}
	return nil, true, nil
}

// axesRule is for ops with an axes input (index j) or attribute, none of
// which may be the batch's axis; rankOut says the axes index the output
// (Unsqueeze). Absent axes mean all axes unless emptyOK.
func axesRule(j int, rankOut, emptyOK bool) splitRule {
	return func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		axes, ok := sp.consts(n, j)
		if !ok {
			axes, ok = attrIs(n, "axes")
		}
		if !ok || len(axes) == 0 {
			if emptyOK || attrI(n, "noop_with_empty_axes", 0) != 0 {
				return nil, true, nil
			}
			return nil, false, errors.New("works along every axis, the batch's too")
		}
		r := sp.rank(n.Inputs[0])
		if rankOut {
			r = sp.rank(n.Outputs[0])
		}
		for _, a := range axes {
			if normAxis(a, r) == 0 {
				return nil, false, errors.New("works along the batch's axis")
			}
		}
		return nil, true, nil
	}
}

var splitRules = map[string]splitRule{}

func init() {
	for _, op := range []string{
		"Abs", "Ceil", "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
		"Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round",
		"Selu", "Shrink", "Sigmoid", "Sign", "Silu", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Swish",
		"Tan", "Tanh", "ThresholdedRelu", "Cast", "Clip", "Dropout",
		"Conv", "ConvTranspose", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "LRN",
		"InstanceNormalization", "GroupNormalization", "DepthToSpace", "SpaceToDepth",
	} {
		splitRules[op] = onlyFirst()
	}
	splitRules["CastLike"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if !sp.isB(n, 0) {
			return nil, false, errInput0
		}
		return []int{1}, true, nil // only input 1's dtype matters
	}
	splitRules["MaxPool"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if len(n.Outputs) > 1 && n.Outputs[1] >= 0 {
			return nil, false, errors.New("returns indices into the whole batch")
		}
		return onlyFirst()(sp, n)
	}
	splitRules["BatchNormalization"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if attrI(n, "training_mode", 0) != 0 {
			return nil, false, errors.New("computes batch statistics")
		}
		return onlyFirst()(sp, n)
	}
	splitRules["Resize"] = onlyFirst(1, 2, 3) // the row check covers sizes computed from the batch size
	splitRules["Trilu"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if sp.rank(n.Inputs[0]) < 3 {
			return nil, false, errors.New("takes the batch as the rows of its matrix")
		}
		return onlyFirst()(sp, n)
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu", "Equal", "Less", "LessOrEqual",
		"Greater", "GreaterOrEqual", "And", "Or", "Xor", "Max", "Min", "Sum", "Mean", "Where"} {
		splitRules[op] = broadcast
	}
	splitRules["MatMul"] = matmulRule
	splitRules["Gemm"] = gemmRule
	splitRules["Softmax"] = axisAtLeast1("axis", -1)
	splitRules["LogSoftmax"] = axisAtLeast1("axis", -1)
	splitRules["Hardmax"] = axisAtLeast1("axis", -1)
	splitRules["LayerNormalization"] = axisAtLeast1("axis", -1)
	splitRules["RMSNormalization"] = axisAtLeast1("axis", -1)
	splitRules["LpNormalization"] = axisAtLeast1("axis", -1)
	splitRules["ArgMax"] = axisAtLeast1("axis", 0)
	splitRules["ArgMin"] = axisAtLeast1("axis", 0)
	splitRules["TopK"] = axisAtLeast1("axis", -1)
	splitRules["Flatten"] = axisAtLeast1("axis", 1)
	splitRules["Split"] = axisAtLeast1("axis", 0)
	splitRules["CumSum"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		ax, ok := sp.consts(n, 1)
		if _, _, err := onlyFirst()(sp, n); err != nil || !ok || len(ax) != 1 || normAxis(ax[0], sp.rank(n.Inputs[0])) < 1 {
			return nil, false, errors.New("sums along the batch's axis")
		}
		return nil, true, nil
	}
	splitRules["OneHot"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		if normAxis(attrI(n, "axis", -1), sp.rank(n.Inputs[0])+1) < 1 {
			return nil, false, errors.New("puts its classes on the batch's axis")
		}
		return nil, true, nil
	}
	for _, op := range []string{"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
		"ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"} {
		splitRules[op] = axesRule(1, false, false)
	}
	splitRules["Squeeze"] = axesRule(1, false, true) // no axes: the row check catches a squeezed batch of 1
	splitRules["Unsqueeze"] = axesRule(1, true, false)
	splitRules["Concat"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		for j := range n.Inputs {
			if !sp.isB(n, j) {
				return nil, false, errors.New("joins the batch with a tensor that is not batched")
			}
		}
		if normAxis(attrI(n, "axis", 0), sp.rank(n.Inputs[0])) < 1 {
			return nil, false, errors.New("joins along the batch's axis")
		}
		return nil, true, nil
	}
	splitRules["Reshape"] = onlyFirst(1) // the row check: the batch stays the leading dim
	splitRules["Expand"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		if sp.rank(n.Outputs[0]) != sp.rank(n.Inputs[0]) {
			return nil, false, errors.New("adds leading dims before the batch")
		}
		return []int{1}, true, nil
	}
	splitRules["Tile"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		reps, ok := sp.consts(n, 1)
		if _, _, err := onlyFirst()(sp, n); err != nil || !ok || len(reps) == 0 || reps[0] != 1 {
			return nil, false, errors.New("repeats the batch")
		}
		return nil, true, nil
	}
	splitRules["Transpose"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		perm, ok := attrIs(n, "perm")
		if (ok && len(perm) > 0 && perm[0] != 0) || (!ok && sp.rank(n.Inputs[0]) > 1) {
			return nil, false, errors.New("moves the batch's axis")
		}
		return nil, true, nil
	}
	splitRules["Slice"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		starts, ok1 := sp.consts(n, 1)
		ends, ok2 := sp.consts(n, 2)
		if !ok1 || !ok2 || len(starts) != len(ends) {
			return nil, false, errors.New("has run-time bounds")
		}
		axes, ok := sp.consts(n, 3)
		if !ok {
			axes = make([]int64, len(starts))
			for k := range axes {
				axes[k] = int64(k)
			}
		}
		steps, ok := sp.consts(n, 4)
		if !ok {
			steps = nil
		}
		for k, a := range axes {
			if k >= len(starts) || normAxis(a, sp.rank(n.Inputs[0])) != 0 {
				continue
			}
			if starts[k] != 0 || ends[k] < int64(sp.n) || (k < len(steps) && steps[k] != 1) {
				return nil, false, errors.New("slices the batch")
			}
		}
		return nil, true, nil
	}
	splitRules["Pad"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if _, _, err := onlyFirst()(sp, n); err != nil {
			return nil, false, err
		}
		pads, ok := sp.consts(n, 1)
		if !ok {
			pads, ok = attrIs(n, "pads")
		}
		if !ok {
			return nil, false, errors.New("has run-time pads")
		}
		k := len(pads) / 2
		idx := 0
		if axes, ok := sp.consts(n, 3); ok {
			idx = -1
			for j, a := range axes {
				if normAxis(a, sp.rank(n.Inputs[0])) == 0 {
					idx = j
				}
			}
		}
		if idx >= 0 && idx < k && (pads[idx] != 0 || pads[idx+k] != 0) {
			return nil, false, errors.New("pads the batch")
		}
		return nil, true, nil
	}
	splitRules["Gather"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		data, idx := sp.isB(n, 0), sp.isB(n, 1)
		ax := normAxis(attrI(n, "axis", 0), sp.rank(n.Inputs[0]))
		switch {
		case data && !idx && ax >= 1:
		case idx && !data && ax == 0: // an embedding lookup of batched indices
		default:
			return nil, false, errors.New("gathers across the batch")
		}
		return nil, true, nil
	}
	splitRules["GatherElements"] = func(sp *splitter, n *model.Node) ([]int, bool, error) {
		if !sp.isB(n, 0) || !sp.isB(n, 1) || normAxis(attrI(n, "axis", 0), sp.rank(n.Inputs[0])) < 1 {
			return nil, false, errors.New("gathers across the batch")
		}
		return nil, true, nil
	}
	// Shape and Size of a batched tensor are not batched; what reads them
	// must be the same in both plans unless a rule frees it.
	for _, op := range []string{"Shape", "Size"} {
		splitRules[op] = func(sp *splitter, n *model.Node) ([]int, bool, error) { return nil, false, nil }
	}
}
