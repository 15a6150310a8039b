package engine

import (
	"github.com/vrun-go/vrun/rt"
)

// ONNX operators built on the index primitives (Gather, GatherElements,
// ScatterElements, TopK) and on comparisons with plan-time index
// constants.

func init() {
	register("GatherElements", 2, 2, lowerGatherElements)
	register("ScatterElements", 3, 3, lowerScatterElements)
	register("ScatterND", 3, 3, lowerScatterND)
	register("GatherND", 2, 2, lowerGatherND)
	register("TopK", 2, 2, lowerTopK)
	register("NegativeLogLikelihoodLoss", 2, 3, func(c *nodeCtx) error { return lowerNLLLoss(c, false) })
	register("SoftmaxCrossEntropyLoss", 2, 3, func(c *nodeCtx) error { return lowerNLLLoss(c, true) })
	register("OneHot", 3, 3, lowerOneHot)
	register("Hardmax", 1, 1, lowerHardmax)
	register("Trilu", 1, 2, lowerTrilu)
	register("CumSum", 2, 2, lowerCumSum)
}

// scalar adds a rank-0 plan-time constant.
func (c *nodeCtx) scalar(dt rt.DType, v float64) *tensor {
	return c.newConst(rt.FromFloat64(dt, []float64{v}))
}

// i64Const adds an I64 plan-time constant.
func (c *nodeCtx) i64Const(v []int64, shape ...int) *tensor {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return c.newConst(rt.FromFloat64(rt.I64, f, shape...))
}

// copyInto emits dst = src (a strided view; a cast when dtypes differ).
func (c *nodeCtx) copyInto(dst rt.Ref, src rt.Ref) {
	if rt.NumElements(dst.Shape) > 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: src, Y: dst})
	}
}

// v3 returns t's contiguous storage seen as [a, b, d].
func (c *nodeCtx) v3(t *tensor, a, b, d int) rt.Ref {
	return c.view(t, []int{a, b, d}, nil, 0)
}

// indicesI64 returns idx as I64 with negative entries made non-negative by
// adding dim (a copy; the caller's tensor is untouched).
func (c *nodeCtx) indicesI64(idx *tensor, dim int) *tensor {
	t := c.temp(rt.I64, idx.shape)
	c.copyInto(c.ref(t), c.ref(idx))
	neg := c.temp(rt.Bool, idx.shape)
	c.emit(&rt.Binary{Fn: rt.Less, A: c.ref(t), B: c.bcast(c.scalar(rt.I64, 0), t.shape), Y: c.ref(neg)})
	fixed := c.temp(rt.I64, idx.shape)
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(t), B: c.bcast(c.scalar(rt.I64, float64(dim)), t.shape), Y: c.ref(fixed)})
	out := c.temp(rt.I64, idx.shape)
	c.emit(&rt.Where{Cond: c.ref(neg), A: c.ref(fixed), B: c.ref(t), Y: c.ref(out)})
	return out
}

func needIndex(c *nodeCtx, t *tensor) error {
	if t.dtype != rt.I32 && t.dtype != rt.I64 {
		return c.errf("indices %q have dtype %s, want i32 or i64", t.name, t.dtype)
	}
	return nil
}

