package engine

import (
	"math"
	"sort"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	register("Reshape", 2, 2, lowerReshape)
	register("Flatten", 1, 1, func(c *nodeCtx) error {
		x := c.in[0]
		r := len(x.shape)
		axis := c.attrInt("axis", 1)
		if axis < 0 {
			axis += int64(r)
		}
		if axis < 0 || axis > int64(r) {
			return c.shapeErr("axis %d out of range for rank %d", c.attrInt("axis", 1), r)
		}
		return c.alias(0, x, []int{prod(x.shape[:axis]), prod(x.shape[axis:])})
	})
	register("Squeeze", 1, 2, lowerSqueeze)
	register("Unsqueeze", 2, 2, lowerUnsqueeze)
	register("Transpose", 1, 1, lowerTranspose)
	register("Concat", 1, -1, lowerConcat)
	register("Slice", 3, 5, lowerSlice)
	register("Gather", 2, 2, lowerGather)
	register("Expand", 2, 2, lowerExpand)
	register("Tile", 2, 2, lowerTile)
	register("Split", 1, 2, lowerSplit)
	register("Shape", 1, 1, func(c *nodeCtx) error {
		x := c.in[0]
		r := int64(len(x.shape))
		start, end := c.attrInt("start", 0), c.attrInt("end", r)
		clampAxis := func(v int64) int64 {
			if v < 0 {
				v += r
			}
			return min(max(v, 0), r)
		}
		start, end = clampAxis(start), clampAxis(end)
		var dims []float64
		for i := start; i < end; i++ {
			dims = append(dims, float64(x.shape[i]))
		}
		return c.constant(0, rt.FromFloat64(rt.I64, dims, len(dims)))
	})
	register("Size", 1, 1, func(c *nodeCtx) error {
		return c.constant(0, rt.FromFloat64(rt.I64, []float64{float64(prod(c.in[0].shape))}))
	})
	register("ConstantOfShape", 1, 2, func(c *nodeCtx) error {
		dims, err := c.constInts(0)
		if err != nil {
			return err
		}
		shape := make([]int, len(dims))
		for i, d := range dims {
			if d < 0 || d > 1<<31 {
				return c.shapeErr("shape %v is invalid", dims)
			}
			shape[i] = int(d)
		}
		dt, v := rt.F32, 0.0
		if c.has(1) {
			val := c.in[1]
			if val.value == nil || val.value.Len() != 1 {
				return c.errf("value must be a constant one-element tensor")
			}
			dt, v = val.dtype, val.value.Float64(0)
		}
		if n := rt.NumElements(shape); n >= 0 && n <= 1<<16 {
			t, err := rt.NewTensor(dt, shape...)
			if err != nil {
				return err
			}
			for i := 0; i < t.Len(); i++ {
				t.SetFloat64(i, v)
			}
			return c.constant(0, t)
		}
		y, err := c.define(0, dt, shape)
		if err != nil {
			return err
		}
		c.emit(&rt.Fill{Y: c.ref(y), Value: v})
		return nil
	})
	register("Range", 3, 3, func(c *nodeCtx) error {
		for i := 0; i < 3; i++ {
			if err := c.needConst(i); err != nil {
				return err
			}
			if c.in[i].value.Len() != 1 {
				return c.errf("Range inputs must be scalars")
			}
		}
		start, limit, delta := c.in[0].value.Float64(0), c.in[1].value.Float64(0), c.in[2].value.Float64(0)
		if delta == 0 {
			return c.errf("Range delta is zero")
		}
		f := ceilDiv(limit-start, delta)
		if math.IsNaN(f) || f > 1<<24 { // checked as a float: converting a huge one to int is undefined
			return c.shapeErr("Range(%v, %v, %v) of %v elements is too large", start, limit, delta, f)
		}
		n := int(max(0, f))
		v := make([]float64, n)
		for i := range v {
			v[i] = start + float64(i)*delta
		}
		return c.constant(0, rt.FromFloat64(c.in[0].dtype, v, n))
	})
	for name, fn := range map[string]rt.ReduceFn{
		"ReduceSum": rt.Sum, "ReduceMean": rt.Mean, "ReduceMax": rt.RMax, "ReduceMin": rt.RMin,
		"ReduceProd": rt.Prod, "ReduceL1": rt.L1, "ReduceL2": rt.L2, "ReduceLogSumExp": rt.LogSumExp,
		"ReduceSumSquare": rt.SumSquare,
	} {
		fn := fn
		register(name, 1, 2, func(c *nodeCtx) error { return lowerReduce(c, fn) })
	}
	register("ReduceLogSum", 1, 2, func(c *nodeCtx) error {
		if err := lowerReduce(c, rt.Sum); err != nil {
			return err
		}
		y := c.out[0]
		c.emit(&rt.Unary{Fn: rt.Log, X: c.ref(y), Y: c.ref(y)})
		return nil
	})
	register("ArgMax", 1, 1, func(c *nodeCtx) error { return lowerArg(c, rt.ArgMax) })
	register("ArgMin", 1, 1, func(c *nodeCtx) error { return lowerArg(c, rt.ArgMin) })
}

