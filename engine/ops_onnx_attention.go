package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	register("Attention", 3, 7, lowerAttention)
}

// heads4 returns t as a contiguous [B, H, S, D] tensor: t itself when it
// is 4-D, else a transposing copy of the 3-D [B, S, H*D] input.
func (c *nodeCtx) heads4(t *tensor, h int) (*tensor, error) {
	if len(t.shape) == 4 {
		return t, nil
	}
	b, s, hd := t.shape[0], t.shape[1], t.shape[2]
	if h < 1 || hd%h != 0 {
		return nil, c.shapeErr("%q has shape %v, not divisible into %d heads", t.name, t.shape, h)
	}
	d := hd / h
	out := c.temp(t.dtype, []int{b, h, s, d})
	c.copyInto(c.ref(out), c.view(t, out.shape, []int{s * hd, d, hd, 1}, 0))
	return out, nil
}

// lowerAttention decomposes ONNX Attention (opsets 23, 24) into MatMul,
// Softmax and elementwise ops: scores = scale * Q K^T, an optional softcap,
// an additive bias from attn_mask, is_causal and nonpad_kv_seqlen, softmax
// over the keys, Y = P V. past_key/past_value are concatenated in front of
// K and V (present_key/present_value); grouped-query attention repeats each
// KV head for q_num_heads/kv_num_heads query heads.
func lowerAttention(c *nodeCtx) error {
	q, k, v := c.in[0], c.in[1], c.in[2]
	if err := needFloat(c, q, k, v); err != nil {
		return err
	}
	r := len(q.shape)
	if (r != 3 && r != 4) || len(k.shape) != r || len(v.shape) != r {
		return c.shapeErr("Q %v, K %v, V %v must all be 3-D or 4-D", q.shape, k.shape, v.shape)
	}
	qh, kvh := int(c.attrInt("q_num_heads", 0)), int(c.attrInt("kv_num_heads", 0))
	if r == 4 {
		qh, kvh = q.shape[1], k.shape[1]
	}
	var err error
	if q, err = c.heads4(q, qh); err != nil {
		return err
	}
	if k, err = c.heads4(k, kvh); err != nil {
		return err
	}
	if v, err = c.heads4(v, kvh); err != nil {
		return err
	}
	b, sq, d := q.shape[0], q.shape[2], q.shape[3]
	sk, dv := k.shape[2], v.shape[3]
	if k.shape[0] != b || v.shape[0] != b || k.shape[3] != d || v.shape[1] != kvh || v.shape[2] != sk || kvh < 1 || qh%kvh != 0 {
		return c.shapeErr("Q %v, K %v, V %v (as heads) do not match", q.shape, k.shape, v.shape)
	}
	dt := q.dtype
	// KV cache: present = concat(past, new) on the sequence axis.
	past := 0
	cache := func(in, out int, x *tensor) (*tensor, error) {
		var p *tensor
		if c.has(in) {
			p = c.in[in]
			if len(p.shape) != 4 || p.shape[0] != b || p.shape[1] != kvh || p.shape[3] != x.shape[3] || p.dtype != dt {
				return nil, c.shapeErr("past %q has shape %v, want [%d %d * %d]", p.name, p.shape, b, kvh, x.shape[3])
			}
			past = p.shape[2]
		}
		shape := []int{b, kvh, x.shape[2], x.shape[3]}
		if p != nil {
			shape[2] += p.shape[2]
		}
		y, err := c.define(out, dt, shape)
		if err != nil {
			return nil, err
		}
		if y == nil {
			if p == nil {
				return x, nil
			}
			y = c.temp(dt, shape)
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
	if k, err = cache(4, 1, k); err != nil {
		return err
	}
	if v, err = cache(5, 2, v); err != nil {
		return err
	}
	t := k.shape[2]
	// Grouped-query attention: repeat each KV head rep times.
	if rep := qh / kvh; rep > 1 {
		expand := func(x *tensor) *tensor {
			e := c.temp(dt, []int{b, qh, t, x.shape[3]})
			src := c.view(x, []int{b, kvh, rep, t, x.shape[3]}, []int{kvh * t * x.shape[3], t * x.shape[3], 0, x.shape[3], 1}, 0)
			c.copyInto(c.view(e, src.Shape, nil, 0), src)
			return e
		}
		k, v = expand(k), expand(v)
	}
	scale := c.attrFloat("scale", 1/math.Sqrt(float64(d)))
	sshape := []int{b, qh, sq, t}
	s := c.temp(dt, sshape)
	c.emit(&rt.MatMul{A: c.ref(q), B: c.ref(k), Y: c.ref(s), Batch: b * qh, M: sq, N: t, K: d, TransB: true,
		StrideA: sq * d, StrideB: t * d, StrideY: sq * t, Alpha: scale})
	if cap := c.attrFloat("softcap", 0); cap > 0 {
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / cap, X: c.ref(s), Y: c.ref(s)})
		c.emit(&rt.Unary{Fn: rt.Tanh, X: c.ref(s), Y: c.ref(s)})
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: cap, X: c.ref(s), Y: c.ref(s)})
	}
	mode := c.attrInt("qk_matmul_output_mode", 0)
	var qkOut *tensor
	if len(c.out) > 3 {
		if qkOut, err = c.define(3, dt, sshape); err != nil {
			return err
		}
	}
	if qkOut != nil && (mode == 0 || mode == 1) {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	ninf := c.scalar(dt, math.Inf(-1))
	zero := c.scalar(dt, 0)
	// attn_mask: bool (true attends) or additive; a mask shorter than the
	// keys is padded with "masked".
	if c.has(3) {
		m := c.in[3]
		if len(m.shape) < 1 || len(m.shape) > 4 || m.shape[len(m.shape)-1] > t {
			return c.shapeErr("attn_mask %v does not fit scores %v", m.shape, sshape)
		}
		mshape := append([]int{}, m.shape...)
		mshape[len(mshape)-1] = t
		if _, err := broadcastShapes(mshape, sshape); err != nil {
			return err
		}
		bias := c.temp(dt, mshape)
		if m.shape[len(m.shape)-1] < t {
			c.emit(&rt.Fill{Y: c.ref(bias), Value: math.Inf(-1)})
		}
		dst := c.view(bias, m.shape, rt.ContiguousStrides(mshape), 0)
		switch {
		case m.dtype == rt.Bool:
			c.emit(&rt.Where{Cond: c.ref(m), A: c.bcast(zero, m.shape), B: c.bcast(ninf, m.shape), Y: dst})
		case m.dtype == dt:
			c.copyInto(dst, c.ref(m))
		default:
			return c.shapeErr("attn_mask has dtype %s, want bool or %s", m.dtype, dt)
		}
		c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(s), B: c.bcast(bias, sshape), Y: c.ref(s)})
	}
	var nonpad *tensor
	if c.has(6) {
		nonpad = c.in[6]
		if prod(nonpad.shape) != b || !nonpad.dtype.IsInt() {
			return c.shapeErr("nonpad_kv_seqlen %s%v, want %d integers", nonpad.dtype, nonpad.shape, b)
		}
	}
	// addAllowed adds 0 where lhs <= rhs and -inf elsewhere.
	addAllowed := func(lhs, rhs rt.Ref) {
		ok := c.temp(rt.Bool, sshape)
		c.emit(&rt.Binary{Fn: rt.LessEq, A: lhs, B: rhs, Y: c.ref(ok)})
		bias := c.temp(dt, sshape)
		c.emit(&rt.Where{Cond: c.ref(ok), A: c.bcast(zero, sshape), B: c.bcast(ninf, sshape), Y: c.ref(bias)})
		c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(s), B: c.ref(bias), Y: c.ref(s)})
	}
	var np64 *tensor
	if nonpad != nil {
		np64 = c.temp(rt.I64, []int{b, 1, 1, 1})
		c.copyInto(c.view(np64, []int{b}, nil, 0), c.view(nonpad, []int{b}, nil, 0))
	}
	causal := c.attrInt("is_causal", 0) != 0
	left, right := c.attrInt("left_window_size", -1), c.attrInt("right_window_size", -1)
	if causal {
		right = 0
	}
	if left >= 0 || (right >= 0 && !causal) {
		// Sliding window (opset 25): query i at position p = i + offset
		// attends keys p-left <= j <= p+right.
		if nonpad != nil && past == 0 {
			neg := c.temp(rt.I64, np64.shape)
			c.emit(&rt.Unary{Fn: rt.Neg, X: c.ref(np64), Y: c.ref(neg)})
			for _, side := range []struct {
				w    int64
				sign int
			}{{left, 1}, {right, -1}} {
				if side.w < 0 || (side.sign < 0 && causal) {
					continue
				}
				// left: i - j - Sq - left <= -n; right: j - i + Sq - right <= n.
				ev := make([]int64, sq*t)
				for i := 0; i < sq; i++ {
					for j := 0; j < t; j++ {
						ev[i*t+j] = int64(side.sign*(i-j-sq)) - side.w
					}
				}
				rhs := np64
				if side.sign > 0 {
					rhs = neg
				}
				addAllowed(c.bcast(c.i64Const(ev, 1, 1, sq, t), sshape), c.bcast(rhs, sshape))
			}
		} else {
			wm := make([]float64, sq*t)
			for i := 0; i < sq; i++ {
				p := int64(i + past)
				for j := 0; j < t; j++ {
					if (left >= 0 && int64(j) < p-left) || (right >= 0 && !causal && int64(j) > p+right) {
						wm[i*t+j] = math.Inf(-1)
					}
				}
			}
			c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(s), B: c.bcast(c.newConst(rt.FromFloat64(dt, wm, sq, t)), sshape), Y: c.ref(s)})
		}
	}
	if causal {
		// Query i attends key j when j <= i + offset: offset is the past
		// length, or nonpad_kv_seqlen[b] - Sq for an external cache.
		if nonpad != nil && past == 0 {
			dv := make([]int64, sq*t)
			for i := 0; i < sq; i++ {
				for j := 0; j < t; j++ {
					dv[i*t+j] = int64(j - i + sq)
				}
			}
			addAllowed(c.bcast(c.i64Const(dv, 1, 1, sq, t), sshape), c.bcast(np64, sshape))
		} else {
			cm := make([]float64, sq*t)
			for i := 0; i < sq; i++ {
				for j := 0; j < t; j++ {
					if j > i+past {
						cm[i*t+j] = math.Inf(-1)
					}
				}
			}
			c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(s), B: c.bcast(c.newConst(rt.FromFloat64(dt, cm, sq, t)), sshape), Y: c.ref(s)})
		}
	}
	if nonpad != nil {
		// Keys at positions >= nonpad_kv_seqlen[b] are padding: j+1 <= n.
		jv := make([]int64, t)
		for j := range jv {
			jv[j] = int64(j + 1)
		}
		addAllowed(c.bcast(c.i64Const(jv, 1, 1, 1, t), sshape), c.bcast(np64, sshape))
	}
	if qkOut != nil && mode == 2 {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	c.emit(&rt.Softmax{X: c.ref(s), Y: c.ref(s), Outer: b * qh * sq, N: t, Inner: 1})
	if c.has(3) || nonpad != nil || left >= 0 || right >= 0 {
		// A fully masked row (all -inf) softmaxes to NaN: it attends to
		// nothing, so its weights are zero.
		ok := c.temp(rt.Bool, sshape)
		c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(s), B: c.ref(s), Y: c.ref(ok)})
		c.emit(&rt.Where{Cond: c.ref(ok), A: c.ref(s), B: c.bcast(zero, sshape), Y: c.ref(s)})
	}
	if qkOut != nil && mode == 3 {
		c.copyInto(c.ref(qkOut), c.ref(s))
	}
	yshape := []int{b, qh, sq, dv}
	if r == 3 {
		yshape = []int{b, sq, qh * dv}
	}
	y, err := c.define(0, dt, yshape)
	if err != nil {
		return err
	}
	dst := y
	if r == 3 {
		dst = c.temp(dt, []int{b, qh, sq, dv})
	}
	c.emit(&rt.MatMul{A: c.ref(s), B: c.ref(v), Y: c.ref(dst), Batch: b * qh, M: sq, N: dv, K: t,
		StrideA: sq * t, StrideB: t * dv, StrideY: sq * dv, Alpha: 1})
	if r == 3 {
		c.copyInto(c.view(y, []int{b, qh, sq, dv}, []int{sq * qh * dv, dv, qh * dv, 1}, 0), c.ref(dst))
	}
	return nil
}
