package engine

import (
	"os"
	"slices"

	"github.com/vrun-go/vrun/model"
	"github.com/vrun-go/vrun/rt"
)

// Concat elision.
//
// A Concat along an axis whose leading dims are all 1 (channels at batch
// 1 in NCHW, or axis 0) lays each input out as one contiguous stretch of
// its output. Lowered, it copies each input there (lowerConcat). After
// the other plan passes, elideConcats moves the storage of such inputs
// (parts) into the output instead: the part's root and every view of it
// become views of the Concat output's root at the part's byte offset
// (tensor.rootOff), the ops that wrote or read the part write or read
// that stretch of the output, and the part's copy disappears. The output's
// root then lives from the first write of any part on.
//
// A part is moved only when that cannot change what any op sees:
//   - it is an arena tensor computed by the plan: not a graph input or
//     output (through any view), not a weight or plan-time constant, and
//     its root holds exactly its bytes (no narrower view of a wider
//     tensor) and was not already moved (a tensor in the Concat twice,
//     or in two Concats, is moved once and copied elsewhere);
//   - no op writes its storage at or after the Concat's step (an
//     in-place op after the Concat would otherwise change the Concat's
//     result), and when an op reads it after the Concat, no op writes
//     the Concat output's storage after the Concat (which would change
//     what that reader sees);
//   - its byte offset in the output is a multiple of concatAlign;
//   - the plan is an inference plan (training and gradient plans keep
//     their copies: gradients live per storage root).
//
// At batch > 1 a channel Concat's parts are strided stretches of its
// output (one per image). A part computed by one Conv (with its
// activation, without a residual) that nothing but the Concat reads is
// then written there directly instead: the Conv's Y becomes that stretch,
// its images rt.Conv.StrideY apart, where the device supports it
// (plan.canRun), and the part's tensor and copy disappear. SqueezeNet's
// fire modules and Inception's branches are such Concats.
//
// Parts that fail stay copies. VRUN_CONCAT_ELIDE=0 turns the pass off
// (for comparison runs).

// concatAlign is the byte alignment of a part's offset within the Concat
// output for the part to be elided. Every backend runs ops whose operands
// sit at any offset aligned to their dtype, but the fast paths of some do
// not: Vulkan's vec4 elementwise and cooperative-matrix stores need 16
// bytes, cuDNN's convolutions need 16-byte-aligned tensors (the CUDA
// backend runs its built-in, slower, conv kernel otherwise). A part at an
// offset that is not aligned so keeps its copy. Tests lower it to the
// element size to run the backends on unaligned parts.
var concatAlign int64 = 16

// concatElideOn reports whether elideConcats runs: unless the
// environment sets VRUN_CONCAT_ELIDE=0.
func concatElideOn() bool { return os.Getenv("VRUN_CONCAT_ELIDE") != "0" }

// rootUse records which steps (numbered from 1) the ops of a plan touch a
// storage root at.
type rootUse struct {
	first     int // first step reading or writing it
	lastRead  int // last step reading it; -1 when none
	lastWrite int // last step writing it; -1 when none
}

// rootOps maps each storage root (by the tensor of its slot, as
// rootOfRef) to the places of the ops that read or write it, in plan
// order, each place once. elideConcats builds it once; as its passes nil
// ops and retarget Convs, an entry may go stale (the op there no longer
// touches the root), so readers check the op at each place again
// (touchesRoot), and a pass that makes an op touch another root adds its
// place there (rootOps.add).
type rootOps map[*tensor][]opPos

// add records that the op at place at touches t, unless it is recorded.
func (x rootOps) add(t *tensor, at opPos) {
	if !slices.Contains(x[t], at) {
		x[t] = append(x[t], at)
	}
}

func (u *rootUse) merge(v *rootUse) {
	u.first = min(u.first, v.first)
	u.lastRead = max(u.lastRead, v.lastRead)
	u.lastWrite = max(u.lastWrite, v.lastWrite)
}

