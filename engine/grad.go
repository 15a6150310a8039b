package engine

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Reverse-mode differentiation works on the lowered program: the
// primitive ops (package rt) that the forward nodes became. Every model
// op that lowers onto primitives — LSTM, GRU, Attention, Einsum as much as
// Relu — is therefore differentiable through the same dozen rules, and
// the backward pass is more primitive ops appended to the plan: the arena
// planner keeps the activations that backward reads alive by lifetime like
// any other tensor, and the whole step is recorded into one stream.
//
// Gradients live per storage root: a forward ref (root, offset, shape,
// strides) has its gradient at the same offset, shape and strides in the
// root's gradient buffer. Trained parameters share one flat gradient
// buffer laid out like their flat weight block, so that the optimizer
// updates every parameter with a few ops over two flat buffers.

// gradSpec says what a training plan differentiates.
type gradSpec struct {
	loss   int          // model tensor index of the scalar loss
	params []int        // trained weights (mutable), in block order
	inputs []int        // model inputs whose gradients are wanted
	noGrad map[int]bool // node indices whose ops pass no gradient
	optim  *optimSpec   // nil: gradients only
}

// gunit is the gradient storage of one forward root: a region of a grad
// root that starts out implicitly zero until its first write.
type gunit struct {
	root    *tensor // storage of the gradient
	off     int64   // byte offset of the region in root
	bytes   int64
	dtype   rt.DType
	written bool
}

// region returns a contiguous ref covering the unit.
func (u *gunit) region() rt.Ref {
	n := int(u.bytes / int64(u.dtype.Size()))
	return rt.Ref{Buf: slot{u.root}, Off: u.off, DType: u.dtype, Shape: []int{n}}
}

// gradResult is where the plan leaves a gradient for the caller to read.
type gradResult struct {
	name string
	unit *gunit
	of   *tensor // the forward tensor
}

// gctx holds the state of one differentiation.
type gctx struct {
	p       *plan
	spec    *gradSpec
	units   map[*tensor]*gunit // forward root -> gradient storage
	req     map[*tensor]bool   // forward roots that require a gradient
	vals    map[rt.Op]rt.Op    // forward op -> copy whose value refs read snapshots
	over    map[rt.Op]bool     // forward op overwrites storage an earlier op wrote
	skip    map[rt.Op]bool     // snapshot copies: no gradient rule
	paramsG *tensor            // flat gradient buffer of the parameters
	block   *tensor            // flat weight block of the parameters
	step    int                // current backward step
	node    *model.Node        // current backward node (for temp names)
	ops     []rt.Op            // ops of the current backward step
}

// differentiate appends the backward pass (and the optimizer step, when
// the spec has one) to the plan.
func (p *plan) differentiate(spec *gradSpec) error {
	if spec.loss < 0 || spec.loss >= len(p.tensors) {
		return fmt.Errorf("engine: loss tensor index %d out of range", spec.loss)
	}
	loss := p.tensors[spec.loss]
	if !loss.defined || !loss.dtype.IsFloat() || rt.NumElements(loss.shape) != 1 {
		return fmt.Errorf("engine: loss %q must be a float scalar, is %s%v", loss.name, loss.dtype, loss.shape)
	}
	g := &gctx{p: p, spec: spec, units: map[*tensor]*gunit{}, req: map[*tensor]bool{},
		vals: map[rt.Op]rt.Op{}, over: map[rt.Op]bool{}, skip: map[rt.Op]bool{}}
	if err := g.layoutParams(); err != nil {
		return err
	}
	for _, i := range spec.inputs {
		g.req[p.tensors[i].root] = true
	}
	g.propagate()
	if !g.req[loss.root] {
		return fmt.Errorf("engine: loss %q does not depend on any trained parameter or input", loss.name)
	}
	g.tape()

	// Seed: d loss / d loss = 1.
	fwd := len(p.steps)
	g.begin(fwd+1, stepNode("loss.grad", "Seed"))
	seed := g.unit(loss.root)
	g.emit(&rt.Fill{Y: g.gradView(loss.root, g.p.ref(loss)), Value: 1})
	seed.written = true
	g.end()

	for i := fwd - 1; i >= 0; i-- {
		st := p.steps[i]
		if st.node == nil || spec.noGrad[i] {
			continue
		}
		g.begin(len(p.steps)+1, stepNode(st.node.Name+".grad", st.node.Op+"Grad"))
		for k := len(st.ops) - 1; k >= 0; k-- {
			op := st.ops[k]
			if g.skip[op] {
				continue
			}
			if err := g.vjp(op); err != nil {
				return &PlanError{Node: st.node.Name, Op: st.node.Op, Err: fmt.Errorf("gradient of %s: %w", op.OpName(), err)}
			}
		}
		g.end()
	}

	// Gradients nothing reached are zero.
	g.begin(len(p.steps)+1, stepNode("grads", "ZeroUnreached"))
	for _, r := range g.results() {
		if !r.unit.written {
			g.emit(&rt.Fill{Y: r.unit.region()})
			r.unit.written = true
		}
	}
	g.end()
	p.gradOut = g.results()
	for _, r := range p.gradOut {
		p.keep = append(p.keep, r.unit.root)
	}
	if spec.optim != nil {
		if err := g.optimize(spec.optim); err != nil {
			return err
		}
	}
	return nil
}