func lowerGatherElements(c *nodeCtx) error {
	x, idx := c.in[0], c.in[1]
	if err := needIndex(c, idx); err != nil {
		return err
	}
	r := len(x.shape)
	if r == 0 || len(idx.shape) != r {
		return c.shapeErr("data %v and indices %v must have the same rank >= 1", x.shape, idx.shape)
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), r)
	if err != nil {
		return err
	}
	src := x
	for d := range x.shape {
		if d != axis && idx.shape[d] != x.shape[d] {
			if idx.shape[d] > x.shape[d] {
				return c.shapeErr("indices %v exceed data %v on axis %d", idx.shape, x.shape, d)
			}
			// Crop the data to the indices' extent on the other axes.
			shape := append([]int{}, idx.shape...)
			shape[axis] = x.shape[axis]
			src = c.temp(x.dtype, shape)
			c.copyInto(c.ref(src), c.view(x, shape, rt.ContiguousStrides(x.shape), 0))
			break
		}
	}
	y, err := c.define(0, x.dtype, idx.shape)
	if err != nil {
		return err
	}
	o, n, in := split3(idx.shape, axis)
	if prod(idx.shape) == 0 {
		return nil
	}
	c.emit(&rt.GatherElements{X: c.ref(src), Idx: c.v3(idx, o, n, in), Y: c.ref(y), Outer: o, Axis: x.shape[axis], N: n, Inner: in})
	return nil
}

func scatterFn(c *nodeCtx) (rt.ScatterFn, error) {
	switch r := c.attrString("reduction", "none"); r {
	case "none":
		return rt.ScatterSet, nil
	case "add":
		return rt.ScatterAdd, nil
	case "mul":
		return rt.ScatterMul, nil
	case "max":
		return rt.ScatterMax, nil
	case "min":
		return rt.ScatterMin, nil
	default:
		return 0, c.errf("unknown reduction %q", r)
	}
}

// scatterInputs returns the data, indices and updates of a scatter node
// and its reduction, checking the indices' dtype.
func scatterInputs(c *nodeCtx) (x, idx, upd *tensor, fn rt.ScatterFn, err error) {
	x, idx, upd = c.in[0], c.in[1], c.in[2]
	if err := needIndex(c, idx); err != nil {
		return nil, nil, nil, 0, err
	}
	fn, err = scatterFn(c)
	return x, idx, upd, fn, err
}

func lowerScatterElements(c *nodeCtx) error {
	x, idx, upd, fn, err := scatterInputs(c)
	if err != nil {
		return err
	}
	r := len(x.shape)
	if r == 0 || len(idx.shape) != r || !sameShape(idx.shape, upd.shape) || upd.dtype != x.dtype {
		return c.shapeErr("data %s%v, indices %v and updates %s%v do not match", x.dtype, x.shape, idx.shape, upd.dtype, upd.shape)
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), r)
	if err != nil {
		return err
	}
	for d := range x.shape {
		if d != axis && idx.shape[d] != x.shape[d] {
			return c.unsupported("ScatterElements with indices %v smaller than data %v off the axis", idx.shape, x.shape)
		}
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	c.copyInto(c.ref(y), c.ref(x))
	o, n, in := split3(idx.shape, axis)
	if prod(idx.shape) > 0 {
		c.emit(&rt.ScatterElements{Fn: fn, Y: c.ref(y), Idx: c.v3(idx, o, n, in), Upd: c.v3(upd, o, n, in), Outer: o, Axis: x.shape[axis], N: n, Inner: in})
	}
	return nil
}

// flatIndex computes, for indices viewed as [K, q], the row-major flat
// index into dims (len q) of each row, with negative entries wrapped. A
// row with an entry still outside its dim gets the flat index prod(dims),
// which is out of range of the flattened axis: the GatherElements or
// ScatterElements that reads it then fails the run as ONNX requires (a
// wrong entry could otherwise make an in-range flat index).
func (c *nodeCtx) flatIndex(idx *tensor, k, q int, dims []int) *tensor {
	flat := c.temp(rt.I64, []int{k})
	c.emit(&rt.Fill{Y: c.ref(flat), Value: 0})
	bad := c.temp(rt.Bool, []int{k})
	c.emit(&rt.Fill{Y: c.ref(bad), Value: 0})
	out := c.temp(rt.Bool, []int{k})
	for d := 0; d < q; d++ {
		col := c.temp(idx.dtype, []int{k})
		c.copyInto(c.ref(col), c.view(idx, []int{k}, []int{q}, d))
		fixed := c.indicesI64(col, dims[d])
		c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(flat), B: c.bcast(c.scalar(rt.I64, float64(dims[d])), []int{k}), Y: c.ref(flat)})
		c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(flat), B: c.ref(fixed), Y: c.ref(flat)})
		for _, cmp := range []struct {
			fn rt.BinaryFn
			v  int
		}{{rt.Less, 0}, {rt.GreaterEq, dims[d]}} {
			c.emit(&rt.Binary{Fn: cmp.fn, A: c.ref(fixed), B: c.bcast(c.scalar(rt.I64, float64(cmp.v)), []int{k}), Y: c.ref(out)})
			c.emit(&rt.Binary{Fn: rt.Or, A: c.ref(bad), B: c.ref(out), Y: c.ref(bad)})
		}
	}
	res := c.temp(rt.I64, []int{k})
	c.emit(&rt.Where{Cond: c.ref(bad), A: c.bcast(c.scalar(rt.I64, float64(prod(dims))), []int{k}), B: c.ref(flat), Y: c.ref(res)})
	return res
}