func ceilDiv(a, b float64) float64 { return math.Ceil(a / b) }

func lowerReshape(c *nodeCtx) error {
	x := c.in[0]
	dims, err := c.constInts(1)
	if err != nil {
		return err
	}
	allowZero := c.attrInt("allowzero", 0) != 0
	shape := make([]int, len(dims))
	infer := -1
	known := 1
	for i, d := range dims {
		switch {
		case d == 0 && !allowZero:
			if i >= len(x.shape) {
				return c.shapeErr("shape %v copies dim %d of a rank-%d input", dims, i, len(x.shape))
			}
			shape[i] = x.shape[i]
		case d == -1:
			if infer >= 0 {
				return c.shapeErr("shape %v has more than one -1", dims)
			}
			infer = i
			continue
		case d < 0 || d > 1<<40:
			return c.shapeErr("shape %v has an invalid dim", dims)
		default:
			shape[i] = int(d)
		}
		k := rt.MulBytes(int64(known), int64(shape[i]))
		if k < 0 {
			return c.shapeErr("shape %v is too large", dims)
		}
		known = int(k)
	}
	total := prod(x.shape)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return c.shapeErr("cannot reshape %v into %v", x.shape, dims)
		}
		shape[infer] = total / known
	}
	if prod(shape) != total {
		return c.shapeErr("cannot reshape %v (%d elements) into %v", x.shape, total, shape)
	}
	return c.alias(0, x, shape)
}

// axesInput reads the optional constant axes input i (or the "axes"
// attribute, for older graphs) and normalises it for rank.
func (c *nodeCtx) axesInput(i, rank int) ([]int, bool, error) {
	var raw []int64
	switch {
	case c.has(i):
		v, err := c.constInts(i)
		if err != nil {
			return nil, false, err
		}
		raw = v
	default:
		v, ok := c.attrInts("axes")
		if !ok {
			return nil, false, nil
		}
		raw = v
	}
	out, err := c.normAxes(raw, rank)
	if err != nil {
		return nil, false, err
	}
	seen := map[int]bool{}
	for k, n := range out {
		if seen[n] {
			return nil, false, c.shapeErr("axis %d repeated in %v", raw[k], raw)
		}
		seen[n] = true
	}
	sort.Ints(out)
	return out, true, nil
}

