package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	register("Attention", 3, 7, lowerAttention)
}

// lowerAttention decomposes ONNX Attention (opsets 23, 24) into MatMul,
// Softmax and elementwise ops: scores = scale * Q K^T, an optional softcap,
// an additive bias from attn_mask, is_causal and nonpad_kv_seqlen, softmax
// over the keys, Y = P V. past_key/past_value are concatenated in front of
// K and V (present_key/present_value); grouped-query attention repeats each
// KV head for q_num_heads/kv_num_heads query heads.
func lowerAttention(c *nodeCtx) error {
	a, err := parseAttention(c)
	if err != nil {
		return err
	}
	if done, err := a.fused(c); done || err != nil {
		return err
	}
	q, k, v, err := a.headsAndCache(c)
	if err != nil {
		return err
	}
	s, qkOut, err := a.scores(c, q, k)
	if err != nil {
		return err
	}
	a.addMasks(c, s)
	return a.output(c, s, v, qkOut)
}

// fused lowers the node to one rt.Attention op, reading Q, K and V where
// they are (3-D inputs as strided head views), when the device supports
// it and the node needs nothing the op lacks: no KV cache inputs or
// outputs, no grouped-query heads, no softcap, no sliding window or
// nonpad_kv_seqlen, no qk_matmul_output, an additive mask (if any) of
// Q's dtype covering every key, and causality only with as many queries
// as keys (no past, so ONNX's offset is 0). It reports whether it did.
func (a *attention) fused(c *nodeCtx) (bool, error) {
	if c.has(4) || c.has(5) || c.has(6) || a.qh != a.kvh || a.left >= 0 || (a.right >= 0 && !a.causal) ||
		(a.causal && a.sq != a.t) || c.attrFloat("softcap", 0) > 0 {
		return false, nil
	}
	for _, o := range c.out[1:] {
		if o != nil {
			return false, nil
		}
	}
	if a.mask != nil && (a.mask.dtype != a.dt || a.mask.shape[len(a.mask.shape)-1] != a.t) {
		return false, nil
	}
	heads := func(t *tensor, s, d int) rt.Ref {
		if a.r == 4 {
			return c.ref(t)
		}
		return c.view(t, []int{a.b, a.qh, s, d}, []int{s * a.qh * d, d, a.qh * d, 1}, 0)
	}
	op := &rt.Attention{Q: heads(c.in[0], a.sq, a.d), K: heads(c.in[1], a.t, a.d), V: heads(c.in[2], a.t, a.dv),
		B: a.b, H: a.qh, Lq: a.sq, Lk: a.t, D: a.d, Dv: a.dv,
		Scale: c.attrFloat("scale", 1/math.Sqrt(float64(a.d))), Causal: a.causal}
	if a.mask != nil {
		op.Mask = c.bcast(a.mask, a.sshape)
	}
	yshape := []int{a.b, a.qh, a.sq, a.dv}
	if a.r == 3 {
		yshape = []int{a.b, a.sq, a.qh * a.dv}
	}
	// Ask with a placeholder output: the real one is defined only when
	// the op is emitted.
	op.Y = heads(c.temp(a.dt, yshape), a.sq, a.dv)
	if rt.CheckOp(op) != nil || !c.p.optional(op) {
		return false, nil
	}
	y, err := c.define(0, a.dt, yshape)
	if err != nil {
		return false, err
	}
	op.Y = heads(y, a.sq, a.dv)
	c.emit(op)
	return true, nil
}

// attention is one Attention node, parsed and checked.
type attention struct {
	r           int      // rank of Q, K and V: 3 ([B, S, H*D]) or 4 ([B, H, S, D])
	qh, kvh     int      // query heads, key/value heads
	b, sq, d    int      // batch, query length, Q and K head size
	dv          int      // V head size
	past        int      // cached keys in front of the new ones
	t           int      // keys attended: past plus new
	dt          rt.DType // of Q, K, V and Y
	sshape      []int    // the scores: [B, qh, Sq, T]
	mode        int64    // qk_matmul_output_mode
	causal      bool     // is_causal
	left, right int64    // sliding window sizes; -1: unbounded
	mask        *tensor  // attn_mask, or nil
	nonpad      *tensor  // nonpad_kv_seqlen, or nil

	ninf, zero *tensor // scalars of dt, made when masking
}