// layoutParams gives the parameters one flat gradient buffer with the
// layout of their flat weight block (see plan.paramBlock).
func (g *gctx) layoutParams() error {
	p := g.p
	if len(g.spec.params) == 0 {
		return nil
	}
	g.block = p.tensors[g.spec.params[0]].block
	g.paramsG = p.addTensor(&tensor{name: "params.grad", dtype: g.block.dtype, shape: g.block.shape,
		defined: true, first: math.MaxInt32})
	p.paramsG = g.paramsG
	for _, i := range g.spec.params {
		t := p.tensors[i]
		g.units[t] = &gunit{root: g.paramsG, off: t.blockOff, bytes: t.bytes(), dtype: t.dtype}
		g.req[t] = true
	}
	return nil
}

// paramBlock places the trained parameters (model weights, in order) in
// one flat weight-buffer block shared by every plan of a session, so that
// the optimizer updates them all with a few ops over one buffer.
func (p *plan) paramBlock(params []int) error {
	if len(params) == 0 {
		return nil
	}
	dt := p.tensors[params[0]].dtype
	var off int64
	for _, i := range params {
		t := p.tensors[i]
		if t.dtype != dt {
			return fmt.Errorf("engine: trained parameters must share one dtype: %q is %s, %q is %s",
				t.name, t.dtype, p.tensors[params[0]].name, dt)
		}
		if t.init == nil {
			return fmt.Errorf("engine: parameter %q is not a mutable weight", t.name)
		}
		off += t.bytes()
	}
	n := int(off / int64(dt.Size()))
	data := make([]byte, 0, off)
	for _, i := range params {
		data = append(data, p.tensors[i].init.Data...)
	}
	block := p.addTensor(&tensor{name: "params", dtype: dt, shape: []int{n}, where: inWeights,
		init: &rt.Tensor{DType: dt, Shape: []int{n}, Data: data}, persist: "params", defined: true})
	off = 0
	for _, i := range params {
		t := p.tensors[i]
		t.block, t.blockOff = block, off
		off += t.bytes()
	}
	return nil
}

// results lists the gradients the caller reads back: parameters, then the
// requested inputs.
func (g *gctx) results() []gradResult {
	var out []gradResult
	for _, i := range append(append([]int{}, g.spec.params...), g.spec.inputs...) {
		t := g.p.tensors[i]
		out = append(out, gradResult{name: t.name, unit: g.unit(t.root), of: t})
	}
	return out
}

// stepNode names a plan-level step (backward, optimizer) for errors and
// profiles.
func stepNode(name, op string) *model.Node { return &model.Node{Name: name, Op: op} }