func lowerScatterND(c *nodeCtx) error {
	x, idx, upd, fn, err := scatterInputs(c)
	if err != nil {
		return err
	}
	if len(idx.shape) == 0 {
		return c.shapeErr("indices must have rank >= 1")
	}
	q := idx.shape[len(idx.shape)-1]
	if q > len(x.shape) || upd.dtype != x.dtype {
		return c.shapeErr("indices %v, data %s%v, updates %s%v", idx.shape, x.dtype, x.shape, upd.dtype, upd.shape)
	}
	k := prod(idx.shape[:len(idx.shape)-1])
	m, slice := prod(x.shape[:q]), prod(x.shape[q:])
	if want := append(append([]int{}, idx.shape[:len(idx.shape)-1]...), x.shape[q:]...); !sameShape(upd.shape, want) {
		return c.shapeErr("updates have shape %v, want %v", upd.shape, want)
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	c.copyInto(c.ref(y), c.ref(x))
	if k*slice == 0 {
		return nil
	}
	flat := c.flatIndex(idx, k, q, x.shape[:q])
	c.emit(&rt.ScatterElements{Fn: fn, Y: c.ref(y), Idx: c.view(flat, []int{1, k, slice}, []int{0, 1, 0}, 0),
		Upd: c.v3(upd, 1, k, slice), Outer: 1, Axis: m, N: k, Inner: slice})
	return nil
}

func lowerGatherND(c *nodeCtx) error {
	x, idx := c.in[0], c.in[1]
	if err := needIndex(c, idx); err != nil {
		return err
	}
	b := int(c.attrInt("batch_dims", 0))
	if len(idx.shape) < b+1 || b < 0 || b > len(x.shape) {
		return c.shapeErr("indices %v, data %v, batch_dims %d", idx.shape, x.shape, b)
	}
	q := idx.shape[len(idx.shape)-1]
	if b+q > len(x.shape) {
		return c.shapeErr("indices %v index past the rank of data %v", idx.shape, x.shape)
	}
	for d := 0; d < b; d++ {
		if idx.shape[d] != x.shape[d] {
			return c.shapeErr("batch dims of indices %v and data %v differ", idx.shape, x.shape)
		}
	}
	outer := prod(x.shape[:b])
	k := prod(idx.shape[b : len(idx.shape)-1])
	m, slice := prod(x.shape[b:b+q]), prod(x.shape[b+q:])
	shape := append(append([]int{}, idx.shape[:len(idx.shape)-1]...), x.shape[b+q:]...)
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if prod(shape) == 0 {
		return nil
	}
	flat := c.flatIndex(idx, outer*k, q, x.shape[b:b+q])
	c.emit(&rt.GatherElements{X: c.v3(x, outer, m, slice), Idx: c.view(flat, []int{outer, k, slice}, []int{k, 1, 0}, 0),
		Y: c.ref(y), Outer: outer, Axis: m, N: k, Inner: slice})
	return nil
}

// constScalar returns input i, a one-element integer constant.
func (c *nodeCtx) constScalar(i int) (int64, error) {
	v, err := c.constInts(i)
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, c.shapeErr("input %d (%q) must have one element, has shape %v", i, c.in[i].name, c.in[i].shape)
	}
	return v[0], nil
}

