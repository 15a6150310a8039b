package engine

import (
	"strings"

	"github.com/vrun-go/vrun/rt"
)

// Recurrent ONNX operators (RNN, GRU, LSTM), unrolled over time when the
// model is planned. One batched MatMul projects the inputs of every time
// step (X @ W^T + bias); each step then costs one MatMul of the hidden
// state with R^T (accumulating onto that step's projection through the
// MatMul's strided Bias) and a handful of elementwise ops on strided views
// of the gates. Steps write straight into Y's time slice when its layout
// allows.

func init() {
	register("RNN", 3, 6, func(c *nodeCtx) error { return lowerRecurrent(c, cellRNN) })
	register("GRU", 3, 6, func(c *nodeCtx) error { return lowerRecurrent(c, cellGRU) })
	register("LSTM", 3, 8, func(c *nodeCtx) error { return lowerRecurrent(c, cellLSTM) })
}

// cellKind selects the recurrent cell.
type cellKind int

const (
	cellRNN cellKind = iota
	cellGRU
	cellLSTM
)

// gates is the number of gate blocks stacked in W, R and B.
func (k cellKind) gates() int { return [...]int{1, 3, 4}[k] }

// defaultActs are the ONNX default activations of one direction.
func (k cellKind) defaultActs() []string {
	return [...][]string{{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}}[k]
}

// actChain is an activation function as unary ops applied in order.
type actChain []rt.Activation

// rnnActivation maps an ONNX recurrent activation name onto unary
// functions, consuming its alpha and beta (when it takes them) from the
// front of alphas and betas, or using the ONNX defaults when they run out.
func rnnActivation(name string, alphas, betas *[]float64) (actChain, bool) {
	pop := func(l *[]float64, def float64) float64 {
		if len(*l) == 0 {
			return def
		}
		v := (*l)[0]
		*l = (*l)[1:]
		return v
	}
	switch strings.ToLower(name) {
	case "relu":
		return actChain{{Fn: rt.Relu}}, true
	case "tanh":
		return actChain{{Fn: rt.Tanh}}, true
	case "sigmoid":
		return actChain{{Fn: rt.Sigmoid}}, true
	case "softsign":
		return actChain{{Fn: rt.Softsign}}, true
	case "softplus":
		return actChain{{Fn: rt.Softplus}}, true
	case "affine":
		a := pop(alphas, 1)
		return actChain{{Fn: rt.Affine, Alpha: a, Beta: pop(betas, 0)}}, true
	case "leakyrelu":
		return actChain{{Fn: rt.LeakyRelu, Alpha: pop(alphas, 0.01)}}, true
	case "elu":
		return actChain{{Fn: rt.Elu, Alpha: pop(alphas, 1)}}, true
	case "hardsigmoid":
		a := pop(alphas, 0.2)
		return actChain{{Fn: rt.HardSigmoid, Alpha: a, Beta: pop(betas, 0.5)}}, true
	case "scaledtanh":
		// alpha * tanh(beta * x)
		a, b := pop(alphas, 1), pop(betas, 1)
		return actChain{{Fn: rt.Affine, Alpha: b}, {Fn: rt.Tanh}, {Fn: rt.Affine, Alpha: a}}, true
	}
	return nil, false
}

// rnnLower holds the state of one recurrent node's lowering.
type rnnLower struct {
	c                     *nodeCtx
	kind                  cellKind
	dt                    rt.DType
	seq, batch, hid, dirs int
	layout1               bool
	reverse               bool  // direction "reverse"
	stateShape            []int // of initial_h, initial_c, Y_h and Y_c
	clip                  float64
	acts                  [][]actChain       // per direction: f, g, h
	r                     *tensor            // recurrence weights [dirs, G*hid, hid]
	rT                    map[[3]int]*tensor // transposed blocks of a constant R, by direction, first row, rows
	xw                    *tensor            // input projections [dirs, seq*batch, G*hid], rows in X's order
	recBias               *tensor            // GRU linear_before_reset: Rb as [dirs, 2*G*hid] (offset G*hid); else nil
	peep                  *tensor            // LSTM P [dirs, 3*hid] or nil
	inputForget           bool
	lbr                   bool    // GRU linear_before_reset
	masked                bool    // some steps are past a sequence's length
	mask                  *tensor // Bool [seq, batch]: step t of batch b is valid; nil when all are
	zero                  *tensor // scalar 0 of dt
	tmp, tmp2             *tensor // [batch, hid] scratch
	gates                 *tensor // [batch, G*hid] scratch
	gates2                *tensor // GRU: [batch, hid] scratch for the candidate
	pp                    [2]*tensor
	cs, cn                *tensor // LSTM: the cell state, and its next value when masked
	y, yh, yc             *tensor // the outputs (nil when absent or unread)
}