// addTensor appends a plan-level tensor.
func (p *plan) addTensor(t *tensor) *tensor {
	t.id = len(p.tensors)
	t.root = t
	p.tensors = append(p.tensors, t)
	return t
}

// ref returns a contiguous ref covering t (as nodeCtx.ref).
func (p *plan) ref(t *tensor) rt.Ref {
	t.root.used = true
	return rt.Ref{Buf: slot{t.root}, DType: t.dtype, Shape: append([]int{}, t.shape...)}
}

// rootOf returns the planner tensor a ref's storage belongs to, or nil.
func rootOf(r rt.Ref) *tensor {
	if s, ok := r.Buf.(slot); ok {
		return s.t
	}
	return nil
}

// unit returns the gradient storage of forward root t, creating it.
func (g *gctx) unit(t *tensor) *gunit {
	if u, ok := g.units[t]; ok {
		return u
	}
	gr := g.p.addTensor(&tensor{name: t.name + ".grad", dtype: t.dtype, shape: []int{int(t.bytes() / int64(t.dtype.Size()))},
		defined: true, first: g.step, lastUse: g.step})
	u := &gunit{root: gr, bytes: t.bytes(), dtype: t.dtype}
	g.units[t] = u
	return u
}

// gradView maps a forward ref onto its gradient storage.
func (g *gctx) gradView(root *tensor, r rt.Ref) rt.Ref {
	u := g.unit(root)
	u.root.lastUse = max(u.root.lastUse, g.step)
	u.root.first = min(u.root.first, g.step)
	r.Buf = slot{u.root}
	r.Off += u.off
	return r
}

// propagate marks every forward root computed from a root that requires a
// gradient, through float ops outside no-grad nodes.
func (g *gctx) propagate() {
	for i, st := range g.p.steps {
		if st.node == nil || g.spec.noGrad[i] {
			continue
		}
		for _, op := range st.ops {
			ins, outs := opIO(op)
			any := false
			for _, r := range ins {
				if t := rootOf(r); t != nil && g.req[t] && r.DType.IsFloat() {
					any = true
				}
			}
			if !any {
				continue
			}
			for _, r := range outs {
				if t := rootOf(r); t != nil && r.DType.IsFloat() && t.where == inArena {
					g.req[t] = true
				}
			}
		}
	}
}

// opIO splits an op's operands into the ones it reads and the ones it
// writes.
func opIO(op rt.Op) (ins, outs []rt.Ref) {
	names, refs := rt.Refs(op)
	for i, n := range names {
		switch {
		case n == "Y" || n == "Values" || n == "Indices":
			outs = append(outs, refs[i])
			if _, ok := op.(*rt.ScatterElements); ok { // updates Y in place
				ins = append(ins, refs[i])
			}
		default:
			ins = append(ins, refs[i])
		}
	}
	return ins, outs
}

// savedFields names the operands whose values an op's gradient rule
// reads (inputs, and outputs such as Sigmoid's Y).
func savedFields(op rt.Op) []string {
	switch o := op.(type) {
	case *rt.Unary:
		x, y := unaryNeeds(o.Fn)
		var f []string
		if x {
			f = append(f, "X")
		}
		if y {
			f = append(f, "Y")
		}
		return f
	case *rt.Binary:
		switch o.Fn {
		case rt.Mul, rt.Max, rt.Min, rt.PRelu:
			return []string{"A", "B"}
		case rt.Div:
			return []string{"B", "Y"}
		case rt.Pow:
			return []string{"A", "B", "Y"}
		}
	case *rt.Where:
		return []string{"Cond"}
	case *rt.Reduce:
		switch o.Fn {
		case rt.SumSquare, rt.L1:
			return []string{"X"}
		case rt.RMax, rt.RMin, rt.L2, rt.LogSumExp, rt.Prod:
			return []string{"X", "Y"}
		}
	case *rt.Softmax:
		return []string{"Y"}
	case *rt.MatMul:
		if o.Act.Fn != rt.Copy {
			return []string{"A", "B", "Y"}
		}
		return []string{"A", "B"}
	case *rt.Conv:
		if o.Act.Fn != rt.Copy {
			return []string{"X", "W", "Y"}
		}
		return []string{"X", "W"}
	case *rt.ConvTranspose:
		return []string{"X", "W"}
	case *rt.Pool:
		if o.Fn == rt.MaxPool {
			return []string{"X"}
		}
	case *rt.Normalize:
		return []string{"X", "Scale"}
	case *rt.Gather, *rt.GatherElements, *rt.ScatterElements:
		return []string{"Idx"}
	case *rt.TopK:
		return []string{"Indices"}
	}
	return nil
}