// parseAttention reads the node's attributes and checks its inputs.
func parseAttention(c *nodeCtx) (*attention, error) {
	q, k, v := c.in[0], c.in[1], c.in[2]
	if err := needFloat(c, q, k, v); err != nil {
		return nil, err
	}
	a := &attention{r: len(q.shape), dt: q.dtype}
	if (a.r != 3 && a.r != 4) || len(k.shape) != a.r || len(v.shape) != a.r {
		return nil, c.shapeErr("Q %v, K %v, V %v must all be 3-D or 4-D", q.shape, k.shape, v.shape)
	}
	a.qh, a.kvh = int(c.attrInt("q_num_heads", 0)), int(c.attrInt("kv_num_heads", 0))
	if a.r == 4 {
		a.qh, a.kvh = q.shape[1], k.shape[1]
	}
	qs, err := c.headShape(q, a.qh)
	if err != nil {
		return nil, err
	}
	ks, err := c.headShape(k, a.kvh)
	if err != nil {
		return nil, err
	}
	vs, err := c.headShape(v, a.kvh)
	if err != nil {
		return nil, err
	}
	a.b, a.sq, a.d = qs[0], qs[2], qs[3]
	sk := ks[2]
	a.dv = vs[3]
	if ks[0] != a.b || vs[0] != a.b || ks[3] != a.d || vs[1] != a.kvh || vs[2] != sk || a.kvh < 1 || a.qh%a.kvh != 0 {
		return nil, c.shapeErr("Q %v, K %v, V %v (as heads) do not match", qs, ks, vs)
	}
	for _, past := range []struct{ in, hd int }{{4, a.d}, {5, a.dv}} {
		if !c.has(past.in) {
			continue
		}
		p := c.in[past.in]
		if len(p.shape) != 4 || p.shape[0] != a.b || p.shape[1] != a.kvh || p.shape[3] != past.hd || p.dtype != a.dt {
			return nil, c.shapeErr("past %q has shape %v, want [%d %d * %d]", p.name, p.shape, a.b, a.kvh, past.hd)
		}
	}
	if c.has(4) != c.has(5) || (c.has(4) && c.in[4].shape[2] != c.in[5].shape[2]) {
		return nil, c.shapeErr("past_key and past_value must both be given, with one length")
	}
	if c.has(4) {
		a.past = c.in[4].shape[2]
	}
	a.t = a.past + sk
	a.sshape = []int{a.b, a.qh, a.sq, a.t}
	if c.has(3) {
		if a.mask, err = a.checkMask(c, c.in[3]); err != nil {
			return nil, err
		}
	}
	if c.has(6) {
		a.nonpad = c.in[6]
		if prod(a.nonpad.shape) != a.b || !a.nonpad.dtype.IsInt() {
			return nil, c.shapeErr("nonpad_kv_seqlen %s%v, want %d integers", a.nonpad.dtype, a.nonpad.shape, a.b)
		}
	}
	a.mode = c.attrInt("qk_matmul_output_mode", 0)
	a.causal = c.attrInt("is_causal", 0) != 0
	a.left, a.right = c.attrInt("left_window_size", -1), c.attrInt("right_window_size", -1)
	if a.causal {
		a.right = 0
	}
	return a, nil
}

// checkMask checks attn_mask m: bool (true attends) or additive, of rank 1
// to 4, broadcasting to the scores once padded to T keys.
func (a *attention) checkMask(c *nodeCtx, m *tensor) (*tensor, error) {
	if len(m.shape) < 1 || len(m.shape) > 4 || m.shape[len(m.shape)-1] > a.t {
		return nil, c.shapeErr("attn_mask %v does not fit scores %v", m.shape, a.sshape)
	}
	if _, err := broadcastShapes(a.maskShape(m), a.sshape); err != nil {
		return nil, err
	}
	if m.dtype != rt.Bool && m.dtype != a.dt {
		return nil, c.shapeErr("attn_mask has dtype %s, want bool or %s", m.dtype, a.dt)
	}
	return m, nil
}

// maskShape is m's shape padded to T keys.
func (a *attention) maskShape(m *tensor) []int {
	s := append([]int{}, m.shape...)
	s[len(s)-1] = a.t
	return s
}