// lowerRecurrent lowers ONNX RNN, GRU and LSTM (latest opsets): inputs X,
// W, R, B, sequence_lens, initial_h (and initial_c, P for LSTM); outputs
// Y [seq, dirs, batch, hidden] ([batch, seq, dirs, hidden] for layout 1),
// Y_h and Y_c. sequence_lens may be a constant or a run-time input: steps
// past a sequence's length leave its state unchanged and write zeros to Y.
func lowerRecurrent(c *nodeCtx, kind cellKind) error {
	l, err := parseRecurrent(c, kind)
	if err != nil {
		return err
	}
	if l.masked {
		l.sequenceMask()
	}
	if err := l.defineOutputs(); err != nil {
		return err
	}
	l.projectInputs(c.in[0], c.in[1], l.lbr)
	l.scratch()
	for d := range l.dirs {
		l.direction(d)
	}
	return nil
}

// parseRecurrent reads the attributes of a recurrent node and checks its
// inputs against each other.
func parseRecurrent(c *nodeCtx, kind cellKind) (*rnnLower, error) {
	x, w, r := c.in[0], c.in[1], c.in[2]
	if err := needFloat(c, x, w, r); err != nil {
		return nil, err
	}
	for _, i := range []int{3, 5, 6, 7} {
		if c.has(i) {
			if err := needFloat(c, x, c.in[i]); err != nil {
				return nil, err
			}
		}
	}
	if len(x.shape) != 3 || len(w.shape) != 3 || len(r.shape) != 3 {
		return nil, c.shapeErr("X %v, W %v and R %v must be 3-D", x.shape, w.shape, r.shape)
	}
	l := &rnnLower{c: c, kind: kind, dt: x.dtype, r: r}
	switch lay := c.attrInt("layout", 0); lay {
	case 0:
		l.seq, l.batch = x.shape[0], x.shape[1]
	case 1:
		l.seq, l.batch, l.layout1 = x.shape[1], x.shape[0], true
	default:
		return nil, c.unsupported("layout %d", lay)
	}
	switch dir := c.attrString("direction", "forward"); dir {
	case "forward", "reverse":
		l.dirs, l.reverse = 1, dir == "reverse"
	case "bidirectional":
		l.dirs = 2
	default:
		return nil, c.unsupported("direction %q", dir)
	}
	if err := l.checkShapes(); err != nil {
		return nil, err
	}
	if kind == cellLSTM && c.has(7) {
		l.peep = c.in[7]
	}
	l.clip = c.attrFloat("clip", 0)
	l.inputForget = kind == cellLSTM && c.attrInt("input_forget", 0) != 0
	l.lbr = kind == cellGRU && c.attrInt("linear_before_reset", 0) != 0
	if err := l.parseActs(); err != nil {
		return nil, err
	}
	var err error
	l.masked, err = l.checkSequenceLens()
	return l, err
}

// checkShapes checks W, R, B, the initial states and P against X, the
// direction count and hidden_size.
func (l *rnnLower) checkShapes() error {
	c := l.c
	x, w, r := c.in[0], c.in[1], c.in[2]
	g, in := l.kind.gates(), x.shape[2]
	l.hid = r.shape[2]
	if hs := c.attrInt("hidden_size", 0); hs > 0 && int(hs) != l.hid {
		return c.shapeErr("hidden_size %d but R has shape %v", hs, r.shape)
	}
	gh := g * l.hid
	if !sameShape(r.shape, []int{l.dirs, gh, l.hid}) || !sameShape(w.shape, []int{l.dirs, gh, in}) {
		return c.shapeErr("W %v and R %v do not match X %v with %d direction(s) of %d gates", w.shape, r.shape, x.shape, l.dirs, g)
	}
	l.stateShape = []int{l.dirs, l.batch, l.hid}
	if l.layout1 {
		l.stateShape = []int{l.batch, l.dirs, l.hid}
	}
	if c.has(3) && !sameShape(c.in[3].shape, []int{l.dirs, 2 * gh}) {
		return c.shapeErr("B has shape %v, want [%d %d]", c.in[3].shape, l.dirs, 2*gh)
	}
	for _, i := range []int{5, 6} {
		if c.has(i) && (i == 5 || l.kind == cellLSTM) && !sameShape(c.in[i].shape, l.stateShape) {
			return c.shapeErr("initial state %q has shape %v, want %v", c.in[i].name, c.in[i].shape, l.stateShape)
		}
	}
	if l.kind == cellLSTM && c.has(7) && !sameShape(c.in[7].shape, []int{l.dirs, 3 * l.hid}) {
		return c.shapeErr("P has shape %v, want [%d %d]", c.in[7].shape, l.dirs, 3*l.hid)
	}
	return nil
}