// overlaps reports whether two refs on the same root may share bytes.
func overlaps(a, b rt.Ref) bool {
	if rootOf(a) == nil || rootOf(a) != rootOf(b) {
		return false
	}
	alo, ahi := a.Span()
	blo, bhi := b.Span()
	return alo < bhi && blo < ahi
}

// tape walks the forward ops in order. A value that a gradient rule will
// read but that a later op overwrites (the lowering computes in place:
// y = y*s, a = rsqrt(a)) is copied to a snapshot just before the
// overwrite, and the rule reads the snapshot. An op that writes storage an
// earlier op already wrote is marked, so that its gradient rule consumes
// (zeroes) the gradient of what it overwrote.
func (g *gctx) tape() {
	type saved struct {
		op    rt.Op  // the value copy whose field is saved
		field string // operand name
	}
	live := map[*tensor][]saved{}
	written := map[*tensor][]rt.Ref{}
	for i := range g.p.steps {
		st := &g.p.steps[i]
		if st.node == nil {
			continue
		}
		var out []rt.Op
		for _, op := range st.ops {
			_, outs := opIO(op)
			needGrad := false
			for _, r := range outs {
				if t := rootOf(r); t != nil && g.req[t] {
					needGrad = true
				}
			}
			var v rt.Op
			if needGrad {
				v = rt.CloneOp(op)
				g.vals[op] = v
				// The op's own inputs count as saved before it writes.
				for _, f := range savedFields(op) {
					if !isOutputField(op, f) {
						live[rootOf(fieldRef(v, f))] = append(live[rootOf(fieldRef(v, f))], saved{v, f})
					}
				}
			}
			for _, w := range outs {
				t := rootOf(w)
				if t == nil {
					continue
				}
				var keep []saved
				for _, s := range live[t] {
					r := fieldRef(s.op, s.field)
					if rootOf(r) == t && overlaps(r, w) {
						snap := g.p.addTensor(&tensor{name: fmt.Sprintf("%s.snap%d", t.name, len(g.p.tensors)),
							dtype: r.DType, shape: append([]int{}, r.Shape...), defined: true, first: i + 1, lastUse: i + 1})
						cp := &rt.Unary{Fn: rt.Copy, X: r, Y: g.p.ref(snap)}
						g.skip[cp] = true
						out = append(out, cp)
						setFieldRef(s.op, s.field, g.p.ref(snap))
						continue
					}
					keep = append(keep, s)
				}
				live[t] = keep
				for _, prev := range written[t] {
					if overlaps(prev, w) {
						g.over[op] = true
					}
				}
				written[t] = append(written[t], w)
			}
			if v != nil {
				for _, f := range savedFields(op) {
					if isOutputField(op, f) {
						r := fieldRef(v, f)
						live[rootOf(r)] = append(live[rootOf(r)], saved{v, f})
					}
				}
			}
			out = append(out, op)
		}
		st.ops = out
	}
}

func isOutputField(op rt.Op, f string) bool {
	switch f {
	case "Y", "Values", "Indices":
		_, scatter := op.(*rt.ScatterElements)
		return !scatter
	}
	return false
}

// fieldRef returns the named operand of op.
func fieldRef(op rt.Op, name string) rt.Ref {
	var out rt.Ref
	rt.MapRefs(op, func(n string, r *rt.Ref) {
		if n == name {
			out = *r
		}
	})
	return out
}