// normAxes normalises axes for rank (see normAxis), keeping their order.
func (c *nodeCtx) normAxes(axes []int64, rank int) ([]int, error) {
	out := make([]int, 0, len(axes))
	for _, a := range axes {
		n, err := c.normAxis(a, rank)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// allAxes returns the axes 0, 1, ..., rank-1.
func allAxes(rank int) []int {
	out := make([]int, rank)
	for i := range out {
		out[i] = i
	}
	return out
}

func lowerSqueeze(c *nodeCtx) error {
	x := c.in[0]
	axes, given, err := c.axesInput(1, len(x.shape))
	if err != nil {
		return err
	}
	drop := map[int]bool{}
	if !given {
		for i, d := range x.shape {
			if d == 1 {
				drop[i] = true
			}
		}
	}
	for _, a := range axes {
		if x.shape[a] != 1 {
			return c.shapeErr("cannot squeeze axis %d of shape %v", a, x.shape)
		}
		drop[a] = true
	}
	var shape []int
	for i, d := range x.shape {
		if !drop[i] {
			shape = append(shape, d)
		}
	}
	return c.alias(0, x, shape)
}

func lowerUnsqueeze(c *nodeCtx) error {
	x := c.in[0]
	var n int
	if c.has(1) {
		v, err := c.constInts(1)
		if err != nil {
			return err
		}
		n = len(v)
	} else if v, ok := c.attrInts("axes"); ok {
		n = len(v)
	}
	axes, _, err := c.axesInput(1, len(x.shape)+n)
	if err != nil {
		return err
	}
	if len(axes) == 0 {
		return c.errf("Unsqueeze needs axes")
	}
	rank := len(x.shape) + len(axes)
	shape := make([]int, 0, rank)
	k := 0
	for i := 0; i < rank; i++ {
		if len(axes) > 0 && axes[0] == i {
			shape = append(shape, 1)
			axes = axes[1:]
			continue
		}
		shape = append(shape, x.shape[k])
		k++
	}
	return c.alias(0, x, shape)
}

func lowerTranspose(c *nodeCtx) error {
	x := c.in[0]
	r := len(x.shape)
	perm := make([]int, r)
	if p, ok := c.attrInts("perm"); ok {
		if len(p) != r {
			return c.shapeErr("perm %v for rank %d", p, r)
		}
		seen := make([]bool, r)
		for i, v := range p {
			if v < 0 || v >= int64(r) || seen[v] {
				return c.shapeErr("perm %v is not a permutation", p)
			}
			seen[v] = true
			perm[i] = int(v)
		}
	} else {
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	st := rt.ContiguousStrides(x.shape)
	shape, strides := make([]int, r), make([]int, r)
	for i, p := range perm {
		shape[i], strides[i] = x.shape[p], st[p]
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, shape, strides, 0), Y: c.ref(y)})
	return nil
}

func lowerConcat(c *nodeCtx) error {
	first := c.in[0]
	if first == nil {
		return c.errf("Concat inputs cannot be omitted")
	}
	r := len(first.shape)
	if r == 0 {
		return c.shapeErr("Concat of scalars")
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), r)
	if err != nil {
		return err
	}
	shape := append([]int{}, first.shape...)
	shape[axis] = 0
	for _, t := range c.in {
		if t == nil {
			return c.errf("Concat inputs cannot be omitted")
		}
		if t.dtype != first.dtype || len(t.shape) != r {
			return c.shapeErr("input %q %s%v does not match %s%v", t.name, t.dtype, t.shape, first.dtype, first.shape)
		}
		for d := range t.shape {
			if d != axis && t.shape[d] != first.shape[d] {
				return c.shapeErr("input %q has shape %v, want %v except on axis %d", t.name, t.shape, first.shape, axis)
			}
		}
		shape[axis] += t.shape[axis]
	}
	// Constant inputs only: concatenate at plan time (shape subgraphs).
	allConst := true
	for _, t := range c.in {
		allConst = allConst && t.value != nil
	}
	if allConst && prod(shape) <= 1<<16 {
		out, err := rt.NewTensor(first.dtype, shape...)
		if err != nil {
			return err
		}
		outer, inner := prod(shape[:axis]), prod(shape[axis+1:])
		es := first.dtype.Size()
		pos := 0
		for _, t := range c.in {
			rows := t.shape[axis] * inner * es
			for o := 0; o < outer; o++ {
				copy(out.Data[(o*shape[axis]*inner)*es+pos*inner*es:], t.value.Data[o*rows:(o+1)*rows])
			}
			pos += t.shape[axis]
		}
		return c.constant(0, out)
	}
	y, err := c.define(0, first.dtype, shape)
	if err != nil {
		return err
	}
	st := rt.ContiguousStrides(shape)
	pos := 0
	for _, t := range c.in {
		if prod(t.shape) > 0 {
			c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(t), Y: c.view(y, t.shape, st, pos*st[axis])})
		}
		pos += t.shape[axis]
	}
	return nil
}