// defineOutputs defines Y, Y_h and (LSTM) Y_c. A Y that no node reads
// stays defined but unwritten (l.y nil).
func (l *rnnLower) defineOutputs() error {
	c := l.c
	yShape := []int{l.seq, l.dirs, l.batch, l.hid}
	if l.layout1 {
		yShape = []int{l.batch, l.seq, l.dirs, l.hid}
	}
	var err error
	if l.y, err = c.define(0, l.dt, yShape); err != nil {
		return err
	}
	if l.y != nil && !l.y.output && l.y.lastUse <= c.step {
		// No node reads Y (exporters keep it as a dangling output).
		l.y = nil
	}
	if l.yh, err = c.define(1, l.dt, l.stateShape); err != nil {
		return err
	}
	if l.kind == cellLSTM {
		if l.yc, err = c.define(2, l.dt, l.stateShape); err != nil {
			return err
		}
	}
	return nil
}

// scratch allocates the temporaries the steps share: the zero scalar, the
// gate buffers, the ping-pong hidden states and the LSTM cell state.
func (l *rnnLower) scratch() {
	c := l.c
	l.zero = c.scalar(l.dt, 0)
	l.tmp = c.temp(l.dt, []int{l.batch, l.hid})
	if l.peep != nil {
		l.tmp2 = c.temp(l.dt, []int{l.batch, 2, l.hid})
	}
	l.gates = c.temp(l.dt, []int{l.batch, l.kind.gates() * l.hid})
	if l.kind == cellGRU {
		l.gates2 = c.temp(l.dt, []int{l.batch, l.hid})
	}
	l.pp = [2]*tensor{c.temp(l.dt, []int{l.batch, l.hid}), c.temp(l.dt, []int{l.batch, l.hid})}
	if l.kind == cellLSTM {
		l.cs = c.temp(l.dt, []int{l.batch, l.hid})
		if l.mask != nil {
			l.cn = c.temp(l.dt, []int{l.batch, l.hid})
		}
	}
}

// direction unrolls direction d over the sequence and writes its final
// states to Y_h and Y_c.
func (l *rnnLower) direction(d int) {
	c, pp, cs, cn, y := l.c, l.pp, l.cs, l.cn, l.y
	// The hidden state: hPrev is read by the step, which writes hNext.
	// Without a mask, pp[0] holds a copied initial state and the steps
	// alternate between the ping-pong buffers (or write Y's slices
	// directly); with a mask, pp[0] is the state, updated in place from
	// the new state in pp[1].
	hPrev := l.initState(5, d, pp[0], l.mask != nil)
	if l.kind == cellLSTM {
		l.initState(6, d, cs, true)
	}
	next := 1
	direct := l.mask == nil && y != nil && !l.layout1
	for k := range l.seq {
		t := k
		if l.reverse || d == 1 {
			t = l.seq - 1 - k
		}
		var hNext rt.Ref
		switch {
		case direct:
			hNext = l.stateView(y, d, t)
		case l.mask != nil:
			hNext = c.ref(pp[1])
		default:
			hNext = c.ref(pp[next])
			next = 1 - next
		}
		switch l.kind {
		case cellRNN:
			l.rnnStep(d, t, hPrev, hNext)
		case cellGRU:
			l.gruStep(d, t, l.lbr, hPrev, hNext)
		case cellLSTM:
			cOut := c.ref(cs)
			if cn != nil {
				cOut = c.ref(cn)
			}
			l.lstmStep(d, t, hPrev, hNext, c.ref(cs), cOut)
		}
		if l.mask != nil {
			l.maskStep(d, t, hNext)
			continue
		}
		if y != nil && !direct {
			c.copyInto(l.stateView(y, d, t), hNext)
		}
		hPrev = hNext
	}
	if l.yh != nil {
		c.copyInto(l.stateOut(l.yh, d), hPrev)
	}
	if l.yc != nil {
		c.copyInto(l.stateOut(l.yc, d), c.ref(cs))
	}
}