// elideConcats removes the copies of Concat steps whose inputs can be
// computed in place in the output (see above). It runs after the fusion
// passes, on the final ops, and before layout.
func (p *plan) elideConcats() {
	if p.mode.train || p.mode.grad != nil || !concatElideOn() {
		return
	}
	found := false
	for _, st := range p.steps {
		if st.node != nil && st.node.Op == "Concat" && len(st.ops) > 0 {
			found = true
			break
		}
	}
	if !found {
		return
	}
	use := map[*tensor]*rootUse{}
	ops := rootOps{}
	for s, st := range p.steps {
		for i, op := range st.ops {
			ods := rt.Operands(op)
			if ods == nil {
				return // an op the table does not know: it may touch anything
			}
			for _, o := range ods {
				if o.Ref == nil {
					continue
				}
				sl, ok := o.Ref.Buf.(slot)
				if !ok {
					continue
				}
				if ps := ops[sl.t]; len(ps) == 0 || ps[len(ps)-1] != (opPos{s, i}) {
					ops[sl.t] = append(ps, opPos{s, i}) // in plan order: once per op
				}
				u := use[sl.t]
				if u == nil {
					u = &rootUse{first: s + 1, lastRead: -1, lastWrite: -1}
					use[sl.t] = u
				}
				// An output may be read too (an accumulating op): count
				// it as both.
				u.lastRead = max(u.lastRead, s+1)
				if o.Output {
					u.lastWrite = max(u.lastWrite, s+1)
				}
			}
		}
	}
	moved, retargeted := false, false
	for s := range p.steps {
		if p.elideConcat(s, use, ops) {
			moved = true
		}
		if p.convsIntoConcat(s, use, ops) {
			retargeted = true
		}
	}
	if !moved {
		if retargeted {
			p.compactOps()
		}
		return
	}
	for s := range p.steps {
		for i, op := range p.steps[s].ops {
			if op == nil || !refsMoved(op) {
				continue
			}
			op = rt.CloneOp(op) // the original may share operand slices
			rt.MapRefs(op, func(_ string, r *rt.Ref) {
				if sl, ok := r.Buf.(slot); ok && sl.t.root != sl.t {
					r.Buf, r.Off = slot{sl.t.root}, r.Off+sl.t.rootOff
				}
			})
			p.steps[s].ops[i] = op
		}
	}
	p.compactOps()
}

// refsMoved reports whether op references a storage root that
// elideConcats moved into a Concat output.
func refsMoved(op rt.Op) bool {
	found := false
	rt.MapRefs(op, func(_ string, r *rt.Ref) {
		if sl, ok := r.Buf.(slot); ok && sl.t.root != sl.t {
			found = true
		}
	})
	return found
}

// concatAt returns the step at index s and its output when the step is a
// lowered Concat whose output is a storage root in the arena, computed
// by the plan; else a nil output.
func (p *plan) concatAt(s int) (*step, *tensor) {
	st := &p.steps[s]
	n := st.node
	if n == nil || n.Op != "Concat" || len(st.ops) == 0 || len(n.Outputs) != 1 || n.Outputs[0] < 0 || n.Outputs[0] >= len(p.tensors) {
		return st, nil
	}
	y := p.tensors[n.Outputs[0]]
	if y.root != y || y.where != inArena || y.value != nil || y.input {
		return st, nil
	}
	return st, y
}

// elideConcat elides what it may of the Concat at step index s (its ops
// are left nil) and reports whether it moved any part. A moved part's
// ops in the index ops now touch the output's root: their places are
// added to the output's.
func (p *plan) elideConcat(s int, use map[*tensor]*rootUse, ops rootOps) bool {
	st, y := p.concatAt(s)
	if y == nil {
		return false
	}
	parts := concatParts(p, st.node, st.ops, y)
	if parts == nil {
		return false
	}
	step := s + 1
	uy := use[y]
	if uy == nil {
		return false
	}
	moved := false
	for i, op := range st.ops {
		cp := op.(*rt.Unary)
		r := parts[i]
		off := cp.Y.Off
		u := use[r]
		if u == nil || !p.canMoveInto(r, y, cp) || off%concatAlign != 0 || u.lastWrite >= step ||
			(u.lastRead > step && uy.lastWrite > step) {
			continue
		}
		group := append([]*tensor{r}, r.aliases...)
		for _, a := range group {
			a.root, a.rootOff = y, a.rootOff+off
		}
		r.aliases = nil
		y.aliases = append(y.aliases, group...)
		y.first = min(y.first, r.first, u.first)
		uy.merge(u)
		delete(use, r)
		for _, at := range ops[r] {
			ops.add(y, at)
		}
		st.ops[i] = nil
		moved = true
	}
	return moved
}