func lowerSlice(c *nodeCtx) error {
	x := c.in[0]
	r := len(x.shape)
	starts, err := c.constInts(1)
	if err != nil {
		return err
	}
	ends, err := c.constInts(2)
	if err != nil {
		return err
	}
	if len(starts) != len(ends) {
		return c.shapeErr("starts %v and ends %v differ in length", starts, ends)
	}
	axes := make([]int64, len(starts))
	for i := range axes {
		axes[i] = int64(i)
	}
	if c.has(3) {
		if axes, err = c.constInts(3); err != nil {
			return err
		}
	}
	steps := make([]int64, len(starts))
	for i := range steps {
		steps[i] = 1
	}
	if c.has(4) {
		if steps, err = c.constInts(4); err != nil {
			return err
		}
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return c.shapeErr("starts, ends, axes and steps differ in length")
	}
	shape := append([]int{}, x.shape...)
	st := rt.ContiguousStrides(x.shape)
	strides := append([]int{}, st...)
	off := 0
	seen := map[int]bool{}
	for i := range starts {
		a, err := c.normAxis(axes[i], r)
		if err != nil {
			return err
		}
		if seen[a] {
			return c.shapeErr("axis %d repeated", axes[i])
		}
		seen[a] = true
		dim := int64(x.shape[a])
		step := steps[i]
		if step == 0 {
			return c.errf("slice step is zero")
		}
		s, e := starts[i], ends[i]
		if s < 0 {
			s += dim
		}
		if e < 0 {
			e += dim
		}
		var n int64
		if step > 0 {
			s, e = min(max(s, 0), dim), min(max(e, 0), dim)
			if e > s {
				n = (e - s + step - 1) / step
			}
		} else {
			s, e = min(max(s, 0), dim-1), min(max(e, -1), dim-1)
			if s > e {
				n = (s - e + (-step) - 1) / (-step)
			}
		}
		shape[a] = int(n)
		if n > 0 {
			off += int(s) * st[a]
		}
		strides[a] = st[a] * int(step)
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if x.value != nil && prod(shape) <= 1<<16 {
		return c.foldCopy(y, x, shape, strides, off)
	}
	if prod(shape) > 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, shape, strides, off), Y: c.ref(y)})
	}
	return nil
}

// foldCopy computes y = strided view of constant x at plan time.
func (c *nodeCtx) foldCopy(y, x *tensor, shape, strides []int, off int) error {
	out, err := rt.NewTensor(x.dtype, shape...)
	if err != nil {
		return err
	}
	es := x.dtype.Size()
	n := prod(shape)
	idx := make([]int, len(shape))
	for i := 0; i < n; i++ {
		src := off
		for d := range idx {
			src += idx[d] * strides[d]
		}
		copy(out.Data[i*es:(i+1)*es], x.value.Data[src*es:(src+1)*es])
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	y.value, y.where = out, inWeights
	return nil
}

func lowerGather(c *nodeCtx) error {
	x, idx := c.in[0], c.in[1]
	if idx.dtype != rt.I32 && idx.dtype != rt.I64 {
		return c.errf("indices have dtype %s, want i32 or i64", idx.dtype)
	}
	if len(x.shape) == 0 {
		return c.shapeErr("Gather from a scalar")
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), len(x.shape))
	if err != nil {
		return err
	}
	dim := x.shape[axis]
	if idx.value != nil {
		for _, v := range idx.value.Float64s() {
			if v < -float64(dim) || v >= float64(dim) {
				return c.shapeErr("index %v out of range for axis %d of size %d", v, axis, dim)
			}
		}
	}
	shape := append(append(append([]int{}, x.shape[:axis]...), idx.shape...), x.shape[axis+1:]...)
	if x.value != nil && idx.value != nil && prod(shape) <= 1<<16 {
		out, err := rt.NewTensor(x.dtype, shape...)
		if err != nil {
			return err
		}
		outer, inner := prod(x.shape[:axis]), prod(x.shape[axis+1:])
		es := x.dtype.Size()
		iv := idx.value.Float64s()
		for o := 0; o < outer; o++ {
			for j, v := range iv {
				k := int(v)
				if k < 0 {
					k += dim
				}
				copy(out.Data[((o*len(iv)+j)*inner)*es:((o*len(iv)+j+1)*inner)*es], x.value.Data[((o*dim+k)*inner)*es:((o*dim+k+1)*inner)*es])
			}
		}
		return c.constant(0, out)
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if prod(shape) > 0 {
		c.emit(&rt.Gather{X: c.ref(x), Idx: c.ref(idx), Y: c.ref(y), Outer: prod(x.shape[:axis]), Axis: dim, Inner: prod(x.shape[axis+1:])})
	}
	return nil
}

func lowerExpand(c *nodeCtx) error {
	x := c.in[0]
	dims, err := c.constInts(1)
	if err != nil {
		return err
	}
	target := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 || d > 1<<31 {
			return c.shapeErr("shape %v is invalid", dims)
		}
		target[i] = int(d)
	}
	shape, err := broadcastShapes(x.shape, target)
	if err != nil {
		return err
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if prod(shape) > 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.bcast(x, shape), Y: c.ref(y)})
	}
	return nil
}