// maskStep keeps the state of the sequences that step t is past the end
// of, and writes the step's Y slice (zeros for those sequences).
func (l *rnnLower) maskStep(d, t int, hNext rt.Ref) {
	c, pp := l.c, l.pp
	m := c.view(l.mask, []int{l.batch, l.hid}, []int{1, 0}, t*l.batch)
	if l.y != nil {
		c.emit(&rt.Where{Cond: m, A: hNext, B: c.view(l.zero, []int{l.batch, l.hid}, []int{0, 0}, 0), Y: l.stateView(l.y, d, t)})
	}
	c.emit(&rt.Where{Cond: m, A: hNext, B: c.ref(pp[0]), Y: c.ref(pp[0])})
	if l.cn != nil {
		c.emit(&rt.Where{Cond: m, A: c.ref(l.cn), B: c.ref(l.cs), Y: c.ref(l.cs)})
	}
}

// parseActs reads activations, activation_alpha and activation_beta.
func (l *rnnLower) parseActs() error {
	c := l.c
	names := l.kind.defaultActs()
	per := len(names)
	if a, ok := c.n.Attr("activations"); ok && len(a.Strings) > 0 {
		names = a.Strings
	}
	if len(names) == per && l.dirs == 2 {
		names = append(append([]string{}, names...), names...)
	}
	if len(names) != per*l.dirs {
		return c.shapeErr("%d activations, want %d", len(names), per*l.dirs)
	}
	var alphas, betas []float64
	if a, ok := c.n.Attr("activation_alpha"); ok {
		alphas = append(alphas, a.Floats...)
	}
	if a, ok := c.n.Attr("activation_beta"); ok {
		betas = append(betas, a.Floats...)
	}
	l.acts = make([][]actChain, l.dirs)
	for i, name := range names {
		ch, ok := rnnActivation(name, &alphas, &betas)
		if !ok {
			return c.unsupported("activation %q", name)
		}
		l.acts[i/per] = append(l.acts[i/per], ch)
	}
	return nil
}

// checkSequenceLens checks sequence_lens and reports whether steps need a
// mask: not when it is absent or a constant equal to the sequence length
// everywhere.
func (l *rnnLower) checkSequenceLens() (bool, error) {
	c := l.c
	if !c.has(4) {
		return false, nil
	}
	sl := c.in[4]
	if !sl.dtype.IsInt() || prod(sl.shape) != l.batch || len(sl.shape) != 1 {
		return false, c.shapeErr("sequence_lens is %s%v, want %d integers", sl.dtype, sl.shape, l.batch)
	}
	if sl.value == nil {
		return true, nil
	}
	full := true
	for _, v := range intValues(sl.value) {
		if v < 0 || v > int64(l.seq) {
			return false, c.shapeErr("sequence_lens value %d outside [0, %d]", v, l.seq)
		}
		full = full && v == int64(l.seq)
	}
	return !full, nil
}

// sequenceMask computes l.mask from sequence_lens.
func (l *rnnLower) sequenceMask() {
	c := l.c
	sl := c.in[4]
	lens := c.temp(rt.I64, []int{1, l.batch})
	c.copyInto(c.ref(lens), c.view(sl, []int{1, l.batch}, nil, 0))
	ts := make([]int64, l.seq)
	for i := range ts {
		ts[i] = int64(i)
	}
	shape := []int{l.seq, l.batch}
	l.mask = c.temp(rt.Bool, shape)
	c.emit(&rt.Binary{Fn: rt.Less, A: c.bcast(c.i64Const(ts, l.seq, 1), shape), B: c.bcast(lens, shape), Y: c.ref(l.mask)})
}