func setFieldRef(op rt.Op, name string, v rt.Ref) {
	rt.MapRefs(op, func(n string, r *rt.Ref) {
		if n == name {
			*r = v
		}
	})
}

// begin starts a backward step.
func (g *gctx) begin(step int, n *model.Node) {
	g.step, g.node, g.ops = step, n, nil
}

// end appends the current backward step to the plan.
func (g *gctx) end() {
	if len(g.ops) == 0 {
		return
	}
	g.p.steps = append(g.p.steps, step{node: g.node, ops: g.ops})
	for _, o := range g.ops {
		g.p.opCounts[o.OpName()]++
	}
	g.p.numOps += len(g.ops)
	g.ops = nil
}

// emit appends op to the current backward step; every value it reads or
// writes lives at least until this step.
func (g *gctx) emit(op rt.Op) {
	rt.MapRefs(op, func(_ string, r *rt.Ref) { g.use(*r) })
	g.ops = append(g.ops, op)
}

// use marks a forward value as read by the current backward step.
func (g *gctx) use(r rt.Ref) rt.Ref {
	if t := rootOf(r); t != nil {
		t.lastUse = max(t.lastUse, g.step)
		t.used = true
	}
	return r
}

// tmp returns a contiguous scratch tensor of the current backward step.
func (g *gctx) tmp(dt rt.DType, shape []int) rt.Ref {
	t := g.p.addTensor(&tensor{name: fmt.Sprintf("%s.tmp%d", g.node.Name, len(g.p.tensors)), dtype: dt,
		shape: append([]int{}, shape...), defined: true, first: g.step, lastUse: g.step})
	return g.p.ref(t)
}

// scalar returns v broadcast (zero strides) to shape.
func (g *gctx) scalar(v float64, dt rt.DType, shape []int) rt.Ref {
	t := g.p.addTensor(&tensor{name: fmt.Sprintf("%s.const%d", g.node.Name, len(g.p.tensors)), dtype: dt,
		shape: []int{1}, value: rt.FromFloat64(dt, []float64{v}, 1), where: inWeights, defined: true})
	r := g.p.ref(t)
	r.Shape, r.Strides = append([]int{}, shape...), make([]int, len(shape))
	return r
}

// un, bin and where emit an elementwise op into a new scratch tensor.
func (g *gctx) un(fn rt.UnaryFn, x rt.Ref, alpha, beta float64) rt.Ref {
	y := g.tmp(x.DType, x.Shape)
	g.emit(&rt.Unary{Fn: fn, Alpha: alpha, Beta: beta, X: g.use(x), Y: y})
	return y
}

func (g *gctx) bin(fn rt.BinaryFn, a, b rt.Ref) rt.Ref {
	dt := a.DType
	if fn.IsCompare() {
		dt = rt.Bool
	}
	y := g.tmp(dt, a.Shape)
	g.emit(&rt.Binary{Fn: fn, A: g.use(a), B: g.use(b), Y: y})
	return y
}

func (g *gctx) where(c, a, b rt.Ref) rt.Ref {
	y := g.tmp(a.DType, a.Shape)
	g.emit(&rt.Where{Cond: g.use(c), A: g.use(a), B: g.use(b), Y: y})
	return y
}

// contiguous returns r, or a contiguous copy of it.
func (g *gctx) contiguous(r rt.Ref) rt.Ref {
	if r.Contiguous() {
		return r
	}
	return g.un(rt.Copy, r, 0, 0)
}

// reshaped returns a contiguous ref r seen with another shape.
func reshaped(r rt.Ref, shape ...int) rt.Ref {
	r.Shape, r.Strides = append([]int{}, shape...), nil
	return r
}

// strided returns r seen with the given shape and element strides from its
// offset (for broadcast and transposed views of contiguous refs).
func strided(r rt.Ref, shape, strides []int) rt.Ref {
	r.Shape, r.Strides = append([]int{}, shape...), append([]int{}, strides...)
	return r
}