// axisOfX normalises an axis of input 0, which must have rank >= 1.
func (c *nodeCtx) axisOfX(axis int64) (int, error) {
	x := c.in[0]
	if len(x.shape) == 0 {
		return 0, c.shapeErr("input %q is a scalar, want rank >= 1", x.name)
	}
	return c.normAxis(axis, len(x.shape))
}

func lowerTopK(c *nodeCtx) error {
	x := c.in[0]
	kv, err := c.constScalar(1)
	if err != nil {
		return err
	}
	axis, err := c.axisOfX(c.attrInt("axis", -1))
	if err != nil {
		return err
	}
	o, n, in := split3(x.shape, axis)
	k := int(kv)
	if k < 0 || k > n {
		return c.shapeErr("K = %d out of range for axis of size %d", k, n)
	}
	shape := append([]int{}, x.shape...)
	shape[axis] = k
	vals, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	inds, err := c.define(1, rt.I64, shape)
	if err != nil {
		return err
	}
	if inds == nil {
		inds = c.temp(rt.I64, shape)
	}
	if prod(shape) > 0 {
		c.emit(&rt.TopK{X: c.ref(x), Values: c.ref(vals), Indices: c.ref(inds), Outer: o, N: n, Inner: in, K: k, Largest: c.attrInt("largest", 1) != 0})
	}
	return nil
}

// lowerNLLLoss lowers NegativeLogLikelihoodLoss, and with sce
// SoftmaxCrossEntropyLoss (a LogSoftmax over the class axis first, whose
// result is the optional second output).
func lowerNLLLoss(c *nodeCtx, sce bool) error {
	x, tgt := c.in[0], c.in[1]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if err := needIndex(c, tgt); err != nil {
		return err
	}
	if len(x.shape) < 2 {
		return c.shapeErr("input must have rank >= 2, got %v", x.shape)
	}
	n, cl, d := x.shape[0], x.shape[1], prod(x.shape[2:])
	if want := append([]int{n}, x.shape[2:]...); !sameShape(tgt.shape, want) {
		return c.shapeErr("target has shape %v, want %v", tgt.shape, want)
	}
	red := c.attrString("reduction", "mean")
	if red != "none" && red != "sum" && red != "mean" {
		return c.errf("unknown reduction %q", red)
	}
	logp := x
	if sce {
		var err error
		if logp, err = c.define(1, x.dtype, x.shape); err != nil {
			return err
		}
		if logp == nil {
			logp = c.temp(x.dtype, x.shape)
		}
		c.emit(&rt.Softmax{X: c.ref(x), Y: c.ref(logp), Outer: n, N: cl, Inner: d, Log: true})
	}
	nd := n * d
	t := c.temp(rt.I64, []int{nd})
	c.copyInto(c.ref(t), c.view(tgt, []int{nd}, nil, 0))
	var ignored *tensor
	if a, ok := c.n.Attr("ignore_index"); ok {
		ignored = c.temp(rt.Bool, []int{nd})
		c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(t), B: c.bcast(c.scalar(rt.I64, float64(a.Int)), []int{nd}), Y: c.ref(ignored)})
		c.emit(&rt.Where{Cond: c.ref(ignored), A: c.bcast(c.scalar(rt.I64, 0), []int{nd}), B: c.ref(t), Y: c.ref(t)})
	}
	g := c.temp(x.dtype, []int{nd})
	c.emit(&rt.GatherElements{X: c.ref(logp), Idx: c.view(t, []int{n, 1, d}, nil, 0), Y: c.ref(g), Outer: n, Axis: cl, N: 1, Inner: d})
	w := c.temp(x.dtype, []int{nd})
	if c.has(2) {
		wt := c.in[2]
		if err := needFloat(c, x, wt); err != nil {
			return err
		}
		if prod(wt.shape) != cl {
			return c.shapeErr("weight has shape %v, want [%d]", wt.shape, cl)
		}
		c.emit(&rt.Gather{X: c.view(wt, []int{1, cl, 1}, nil, 0), Idx: c.ref(t), Y: c.ref(w), Outer: 1, Axis: cl, Inner: 1})
	} else {
		c.emit(&rt.Fill{Y: c.ref(w), Value: 1})
	}
	if ignored != nil {
		c.emit(&rt.Where{Cond: c.ref(ignored), A: c.bcast(c.scalar(x.dtype, 0), []int{nd}), B: c.ref(w), Y: c.ref(w)})
	}
	// loss = -logp[target] * w
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(g), B: c.ref(w), Y: c.ref(g)})
	c.emit(&rt.Unary{Fn: rt.Neg, X: c.ref(g), Y: c.ref(g)})
	if red == "none" {
		y, err := c.define(0, x.dtype, tgt.shape)
		if err != nil {
			return err
		}
		c.copyInto(c.ref(y), c.view(g, tgt.shape, nil, 0))
		return nil
	}
	y, err := c.define(0, x.dtype, []int{})
	if err != nil {
		return err
	}
	c.emit(&rt.Reduce{Fn: rt.Sum, X: c.ref(g), Y: c.ref(y), Outer: 1, N: nd, Inner: 1})
	if red == "mean" {
		sw := c.temp(x.dtype, []int{})
		c.emit(&rt.Reduce{Fn: rt.Sum, X: c.ref(w), Y: c.ref(sw), Outer: 1, N: nd, Inner: 1})
		c.emit(&rt.Binary{Fn: rt.Div, A: c.ref(y), B: c.ref(sw), Y: c.ref(y)})
	}
	return nil
}