// projectInputs computes l.xw = X @ W^T + bias for every time step and
// direction: the bias is Wb + Rb, or Wb alone for GRU with
// linear_before_reset (whose Rb then goes into each step's MatMul).
func (l *rnnLower) projectInputs(x, w *tensor, lbr bool) {
	c := l.c
	gh := l.kind.gates() * l.hid
	rows, in := l.seq*l.batch, x.shape[2]
	l.xw = c.temp(l.dt, []int{l.dirs, rows, gh})
	var bias *tensor // [dirs, gh] contiguous, or the Wb half of B when lbr
	biasStride := gh
	if c.has(3) {
		b := c.in[3]
		switch {
		case lbr:
			bias, biasStride, l.recBias = b, 2*gh, b
		case b.value != nil:
			v := make([]float64, l.dirs*gh)
			for d := range l.dirs {
				for j := range gh {
					v[d*gh+j] = b.value.Float64(d*2*gh+j) + b.value.Float64(d*2*gh+gh+j)
				}
			}
			bias = c.newConst(rt.FromFloat64(l.dt, v, l.dirs, gh))
		default:
			bias = c.temp(l.dt, []int{l.dirs, gh})
			c.emit(&rt.Binary{Fn: rt.Add, A: c.view(b, []int{l.dirs, gh}, []int{2 * gh, 1}, 0),
				B: c.view(b, []int{l.dirs, gh}, []int{2 * gh, 1}, gh), Y: c.ref(bias)})
		}
	}
	if rows == 0 {
		return
	}
	for d := range l.dirs {
		b, tb := c.view(w, []int{gh, in}, nil, d*gh*in), true
		if w.value != nil {
			b, tb = c.ref(transposedConst(c, w, d*gh, gh, in)), false
		}
		op := &rt.MatMul{A: c.ref(x), B: b, Y: c.view(l.xw, []int{rows, gh}, nil, d*rows*gh),
			Batch: 1, M: rows, N: gh, K: in, TransB: tb, Alpha: 1}
		if bias != nil {
			op.Bias, op.Beta = c.view(bias, []int{rows, gh}, []int{0, 1}, d*biasStride), 1
		}
		c.emit(op)
	}
}

// transposedConst returns rows [row, row+n) of the plan-time constant w,
// seen as a matrix of rows of k values, as a new constant holding the
// block transposed ([k, n]). A MatMul then takes it with TransB false, so
// that a backend multiplies it in place: the CPU's GEMM would otherwise
// pack the transpose at every run, or every time step of a recurrence.
func transposedConst(c *nodeCtx, w *tensor, row, n, k int) *tensor {
	es := w.dtype.Size()
	blk := &rt.Tensor{DType: w.dtype, Shape: []int{n, k}, Data: w.value.Data[row*k*es : (row+n)*k*es]}
	return c.newConst(permuteConst(blk, blk.Shape, []int{1, 0}))
}

// initState returns the initial state of direction d from input i
// (initial_h or initial_c) as a contiguous [batch, hid] ref. When copy is
// set, or the input is absent or not contiguous, the state is first
// copied (or zero-filled) into buf.
func (l *rnnLower) initState(i, d int, buf *tensor, copy bool) rt.Ref {
	c := l.c
	if !c.has(i) {
		c.emit(&rt.Fill{Y: c.ref(buf)})
		return c.ref(buf)
	}
	src := l.stateOut(c.in[i], d)
	if !copy && !l.layout1 {
		return src
	}
	c.copyInto(c.ref(buf), src)
	return c.ref(buf)
}

// stateOut views direction d of a state tensor (initial_h, Y_h, ...) as
// [batch, hid].
func (l *rnnLower) stateOut(t *tensor, d int) rt.Ref {
	if l.layout1 {
		return l.c.view(t, []int{l.batch, l.hid}, []int{l.dirs * l.hid, 1}, d*l.hid)
	}
	return l.c.view(t, []int{l.batch, l.hid}, nil, d*l.batch*l.hid)
}

// stateView views Y at time t, direction d as [batch, hid] (contiguous for
// layout 0).
func (l *rnnLower) stateView(y *tensor, d, t int) rt.Ref {
	if l.layout1 {
		return l.c.view(y, []int{l.batch, l.hid}, []int{l.seq * l.dirs * l.hid, 1}, (t*l.dirs+d)*l.hid)
	}
	return l.c.view(y, []int{l.batch, l.hid}, nil, (t*l.dirs+d)*l.batch*l.hid)
}

// xwStep views columns [col, col+n) of the input projection at time t,
// direction d, as [batch, n].
func (l *rnnLower) xwStep(d, t, col, n int) rt.Ref {
	gh := l.kind.gates() * l.hid
	rowB, rowT := 1, l.batch
	if l.layout1 {
		rowB, rowT = l.seq, 1
	}
	return l.c.view(l.xw, []int{l.batch, n}, []int{rowB * gh, 1}, d*l.seq*l.batch*gh+t*rowT*gh+col)
}

// sub views a ref with another shape and strides, element offset off
// further in.
func sub(r rt.Ref, shape, strides []int, off int) rt.Ref {
	r.Shape, r.Strides = shape, strides
	r.Off += int64(off) * int64(r.DType.Size())
	return r
}

// cols views columns [col, col+n) of a contiguous [batch, width] ref.
func (l *rnnLower) cols(r rt.Ref, width, col, n int) rt.Ref {
	return sub(r, []int{l.batch, n}, []int{width, 1}, col)
}