func lowerTile(c *nodeCtx) error {
	x := c.in[0]
	reps, err := c.constInts(1)
	if err != nil {
		return err
	}
	r := len(x.shape)
	if len(reps) != r {
		return c.shapeErr("repeats %v for rank %d", reps, r)
	}
	shape := make([]int, r)
	for i := range shape {
		if reps[i] < 0 || reps[i] > 1<<31 {
			return c.shapeErr("repeats %v are invalid", reps)
		}
		n := rt.MulBytes(int64(x.shape[i]), reps[i])
		if n < 0 || n > rt.MaxTensorBytes {
			return c.shapeErr("repeats %v of shape %v are too large", reps, x.shape)
		}
		shape[i] = int(n)
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if prod(shape) == 0 {
		return nil
	}
	// Tile one axis at a time, each a rank-3 copy [pre, rep, d*post] with
	// the repeat as a zero stride, so that no view outgrows the devices'
	// rank limits.
	var axes []int
	for i := range reps {
		if reps[i] != 1 {
			axes = append(axes, i)
		}
	}
	if len(axes) == 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(x), Y: c.ref(y)})
		return nil
	}
	cur := x
	curShape := append([]int{}, x.shape...)
	for k, a := range axes {
		next := append([]int{}, curShape...)
		next[a] *= int(reps[a])
		dst := y
		if k < len(axes)-1 {
			dst = c.temp(x.dtype, next)
		}
		pre, inner := prod(curShape[:a]), prod(curShape[a:])
		rep := int(reps[a])
		c.emit(&rt.Unary{Fn: rt.Copy,
			X: c.view(cur, []int{pre, rep, inner}, []int{inner, 0, 1}, 0),
			Y: c.view(dst, []int{pre, rep, inner}, []int{rep * inner, inner, 1}, 0)})
		cur, curShape = dst, next
	}
	return nil
}

func lowerSplit(c *nodeCtx) error {
	x := c.in[0]
	if len(x.shape) == 0 {
		return c.shapeErr("Split of a scalar")
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), len(x.shape))
	if err != nil {
		return err
	}
	dim := x.shape[axis]
	var sizes []int
	if c.has(1) {
		v, err := c.constInts(1)
		if err != nil {
			return err
		}
		for _, s := range v {
			if s < 0 {
				return c.shapeErr("split sizes %v are invalid", v)
			}
			sizes = append(sizes, int(s))
		}
	} else {
		n := int(c.attrInt("num_outputs", int64(len(c.out))))
		if n < 1 {
			return c.errf("num_outputs %d is invalid", n)
		}
		chunk := (dim + n - 1) / n
		for i := 0; i < n; i++ {
			sizes = append(sizes, max(0, min(chunk, dim-i*chunk)))
		}
	}
	if len(sizes) != len(c.out) {
		return c.shapeErr("%d split sizes for %d outputs", len(sizes), len(c.out))
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != dim {
		return c.shapeErr("split sizes %v do not add up to %d", sizes, dim)
	}
	st := rt.ContiguousStrides(x.shape)
	pos := 0
	for i, s := range sizes {
		shape := append([]int{}, x.shape...)
		shape[axis] = s
		y, err := c.define(i, x.dtype, shape)
		if err != nil {
			return err
		}
		if prod(shape) > 0 {
			c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, shape, st, pos*st[axis]), Y: c.ref(y)})
		}
		pos += s
	}
	return nil
}