// iota returns an I64 constant 0..n-1 of the given rank with n on axis.
func (c *nodeCtx) iota(n, axis, rank int) *tensor {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(i)
	}
	shape := make([]int, rank)
	for i := range shape {
		shape[i] = 1
	}
	shape[axis] = n
	return c.i64Const(v, shape...)
}

func lowerOneHot(c *nodeCtx) error {
	idx, vals := c.in[0], c.in[2]
	depthF, err := c.constFloat(1)
	if err != nil {
		return err
	}
	depth := int(depthF)
	if depth < 0 || prod(vals.shape) != 2 {
		return c.shapeErr("depth %v or values %v invalid", depthF, vals.shape)
	}
	r := len(idx.shape) + 1
	axis, err := c.normAxis(c.attrInt("axis", -1), r)
	if err != nil {
		return err
	}
	shape := append(append(append([]int{}, idx.shape[:axis]...), depth), idx.shape[axis:]...)
	ishape := append([]int{}, shape...)
	ishape[axis] = 1
	fixed := c.indicesI64(idx, depth)
	eq := c.temp(rt.Bool, shape)
	c.emit(&rt.Binary{Fn: rt.Equal, A: c.bcast(viewAs(fixed, ishape), shape), B: c.bcast(c.iota(depth, axis, r), shape), Y: c.ref(eq)})
	y, err := c.define(0, vals.dtype, shape)
	if err != nil {
		return err
	}
	zero := make([]int, r)
	c.emit(&rt.Where{Cond: c.ref(eq), A: c.view(vals, shape, zero, 1), B: c.view(vals, shape, zero, 0), Y: c.ref(y)})
	return nil
}