// recur emits out = hPrev @ R[d][row:row+n]^T + bias, fusing act into the
// MatMul when it is a single function and there is no clip; otherwise act
// (with the clip) follows as separate ops.
func (l *rnnLower) recur(d int, hPrev rt.Ref, row, n int, bias, out rt.Ref, act actChain) {
	c := l.c
	gh := l.kind.gates() * l.hid
	b, tb := c.view(l.r, []int{n, l.hid}, nil, (d*gh+row)*l.hid), true
	if l.r.value != nil {
		key := [3]int{d, row, n}
		t := l.rT[key]
		if t == nil {
			t = transposedConst(c, l.r, d*gh+row, n, l.hid)
			if l.rT == nil {
				l.rT = map[[3]int]*tensor{}
			}
			l.rT[key] = t
		}
		b, tb = c.ref(t), false
	}
	op := &rt.MatMul{A: hPrev, B: b, Y: out,
		Batch: 1, M: l.batch, N: n, K: l.hid, TransB: tb, Alpha: 1}
	if bias.Buf != nil {
		op.Bias, op.Beta = bias, 1
	}
	c.emit(op)
	switch {
	case len(act) == 1 && l.clip <= 0:
		op.Act = act[0]
	case len(act) > 0 || l.clip > 0:
		l.activate(act, out, out, true)
	}
}

// activate emits dst = act(src), clipping src to [-clip, clip] first when
// clip is set and withClip. src and dst are the same view or do not
// overlap.
func (l *rnnLower) activate(act actChain, src, dst rt.Ref, withClip bool) {
	c := l.c
	if withClip && l.clip > 0 {
		c.emit(&rt.Unary{Fn: rt.Clip, Alpha: -l.clip, Beta: l.clip, X: src, Y: dst})
		src = dst
	}
	if len(act) == 0 && (src.Buf != dst.Buf || src.Off != dst.Off) {
		c.copyInto(dst, src)
	}
	for _, a := range act {
		c.emit(&rt.Unary{Fn: a.Fn, Alpha: a.Alpha, Beta: a.Beta, X: src, Y: dst})
		src = dst
	}
}

// rnnStep: H = f(X W^T + H R^T + Wb + Rb).
func (l *rnnLower) rnnStep(d, t int, hPrev, hNext rt.Ref) {
	l.recur(d, hPrev, 0, l.hid, l.xwStep(d, t, 0, l.hid), hNext, l.acts[d][0])
}

// gruStep: z, r = f(...); candidate n = g(X Wh^T + (r*H) Rh^T + Rbh + Wbh)
// or, with linear_before_reset, g(X Wh^T + r*(H Rh^T + Rbh) + Wbh);
// H' = n + z*(H - n).
func (l *rnnLower) gruStep(d, t int, lbr bool, hPrev, hNext rt.Ref) {
	c := l.c
	h := l.hid
	f, g := l.acts[d][0], l.acts[d][1]
	var z, n rt.Ref
	if !lbr {
		zr := sub(c.ref(l.gates), []int{l.batch, 2 * h}, nil, 0) // contiguous [batch, 2h]
		l.recur(d, hPrev, 0, 2*h, l.xwStep(d, t, 0, 2*h), zr, f)
		z, rg := l.cols(zr, 2*h, 0, h), l.cols(zr, 2*h, h, h)
		rh := c.ref(l.tmp)
		c.emit(&rt.Binary{Fn: rt.Mul, A: rg, B: hPrev, Y: rh})
		n = c.ref(l.gates2)
		l.recur(d, rh, 2*h, h, l.xwStep(d, t, 2*h, h), n, g)
		l.blend(z, n, hPrev, hNext)
		return
	}
	if op := l.gruFusedLBR(d, t, hPrev, hNext); c.p.optional(op) {
		var bias rt.Ref
		if l.recBias != nil {
			bias = c.view(l.recBias, []int{l.batch, 3 * h}, []int{0, 1}, d*6*h+3*h)
		}
		l.recur(d, hPrev, 0, 3*h, bias, c.ref(l.gates), nil)
		c.emit(op)
		return
	}
	all := c.ref(l.gates)
	var bias rt.Ref
	if l.recBias != nil {
		bias = c.view(l.recBias, []int{l.batch, 3 * h}, []int{0, 1}, d*6*h+3*h)
	}
	l.recur(d, hPrev, 0, 3*h, bias, all, nil)
	zr := l.cols(all, 3*h, 0, 2*h)
	c.emit(&rt.Binary{Fn: rt.Add, A: zr, B: l.xwStep(d, t, 0, 2*h), Y: zr})
	l.activate(f, zr, zr, true)
	z, rg := l.cols(all, 3*h, 0, h), l.cols(all, 3*h, h, h)
	n = l.cols(all, 3*h, 2*h, h)
	c.emit(&rt.Binary{Fn: rt.Mul, A: rg, B: n, Y: n})
	c.emit(&rt.Binary{Fn: rt.Add, A: n, B: l.xwStep(d, t, 2*h, h), Y: n})
	l.activate(g, n, n, true)
	l.blend(z, n, hPrev, hNext)
}