// headShape returns the [B, H, S, D] shape of t: its own when it is 4-D,
// else that of the 3-D [B, S, H*D] input split into h heads.
func (c *nodeCtx) headShape(t *tensor, h int) ([]int, error) {
	if len(t.shape) == 4 {
		return t.shape, nil
	}
	b, s, hd := t.shape[0], t.shape[1], t.shape[2]
	if h < 1 || hd%h != 0 {
		return nil, c.shapeErr("%q has shape %v, not divisible into %d heads", t.name, t.shape, h)
	}
	return []int{b, h, s, hd / h}, nil
}

// heads4 returns t as a contiguous [B, H, S, D] tensor: t itself when it
// is 4-D, else a transposing copy of the 3-D [B, S, H*D] input.
func (c *nodeCtx) heads4(t *tensor, h int) *tensor {
	if len(t.shape) == 4 {
		return t
	}
	s, hd := t.shape[1], t.shape[2]
	d := hd / h
	out := c.temp(t.dtype, []int{t.shape[0], h, s, d})
	c.copyInto(c.ref(out), c.view(t, out.shape, []int{s * hd, d, hd, 1}, 0))
	return out
}

// headsAndCache returns Q, K and V as [B, H, S, D] heads, with the past
// keys and values in front of K and V (written to present_key and
// present_value when the node has them) and each KV head repeated for
// its query heads.
func (a *attention) headsAndCache(c *nodeCtx) (q, k, v *tensor, err error) {
	q, k, v = c.heads4(c.in[0], a.qh), c.heads4(c.in[1], a.kvh), c.heads4(c.in[2], a.kvh)
	if k, err = a.cache(c, 4, 1, k); err != nil {
		return nil, nil, nil, err
	}
	if v, err = a.cache(c, 5, 2, v); err != nil {
		return nil, nil, nil, err
	}
	// Grouped-query attention: repeat each KV head rep times.
	if rep := a.qh / a.kvh; rep > 1 {
		b, kvh, t := a.b, a.kvh, a.t
		expand := func(x *tensor) *tensor {
			e := c.temp(a.dt, []int{b, a.qh, t, x.shape[3]})
			src := c.view(x, []int{b, kvh, rep, t, x.shape[3]}, []int{kvh * t * x.shape[3], t * x.shape[3], 0, x.shape[3], 1}, 0)
			c.copyInto(c.view(e, src.Shape, nil, 0), src)
			return e
		}
		k, v = expand(k), expand(v)
	}
	return q, k, v, nil
}

// cache is the KV cache of K or V (x): output out = concat(input in, x)
// on the sequence axis, or x itself when there is neither a past nor an
// output.
func (a *attention) cache(c *nodeCtx, in, out int, x *tensor) (*tensor, error) {
	var p *tensor
	shape := []int{a.b, a.kvh, x.shape[2], x.shape[3]}
	if c.has(in) {
		p = c.in[in]
		shape[2] += p.shape[2]
	}
	y, err := c.define(out, a.dt, shape)
	if err != nil {
		return nil, err
	}
	if y == nil {
		if p == nil {
			return x, nil
		}
		y = c.temp(a.dt, shape)
	}
	st := rt.ContiguousStrides(shape)
	off := 0
	if p != nil {
		c.copyInto(c.view(y, p.shape, st, 0), c.ref(p))
		off = p.shape[2] * st[2]
	}
	c.copyInto(c.view(y, x.shape, st, off), c.ref(x))
	return y, nil
}

// scores computes scale * Q K^T with the optional softcap, and defines the
// qk_matmul_output output (written here in modes 0 and 1).
func (a *attention) scores(c *nodeCtx, q, k *tensor) (s, qkOut *tensor, err error) {
	scale := c.attrFloat("scale", 1/math.Sqrt(float64(a.d)))
	b, qh, sq, t, d := a.b, a.qh, a.sq, a.t, a.d
	s = c.temp(a.dt, a.sshape)
	c.emit(&rt.MatMul{A: c.ref(q), B: c.ref(k), Y: c.ref(s), Batch: b * qh, M: sq, N: t, K: d, TransB: true,
		StrideA: sq * d, StrideB: t * d, StrideY: sq * t, Alpha: scale})
	if cap := c.attrFloat("softcap", 0); cap > 0 {
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / cap, X: c.ref(s), Y: c.ref(s)})
		c.emit(&rt.Unary{Fn: rt.Tanh, X: c.ref(s), Y: c.ref(s)})
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: cap, X: c.ref(s), Y: c.ref(s)})
	}
	if len(c.out) > 3 {
		if qkOut, err = c.define(3, a.dt, a.sshape); err != nil {
			return nil, nil, err
		}
	}
	if qkOut != nil && (a.mode == 0 || a.mode == 1) {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	return s, qkOut, nil
}