// convsIntoConcat points the Convs that compute parts of the Concat at
// step index s, where the parts are strided stretches of its output (at
// batch > 1), into the output (rt.Conv.StrideY), leaving the parts' copies
// nil, and reports whether it retargeted any. ops indexes the ops that
// touch each storage root; a retargeted Conv's place is added to the
// output's.
func (p *plan) convsIntoConcat(s int, use map[*tensor]*rootUse, ops rootOps) bool {
	st, y := p.concatAt(s)
	if y == nil || use[y] == nil || !p.mayFuse() {
		return false // mayFuse: a plan without a device cannot ask it
	}
	uy := use[y]
	done := false
	for i, op := range st.ops {
		cp, ok := op.(*rt.Unary)
		if !ok || cp.Fn != rt.Copy || cp.Y.Contiguous() || rootOfRef(cp.Y) != y {
			continue
		}
		r := rootOfRef(cp.X)
		u := use[r]
		if r == nil || u == nil || r == y || r.root != r || r.where != inArena || r.input || r.value != nil || r.isOutput() ||
			cp.X.Off != 0 || !cp.X.Contiguous() || cp.X.Len()*int64(cp.X.DType.Size()) != r.bytes() {
			continue
		}
		// The part's only other op must be the Conv that writes it whole.
		var at *rt.Conv
		var atS, atI, others int
		for _, pos := range ops[r] {
			op2 := p.steps[pos.s].ops[pos.i]
			if hit, _ := touchesRoot(op2, r); !hit || pos == (opPos{s, i}) {
				continue
			}
			others++
			if c, ok := op2.(*rt.Conv); ok {
				at, atS, atI = c, pos.s, pos.i
			}
		}
		if others != 1 || at == nil || atS >= s {
			continue
		}
		c, ok := stridedConvInto(at, cp, r)
		if !ok || !p.canRun(c) {
			continue
		}
		p.steps[atS].ops[atI] = c
		ops.add(y, opPos{atS, atI})
		st.ops[i] = nil
		y.first = min(y.first, u.first)
		uy.merge(u)
		delete(use, r)
		done = true
	}
	return done
}

// stridedConvInto returns conv writing the stretch of a Concat output
// that copy cp copies its result r into (cp.Y: [N, K, ...] with the
// images of the wider output apart), or false when conv does not write r
// whole and contiguous, adds a residual, or cp.Y is not such a stretch.
func stridedConvInto(conv *rt.Conv, cp *rt.Unary, r *tensor) (*rt.Conv, bool) {
	ohw := conv.OH * conv.OW
	img := conv.K * ohw
	sh, st := cp.Y.Shape, cp.Y.StridesOrContiguous()
	if rootOfRef(conv.Y) != r || conv.Y.Off != 0 || !conv.Y.Contiguous() || conv.StrideY != 0 || conv.Res.Buf != nil ||
		conv.N < 2 || conv.Y.Len() != int64(conv.N)*int64(img) || cp.X.Len() != conv.Y.Len() || conv.Y.DType != cp.Y.DType ||
		len(sh) < 2 || sh[0] != conv.N || rt.NumElements(sh[1:]) != int64(img) || st[0] <= img ||
		!slices.Equal(st[1:], rt.ContiguousStrides(sh[1:])) {
		return nil, false
	}
	c := *conv
	c.StrideY = st[0]
	c.Y = rt.Ref{Buf: cp.Y.Buf, Off: cp.Y.Off, DType: cp.Y.DType, Shape: []int{int(rt.BatchExtent(c.N, c.StrideY, c.K, ohw))}}
	if rt.CheckOp(&c) != nil {
		return nil, false
	}
	return &c, true
}

// concatParts returns, for each op of a lowered Concat step, the storage
// root of the input it copies, or nil when the ops are not the plain
// copies lowerConcat emits (a pass changed them) or the Concat axis does
// not make each input one contiguous stretch of y.
func concatParts(p *plan, n *model.Node, ops []rt.Op, y *tensor) []*tensor {
	var ins []*tensor
	for _, idx := range n.Inputs {
		if idx < 0 || idx >= len(p.tensors) {
			return nil
		}
		if t := p.tensors[idx]; prod(t.shape) > 0 {
			ins = append(ins, t)
		}
	}
	if len(ins) != len(ops) {
		return nil
	}
	parts := make([]*tensor, len(ops))
	for i, op := range ops {
		cp, ok := op.(*rt.Unary)
		if !ok || cp.Fn != rt.Copy {
			return nil
		}
		xs, okx := cp.X.Buf.(slot)
		ys, oky := cp.Y.Buf.(slot)
		t := ins[i]
		// xs.t is the root t had when the copy was lowered; an earlier
		// Concat may have moved both since.
		if !okx || !oky || ys.t != y || xs.t.root != t.root || xs.t.rootOff != t.rootOff || cp.X.Off != 0 || !cp.X.Contiguous() || !cp.Y.Contiguous() ||
			cp.X.DType != cp.Y.DType || cp.X.Len() != cp.Y.Len() || cp.X.Len() != rt.NumElements(t.shape) {
			return nil
		}
		parts[i] = xs.t
	}
	return parts
}

// canMoveInto reports whether storage root r, which copy cp copies into
// y, may become a view of y (the conditions that do not depend on the
// order of the plan's ops).
func (p *plan) canMoveInto(r, y *tensor, cp *rt.Unary) bool {
	if r == y || r.root != r || r.where != inArena || r.input || r.value != nil || !r.defined || r.isOutput() {
		return false
	}
	return r.bytes() == cp.X.Len()*int64(cp.X.DType.Size())
}