// blend emits hNext = n + z*(hPrev - n) = (1-z)*n + z*hPrev.
func (l *rnnLower) blend(z, n, hPrev, hNext rt.Ref) {
	c := l.c
	var p rt.FusedProgram
	zv, nv := p.Input(z), p.Input(n)
	p.Output(hNext, p.Binary(rt.Add, nv, p.Binary(rt.Mul, zv, p.Binary(rt.Sub, p.Input(hPrev), nv))))
	if op := p.Op(); c.p.optional(op) {
		c.emit(op)
		return
	}
	d := c.ref(l.tmp)
	c.emit(&rt.Binary{Fn: rt.Sub, A: hPrev, B: n, Y: d})
	c.emit(&rt.Binary{Fn: rt.Mul, A: z, B: d, Y: d})
	c.emit(&rt.Binary{Fn: rt.Add, A: n, B: d, Y: hNext})
}

// lstmStep: gates i, o, f, c = X W^T + H R^T + Wb + Rb (+ peepholes
// P_i*C, P_f*C on i and f); C' = f(f)*C + f(i)*g(c); o gets P_o*C' and
// H' = f(o)*h(C'). cPrev and cOut may be the same buffer.
func (l *rnnLower) lstmStep(d, t int, hPrev, hNext, cPrev, cOut rt.Ref) {
	c := l.c
	h, b := l.hid, l.batch
	f, g, hAct := l.acts[d][0], l.acts[d][1], l.acts[d][2]
	all := c.ref(l.gates)
	l.recur(d, hPrev, 0, 4*h, l.xwStep(d, t, 0, 4*h), all, nil)
	iv, ov, fv, cv := l.cols(all, 4*h, 0, h), l.cols(all, 4*h, h, h), l.cols(all, 4*h, 2*h, h), l.cols(all, 4*h, 3*h, h)
	if op := l.lstmFused(d, iv, ov, fv, cv, cPrev, cOut, hNext); c.p.optional(op) {
		c.emit(op)
		return
	}
	switch {
	case l.peep != nil && !l.inputForget:
		// i and f together as [batch, 2, h] (columns 0 and 2h), with
		// P_i and P_f likewise (offsets 0 and 2h of P[d]).
		ifv := sub(all, []int{b, 2, h}, []int{4 * h, 2 * h, 1}, 0)
		p := c.view(l.peep, []int{b, 2, h}, []int{0, 2 * h, 1}, d*3*h)
		tm := c.ref(l.tmp2)
		c.emit(&rt.Binary{Fn: rt.Mul, A: p, B: sub(cPrev, []int{b, 2, h}, []int{h, 0, 1}, 0), Y: tm})
		c.emit(&rt.Binary{Fn: rt.Add, A: ifv, B: tm, Y: ifv})
		l.activate(f, ifv, ifv, true)
	case l.peep != nil:
		p := c.view(l.peep, []int{b, h}, []int{0, 1}, d*3*h)
		c.emit(&rt.Binary{Fn: rt.Mul, A: p, B: cPrev, Y: c.ref(l.tmp)})
		c.emit(&rt.Binary{Fn: rt.Add, A: iv, B: c.ref(l.tmp), Y: iv})
		l.activate(f, iv, iv, true)
	case l.inputForget:
		io := l.cols(all, 4*h, 0, 2*h)
		l.activate(f, io, io, true)
	default:
		iof := l.cols(all, 4*h, 0, 3*h)
		l.activate(f, iof, iof, true)
	}
	if l.inputForget {
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: -1, Beta: 1, X: iv, Y: fv})
	}
	l.activate(g, cv, cv, true)
	c.emit(&rt.Binary{Fn: rt.Mul, A: fv, B: cPrev, Y: cOut})
	c.emit(&rt.Binary{Fn: rt.Mul, A: iv, B: cv, Y: cv})
	c.emit(&rt.Binary{Fn: rt.Add, A: cOut, B: cv, Y: cOut})
	if l.peep != nil {
		p := c.view(l.peep, []int{b, h}, []int{0, 1}, d*3*h+h)
		c.emit(&rt.Binary{Fn: rt.Mul, A: p, B: cOut, Y: c.ref(l.tmp)})
		c.emit(&rt.Binary{Fn: rt.Add, A: ov, B: c.ref(l.tmp), Y: ov})
		l.activate(f, ov, ov, true)
	}
	tc := c.ref(l.tmp)
	l.activate(hAct, cOut, tc, false)
	c.emit(&rt.Binary{Fn: rt.Mul, A: ov, B: tc, Y: hNext})
}