// masked reports whether any mask applies to the scores.
func (a *attention) masked() bool {
	return a.mask != nil || a.nonpad != nil || a.left >= 0 || a.right >= 0
}

// addMasks adds -inf to the scores of the keys a query may not attend:
// attn_mask, the sliding window, causality and nonpad_kv_seqlen.
func (a *attention) addMasks(c *nodeCtx, s *tensor) {
	a.ninf, a.zero = c.scalar(a.dt, math.Inf(-1)), c.scalar(a.dt, 0)
	m := maskCtx{a: a, c: c, s: s}
	if a.mask != nil {
		m.attnMask()
	}
	if a.nonpad != nil {
		m.np64 = c.temp(rt.I64, []int{a.b, 1, 1, 1})
		c.copyInto(c.view(m.np64, []int{a.b}, nil, 0), c.view(a.nonpad, []int{a.b}, nil, 0))
	}
	if a.left >= 0 || (a.right >= 0 && !a.causal) {
		m.window()
	}
	if a.causal {
		m.causal()
	}
	if a.nonpad != nil {
		// Keys at positions >= nonpad_kv_seqlen[b] are padding: j+1 <= n.
		jv := make([]int64, a.t)
		for j := range jv {
			jv[j] = int64(j + 1)
		}
		m.addAllowed(c.bcast(c.i64Const(jv, 1, 1, 1, a.t), a.sshape), c.bcast(m.np64, a.sshape))
	}
}

// maskCtx is the state of attention.addMasks.
type maskCtx struct {
	a    *attention
	c    *nodeCtx
	s    *tensor // the scores
	np64 *tensor // nonpad_kv_seqlen as I64 [B, 1, 1, 1], or nil
}

// attnMask adds attn_mask: bool (true attends) or additive; a mask shorter
// than the keys is padded with "masked".
func (m *maskCtx) attnMask() {
	a, c, mt := m.a, m.c, m.a.mask
	mshape := a.maskShape(mt)
	bias := c.temp(a.dt, mshape)
	if mt.shape[len(mt.shape)-1] < a.t {
		c.emit(&rt.Fill{Y: c.ref(bias), Value: math.Inf(-1)})
	}
	dst := c.view(bias, mt.shape, rt.ContiguousStrides(mshape), 0)
	if mt.dtype == rt.Bool {
		c.emit(&rt.Where{Cond: c.ref(mt), A: c.bcast(a.zero, mt.shape), B: c.bcast(a.ninf, mt.shape), Y: dst})
	} else {
		c.copyInto(dst, c.ref(mt))
	}
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(m.s), B: c.bcast(bias, a.sshape), Y: c.ref(m.s)})
}

// addAllowed adds 0 where lhs <= rhs and -inf elsewhere.
func (m *maskCtx) addAllowed(lhs, rhs rt.Ref) {
	a, c, sshape := m.a, m.c, m.a.sshape
	ok := c.temp(rt.Bool, sshape)
	c.emit(&rt.Binary{Fn: rt.LessEq, A: lhs, B: rhs, Y: c.ref(ok)})
	bias := c.temp(a.dt, sshape)
	c.emit(&rt.Where{Cond: c.ref(ok), A: c.bcast(a.zero, sshape), B: c.bcast(a.ninf, sshape), Y: c.ref(bias)})
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(m.s), B: c.ref(bias), Y: c.ref(m.s)})
}

// addConst adds a constant [Sq, T] bias, -inf where f says a query may
// not attend a key.
func (m *maskCtx) addConst(f func(i, j int) bool) {
	a, c := m.a, m.c
	bm := make([]float64, a.sq*a.t)
	for i := 0; i < a.sq; i++ {
		for j := 0; j < a.t; j++ {
			if f(i, j) {
				bm[i*a.t+j] = math.Inf(-1)
			}
		}
	}
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(m.s), B: c.bcast(c.newConst(rt.FromFloat64(a.dt, bm, a.sq, a.t)), a.sshape), Y: c.ref(m.s)})
}