// reduceLayout returns the [outer, n, inner] view for reducing axes of x,
// emitting a transposing copy into a temporary when the axes are not one
// contiguous run.
func (c *nodeCtx) reduceLayout(x *tensor, axes []int) (src rt.Ref, outer, n, inner int) {
	run := true
	for i := 1; i < len(axes); i++ {
		if axes[i] != axes[i-1]+1 {
			run = false
		}
	}
	if run {
		a, b := axes[0], axes[len(axes)-1]
		return c.ref(x), prod(x.shape[:a]), prod(x.shape[a : b+1]), prod(x.shape[b+1:])
	}
	red := map[int]bool{}
	for _, a := range axes {
		red[a] = true
	}
	var perm []int
	for i := range x.shape {
		if !red[i] {
			perm = append(perm, i)
		}
	}
	perm = append(perm, axes...)
	st := rt.ContiguousStrides(x.shape)
	shape, strides := make([]int, len(perm)), make([]int, len(perm))
	for i, p := range perm {
		shape[i], strides[i] = x.shape[p], st[p]
	}
	t := c.temp(x.dtype, shape)
	c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, shape, strides, 0), Y: c.ref(t)})
	n = 1
	for _, a := range axes {
		n *= x.shape[a]
	}
	return c.ref(t), prod(x.shape) / max(n, 1), n, 1
}

func lowerReduce(c *nodeCtx, fn rt.ReduceFn) error {
	x := c.in[0]
	r := len(x.shape)
	axes, given, err := c.axesInput(1, r)
	if err != nil {
		return err
	}
	keep := c.attrInt("keepdims", 1) != 0
	if !given || len(axes) == 0 {
		if c.attrInt("noop_with_empty_axes", 0) != 0 {
			return c.alias(0, x, x.shape)
		}
		axes = make([]int, r)
		for i := range axes {
			axes[i] = i
		}
	}
	red := map[int]bool{}
	for _, a := range axes {
		red[a] = true
	}
	var shape []int
	for i, d := range x.shape {
		switch {
		case !red[i]:
			shape = append(shape, d)
		case keep:
			shape = append(shape, 1)
		}
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	if r == 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(x), Y: c.ref(y)})
		return nil
	}
	src, outer, n, inner := c.reduceLayout(x, axes)
	if prod(shape) == 0 {
		return nil
	}
	if n == 0 {
		// Reducing an empty axis gives the identity of the reduction.
		v := map[rt.ReduceFn]float64{rt.Prod: 1, rt.RMax: math.Inf(-1), rt.RMin: math.Inf(1), rt.LogSumExp: math.Inf(-1)}[fn]
		if x.dtype == rt.Bool {
			v = map[rt.ReduceFn]float64{rt.RMin: 1}[fn]
		} else if !x.dtype.IsFloat() && math.IsInf(v, 0) {
			return c.unsupported("%s of an empty %s axis", fn, x.dtype)
		}
		c.emit(&rt.Fill{Y: c.ref(y), Value: v})
		return nil
	}
	c.emit(&rt.Reduce{Fn: fn, X: src, Y: c.ref(y), Outer: outer, N: n, Inner: inner})
	return nil
}

func lowerArg(c *nodeCtx, fn rt.ReduceFn) error {
	x := c.in[0]
	if len(x.shape) == 0 {
		return c.shapeErr("%s of a scalar", fn)
	}
	axis, err := c.normAxis(c.attrInt("axis", 0), len(x.shape))
	if err != nil {
		return err
	}
	shape := append([]int{}, x.shape...)
	if c.attrInt("keepdims", 1) != 0 {
		shape[axis] = 1
	} else {
		shape = append(shape[:axis], shape[axis+1:]...)
	}
	y, err := c.define(0, rt.I64, shape)
	if err != nil {
		return err
	}
	if x.shape[axis] == 0 {
		return c.shapeErr("%s over an empty axis", fn)
	}
	o, n, i := split3(x.shape, axis)
	c.emit(&rt.Reduce{Fn: fn, X: c.ref(x), Y: c.ref(y), Outer: o, N: n, Inner: i, SelectLast: c.attrInt("select_last_index", 0) != 0})
	return nil
}