func lowerHardmax(c *nodeCtx) error {
	x := c.in[0]
	if len(x.shape) == 0 {
		return c.shapeErr("Hardmax of a scalar")
	}
	axis, err := c.normAxis(c.attrInt("axis", -1), len(x.shape))
	if err != nil {
		return err
	}
	o, n, in := split3(x.shape, axis)
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || prod(x.shape) == 0 {
		return err
	}
	am := c.temp(rt.I64, []int{o, 1, in})
	c.emit(&rt.Reduce{Fn: rt.ArgMax, X: c.ref(x), Y: c.ref(am), Outer: o, N: n, Inner: in})
	eq := c.temp(rt.Bool, []int{o, n, in})
	c.emit(&rt.Binary{Fn: rt.Equal, A: c.bcast(am, eq.shape), B: c.bcast(c.iota(n, 1, 3), eq.shape), Y: c.ref(eq)})
	c.copyInto(c.view(y, eq.shape, nil, 0), c.ref(eq))
	return nil
}

func lowerTrilu(c *nodeCtx) error {
	x := c.in[0]
	if len(x.shape) < 2 {
		return c.shapeErr("Trilu needs rank >= 2, got %v", x.shape)
	}
	k := int64(0)
	if c.has(1) {
		var err error
		if k, err = c.constScalar(1); err != nil {
			return err
		}
	}
	upper := c.attrInt("upper", 1) != 0
	h, w := x.shape[len(x.shape)-2], x.shape[len(x.shape)-1]
	m := make([]float64, h*w)
	for i := 0; i < h; i++ {
		for j := 0; j < w; j++ {
			d := int64(j - i)
			if (upper && d >= k) || (!upper && d <= k) {
				m[i*w+j] = 1
			}
		}
	}
	mask := c.newConst(rt.FromFloat64(rt.Bool, m, h, w))
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || prod(x.shape) == 0 {
		return err
	}
	c.emit(&rt.Where{Cond: c.bcast(mask, x.shape), A: c.ref(x), B: c.bcast(c.scalar(x.dtype, 0), x.shape), Y: c.ref(y)})
	return nil
}

// lowerCumSum is a Hillis-Steele scan: ceil(log2 n) rounds of strided
// adds between two buffers, the last round writing the output. reverse
// scans views with a negative stride on the axis; exclusive shifts the
// input by one first.
func lowerCumSum(c *nodeCtx) error {
	x := c.in[0]
	av, err := c.constScalar(1)
	if err != nil {
		return err
	}
	axis, err := c.axisOfX(av)
	if err != nil {
		return err
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	o, n, in := split3(x.shape, axis)
	if o*n*in == 0 {
		return nil
	}
	rev := c.attrInt("reverse", 0) != 0
	// seg views positions [lo, lo+cnt) of the (possibly reversed) axis.
	seg := func(t *tensor, lo, cnt int) rt.Ref {
		if rev {
			return c.view(t, []int{o, cnt, in}, []int{n * in, -in, 1}, (n-1-lo)*in)
		}
		return c.view(t, []int{o, cnt, in}, []int{n * in, in, 1}, lo*in)
	}
	rounds := 0
	for d := 1; d < n; d *= 2 {
		rounds++
	}
	tmp := c.temp(x.dtype, x.shape)
	a, b := y, tmp
	if rounds%2 == 1 {
		a, b = tmp, y
	}
	if c.attrInt("exclusive", 0) != 0 {
		c.emit(&rt.Fill{Y: seg(a, 0, 1), Value: 0})
		if n > 1 {
			c.copyInto(seg(a, 1, n-1), seg(x, 0, n-1))
		}
	} else {
		c.copyInto(c.ref(a), c.ref(x))
	}
	for d := 1; d < n; d *= 2 {
		c.copyInto(seg(b, 0, d), seg(a, 0, d))
		c.emit(&rt.Binary{Fn: rt.Add, A: seg(a, d, n-d), B: seg(a, 0, n-d), Y: seg(b, d, n-d)})
		a, b = b, a
	}
	return nil
}