// window masks keys outside the sliding window (opset 25): query i at
// position p = i + offset attends keys p-left <= j <= p+right.
func (m *maskCtx) window() {
	a, c := m.a, m.c
	sq, t := a.sq, a.t
	if a.nonpad == nil || a.past > 0 {
		m.addConst(func(i, j int) bool {
			p := int64(i + a.past)
			return (a.left >= 0 && int64(j) < p-a.left) || (a.right >= 0 && !a.causal && int64(j) > p+a.right)
		})
		return
	}
	neg := c.temp(rt.I64, m.np64.shape)
	c.emit(&rt.Unary{Fn: rt.Neg, X: c.ref(m.np64), Y: c.ref(neg)})
	for _, side := range []struct {
		w    int64
		sign int
	}{{a.left, 1}, {a.right, -1}} {
		if side.w < 0 || (side.sign < 0 && a.causal) {
			continue
		}
		// left: i - j - Sq - left <= -n; right: j - i + Sq - right <= n.
		ev := make([]int64, sq*t)
		for i := 0; i < sq; i++ {
			for j := 0; j < t; j++ {
				ev[i*t+j] = int64(side.sign*(i-j-sq)) - side.w
			}
		}
		rhs := m.np64
		if side.sign > 0 {
			rhs = neg
		}
		m.addAllowed(c.bcast(c.i64Const(ev, 1, 1, sq, t), a.sshape), c.bcast(rhs, a.sshape))
	}
}

// causal masks later keys: query i attends key j when j <= i + offset;
// offset is the past length, or nonpad_kv_seqlen[b] - Sq for an external
// cache.
func (m *maskCtx) causal() {
	a, c := m.a, m.c
	if a.nonpad == nil || a.past > 0 {
		m.addConst(func(i, j int) bool { return j > i+a.past })
		return
	}
	dv := make([]int64, a.sq*a.t)
	for i := 0; i < a.sq; i++ {
		for j := 0; j < a.t; j++ {
			dv[i*a.t+j] = int64(j - i + a.sq)
		}
	}
	m.addAllowed(c.bcast(c.i64Const(dv, 1, 1, a.sq, a.t), a.sshape), c.bcast(m.np64, a.sshape))
}

// output softmaxes the scores over the keys (a fully masked row gets zero
// weights), writes qk_matmul_output in modes 2 and 3, and computes
// Y = P V in Q's layout.
func (a *attention) output(c *nodeCtx, s, v, qkOut *tensor) error {
	b, qh, sq, t, dv := a.b, a.qh, a.sq, a.t, a.dv
	if qkOut != nil && a.mode == 2 {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	c.emit(&rt.Softmax{X: c.ref(s), Y: c.ref(s), Outer: b * qh * sq, N: t, Inner: 1})
	if a.masked() {
		// A fully masked row (all -inf) softmaxes to NaN: it attends to
		// nothing, so its weights are zero.
		ok := c.temp(rt.Bool, a.sshape)
		c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(s), B: c.ref(s), Y: c.ref(ok)})
		c.emit(&rt.Where{Cond: c.ref(ok), A: c.ref(s), B: c.bcast(a.zero, a.sshape), Y: c.ref(s)})
	}
	if qkOut != nil && a.mode == 3 {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	yshape := []int{b, qh, sq, dv}
	if a.r == 3 {
		yshape = []int{b, sq, qh * dv}
	}
	y, err := c.define(0, a.dt, yshape)
	if err != nil {
		return err
	}
	dst := y
	if a.r == 3 {
		dst = c.temp(a.dt, []int{b, qh, sq, dv})
	}
	c.emit(&rt.MatMul{A: c.ref(s), B: c.ref(v), Y: c.ref(dst), Batch: b * qh, M: sq, N: dv, K: t,
		StrideA: sq * t, StrideB: t * dv, StrideY: sq * dv, Alpha: 1})
	if a.r == 3 {
		c.copyInto(c.view(y, []int{b, qh, sq, dv}, []int{sq * qh * dv, dv, qh * dv, 1}, 0), c.ref(dst))
	}
	return nil
}