// lstmFused returns the gate arithmetic of an LSTM step (lstmStep's ops
// after the MatMul) as one rt.Fused op on [batch, hid] views: the gate
// pre-activations iv, ov, fv, cv and the cell state cPrev in; the new cell
// state cOut (which may be cPrev itself) and hidden state hNext out.
func (l *rnnLower) lstmFused(d int, iv, ov, fv, cv, cPrev, cOut, hNext rt.Ref) *rt.Fused {
	c := l.c
	b, h := l.batch, l.hid
	f, g, hAct := l.acts[d][0], l.acts[d][1], l.acts[d][2]
	var p rt.FusedProgram
	gi, gov, gf, gc, cp := p.Input(iv), p.Input(ov), p.Input(fv), p.Input(cv), p.Input(cPrev)
	var peep [3]rt.FusedValue // P_i, P_o, P_f
	if l.peep != nil {
		for k := range peep {
			peep[k] = p.Input(c.view(l.peep, []int{b, h}, []int{0, 1}, d*3*h+k*h))
		}
	}
	// gate is act(clip(pre + P*state)), the peephole term when P is set.
	gate := func(pre rt.FusedValue, act actChain, pk int, state rt.FusedValue) rt.FusedValue {
		if l.peep != nil {
			pre = p.Binary(rt.Add, pre, p.Binary(rt.Mul, peep[pk], state))
		}
		return l.fusedAct(&p, act, pre, true)
	}
	i := gate(gi, f, 0, cp)
	var fg rt.FusedValue
	if l.inputForget {
		fg = p.Unary(rt.Affine, -1, 1, i)
	} else {
		fg = gate(gf, f, 2, cp)
	}
	cn := p.Binary(rt.Add, p.Binary(rt.Mul, fg, cp), p.Binary(rt.Mul, i, l.fusedAct(&p, g, gc, true)))
	o := gate(gov, f, 1, cn)
	p.Output(cOut, cn)
	p.Output(hNext, p.Binary(rt.Mul, o, l.fusedAct(&p, hAct, cn, false)))
	return p.Op()
}

// fusedAct appends act(v) to a fused program, clipping v to
// [-clip, clip] first when clip is set and withClip (as activate does).
func (l *rnnLower) fusedAct(p *rt.FusedProgram, act actChain, v rt.FusedValue, withClip bool) rt.FusedValue {
	if withClip && l.clip > 0 {
		v = p.Unary(rt.Clip, -l.clip, l.clip, v)
	}
	for _, a := range act {
		v = p.Unary(a.Fn, a.Alpha, a.Beta, v)
	}
	return v
}

// gruFusedLBR returns the gate arithmetic of a GRU step with
// linear_before_reset after its MatMul (which leaves H R^T + Rb in
// l.gates) as one rt.Fused op: z, r = f(clip(gates + X W^T + Wb)),
// n = g(clip(X Wh^T + Wbh + r*(H Rh^T + Rbh))), H' = n + z*(H - n).
func (l *rnnLower) gruFusedLBR(d, t int, hPrev, hNext rt.Ref) *rt.Fused {
	c := l.c
	h := l.hid
	f, g := l.acts[d][0], l.acts[d][1]
	all := c.ref(l.gates)
	var p rt.FusedProgram
	gate := func(k int) rt.FusedValue {
		return p.Binary(rt.Add, p.Input(l.cols(all, 3*h, k*h, h)), p.Input(l.xwStep(d, t, k*h, h)))
	}
	z := l.fusedAct(&p, f, gate(0), true)
	r := l.fusedAct(&p, f, gate(1), true)
	pre := p.Binary(rt.Add, p.Binary(rt.Mul, r, p.Input(l.cols(all, 3*h, 2*h, h))), p.Input(l.xwStep(d, t, 2*h, h)))
	n := l.fusedAct(&p, g, pre, true)
	p.Output(hNext, p.Binary(rt.Add, n, p.Binary(rt.Mul, z, p.Binary(rt.Sub, p.Input(hPrev), n))))
	return p.Op()
}
