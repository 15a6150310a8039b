package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// errNoRule is wrapped when an op on a gradient path has no rule.
var errNoRule = errors.New("no gradient rule")

// vjp is the vector-Jacobian product of one forward op: it reads the
// gradient of the op's outputs and adds the contributions to its inputs'
// gradients.
type vjp struct {
	g    *gctx
	op   rt.Op // the forward op: its refs say where gradients go
	v    rt.Op // a copy whose refs say where saved values are read
	over bool  // the op overwrote earlier values: consume its output gradient
	pend []pending
}

type pending struct{ dst, src rt.Ref }

// vjp emits the gradient rule of op.
func (g *gctx) vjp(op rt.Op) error {
	v := g.vals[op]
	if v == nil {
		return nil // no output requires a gradient
	}
	_, outs := opIO(op)
	reached := false
	for _, r := range outs {
		if u := g.units[rootOf(r)]; u != nil && u.written {
			reached = true
		}
	}
	if !reached {
		return nil
	}
	x := &vjp{g: g, op: op, v: v, over: g.over[op]}
	if err := x.rule(); err != nil {
		return err
	}
	x.flush(outs)
	return nil
}

// dy returns the gradient of output ref r, seen like r.
func (x *vjp) dy(r rt.Ref) rt.Ref { return x.g.gradView(rootOf(r), r) }

// wants reports whether input ref r needs a gradient.
func (x *vjp) wants(r rt.Ref) bool {
	t := rootOf(r)
	return t != nil && r.DType.IsFloat() && x.g.req[t]
}

// add accumulates src (shaped like dst) into the gradient of input ref dst.
func (x *vjp) add(dst, src rt.Ref) {
	if !x.wants(dst) {
		return
	}
	if x.over {
		// The output gradient is zeroed before accumulating: contributions
		// that still read it are copied first.
		if t := rootOf(src); t != nil && x.readsOutputGrad(t) {
			src = x.g.un(rt.Copy, src, 0, 0)
		}
		x.pend = append(x.pend, pending{dst, src})
		return
	}
	x.g.accumulate(dst, src)
}

func (x *vjp) readsOutputGrad(t *tensor) bool {
	_, outs := opIO(x.op)
	for _, r := range outs {
		if u := x.g.units[rootOf(r)]; u != nil && u.root == t {
			return true
		}
	}
	return false
}

// flush consumes the output gradient of an overwriting op, then adds the
// pending contributions.
func (x *vjp) flush(outs []rt.Ref) {
	if !x.over {
		return
	}
	if _, scatter := x.op.(*rt.ScatterElements); !scatter {
		for _, r := range outs {
			x.g.emit(&rt.Fill{Y: x.dy(r)})
		}
	}
	for _, p := range x.pend {
		x.g.accumulate(p.dst, p.src)
	}
}

// target returns where to write a contribution of the given shape for
// input ref dst: the gradient storage itself when this is its first,
// complete write, else a scratch tensor; commit records or adds it.
func (x *vjp) target(dst rt.Ref, shape []int) (out rt.Ref, commit func()) {
	if !x.wants(dst) {
		return rt.Ref{}, nil
	}
	root := rootOf(dst)
	u := x.g.unit(root)
	if !x.over && !u.written {
		gd := x.g.gradView(root, dst)
		if covers(gd, u) {
			return reshaped(gd, shape...), func() { u.written = true }
		}
	}
	t := x.g.tmp(dst.DType, shape)
	return t, func() { x.add(dst, reshapeLike(t, dst)) }
}

// reshapeLike gives a contiguous ref the shape of dst when dst is a plain
// (non-broadcast) view of the same size.
func reshapeLike(src, dst rt.Ref) rt.Ref {
	if sameShape(src.Shape, dst.Shape) || !src.Contiguous() || src.Len() != dst.Len() {
		return src
	}
	return reshaped(src, dst.Shape...)
}

// covers reports whether gradient view r is exactly unit u, contiguous.
func covers(r rt.Ref, u *gunit) bool {
	return r.Off == u.off && r.Contiguous() && r.Len()*int64(r.DType.Size()) == u.bytes
}

// accumulate adds src into the gradient of forward ref dst, summing over
// dst's broadcast (zero-stride) dims.
func (g *gctx) accumulate(dst, src rt.Ref) {
	root := rootOf(dst)
	u := g.unit(root)
	gd := g.gradView(root, dst)
	gd.Shape = append([]int{}, gd.Shape...)
	st := append([]int{}, gd.StridesOrContiguous()...)
	src = reshapeLike(src, gd)
	for d := range gd.Shape {
		if gd.Shape[d] <= 1 || st[d] != 0 {
			continue
		}
		src = g.contiguous(src)
		ns := append([]int{}, src.Shape...)
		ns[d] = 1
		y := g.tmp(src.DType, ns)
		g.emit(&rt.Reduce{Fn: rt.Sum, X: g.use(src), Y: y, Outer: prod(src.Shape[:d]), N: src.Shape[d], Inner: prod(src.Shape[d+1:])})
		src = y
		gd.Shape[d] = 1
	}
	gd.Strides = st
	if src.DType != gd.DType {
		src = g.castTo(src, gd.DType)
	}
	if !u.written {
		u.written = true
		if covers(gd, u) {
			g.emit(&rt.Unary{Fn: rt.Copy, X: g.use(src), Y: gd})
			return
		}
		g.emit(&rt.Fill{Y: u.region()})
	}
	g.emit(&rt.Binary{Fn: rt.Add, A: gd, B: g.use(src), Y: gd})
}

func (g *gctx) castTo(r rt.Ref, dt rt.DType) rt.Ref {
	y := g.tmp(dt, r.Shape)
	g.emit(&rt.Unary{Fn: rt.Copy, X: g.use(r), Y: y})
	return y
}

// rule dispatches on the op type.
func (x *vjp) rule() error {
	switch o := x.op.(type) {
	case *rt.Unary:
		return x.unary(o, x.v.(*rt.Unary))
	case *rt.Binary:
		return x.binary(o, x.v.(*rt.Binary))
	case *rt.Where:
		g, v := x.g, x.v.(*rt.Where)
		dy := x.dy(o.Y)
		zero := g.scalar(0, dy.DType, dy.Shape)
		if x.wants(o.A) {
			x.add(o.A, g.where(v.Cond, dy, zero))
		}
		if x.wants(o.B) {
			x.add(o.B, g.where(v.Cond, zero, dy))
		}
		return nil
	case *rt.Reduce:
		return x.reduce(o, x.v.(*rt.Reduce))
	case *rt.Softmax:
		return x.softmax(o, x.v.(*rt.Softmax))
	case *rt.MatMul:
		return x.matmul(o, x.v.(*rt.MatMul))
	case *rt.Conv:
		return x.conv(o, x.v.(*rt.Conv))
	case *rt.ConvTranspose:
		return x.convTranspose(o, x.v.(*rt.ConvTranspose))
	case *rt.Pool:
		return x.pool(o, x.v.(*rt.Pool))
	case *rt.Normalize:
		return x.normalize(o, x.v.(*rt.Normalize))
	case *rt.Gather:
		v := x.v.(*rt.Gather)
		l := int(o.Idx.Len())
		x.scatterAdd(o.X, []int{o.Outer, o.Axis, o.Inner}, strided(v.Idx, []int{o.Outer, l, o.Inner}, []int{0, 1, 0}),
			reshaped(x.dy(o.Y), o.Outer, l, o.Inner))
		return nil
	case *rt.GatherElements:
		v := x.v.(*rt.GatherElements)
		x.scatterAdd(o.X, []int{o.Outer, o.Axis, o.Inner}, v.Idx, reshaped(x.dy(o.Y), o.Outer, o.N, o.Inner))
		return nil
	case *rt.ScatterElements:
		return x.scatter(o, x.v.(*rt.ScatterElements))
	case *rt.TopK:
		v := x.v.(*rt.TopK)
		x.scatterAdd(o.X, []int{o.Outer, o.N, o.Inner}, reshaped(v.Indices, o.Outer, o.K, o.Inner),
			reshaped(x.dy(o.Values), o.Outer, o.K, o.Inner))
		return nil
	case *rt.Fill:
		return nil
	}
	return fmt.Errorf("%w for %s", errNoRule, x.op.OpName())
}

// scatterAdd adds upd into the gradient of data ref dst (contiguous
// [outer, axis, inner]) at the indices idx ([outer, n, inner]).
//
// The index ops of gradient rules never report out-of-range indices
// (AllowOutOfRange): they reuse the indices of a forward op, which checks
// them itself when they come from the model, or indices the engine built.
func (x *vjp) scatterAdd(dst rt.Ref, shape []int, idx, upd rt.Ref) {
	if !x.wants(dst) {
		return
	}
	g := x.g
	t := g.tmp(dst.DType, shape)
	g.emit(&rt.Fill{Y: t})
	g.emit(&rt.ScatterElements{Fn: rt.ScatterAdd, Y: t, Idx: g.use(idx), Upd: g.use(g.contiguous(upd)),
		Outer: shape[0], Axis: shape[1], N: upd.Shape[1], Inner: shape[2], AllowOutOfRange: true})
	x.add(dst, reshapeLike(t, dst))
}

func (x *vjp) scatter(o, v *rt.ScatterElements) error {
	g := x.g
	dy := reshaped(x.dy(o.Y), o.Outer, o.Axis, o.Inner)
	switch o.Fn {
	case rt.ScatterSet, rt.ScatterAdd:
	default:
		return fmt.Errorf("%w for ScatterElements.%s", errNoRule, o.Fn)
	}
	if x.wants(o.Upd) {
		d := g.tmp(o.Upd.DType, []int{o.Outer, o.N, o.Inner})
		g.emit(&rt.GatherElements{X: dy, Idx: g.use(v.Idx), Y: d, Outer: o.Outer, Axis: o.Axis, N: o.N, Inner: o.Inner,
			AllowOutOfRange: true})
		x.add(o.Upd, d)
	}
	if o.Fn == rt.ScatterSet {
		// Overwritten elements pass no gradient to what was there before.
		g.emit(&rt.ScatterElements{Fn: rt.ScatterSet, Y: dy, Idx: g.use(v.Idx),
			Upd: g.scalar(0, dy.DType, []int{o.Outer, o.N, o.Inner}), Outer: o.Outer, Axis: o.Axis, N: o.N, Inner: o.Inner,
			AllowOutOfRange: true})
	}
	return nil
}

// unaryNeeds says whether a unary function's derivative reads x and y.
func unaryNeeds(fn rt.UnaryFn) (x, y bool) {
	switch fn {
	case rt.Copy, rt.Neg, rt.Affine, rt.Floor, rt.Ceil, rt.Round, rt.Sign, rt.Not:
		return false, false
	case rt.Relu, rt.Sigmoid, rt.Tanh, rt.Exp, rt.Sqrt, rt.Rsqrt, rt.Reciprocal:
		return false, true
	case rt.Elu, rt.Selu, rt.Clip:
		return true, true
	}
	return true, false
}

func (x *vjp) unary(o, v *rt.Unary) error {
	if !x.wants(o.X) {
		return nil
	}
	g := x.g
	dy := x.dy(o.Y)
	switch o.Fn {
	case rt.Copy:
		x.add(o.X, dy)
		return nil
	case rt.Neg:
		x.add(o.X, g.un(rt.Neg, dy, 0, 0))
		return nil
	case rt.Affine:
		x.add(o.X, g.un(rt.Affine, dy, o.Alpha, 0))
		return nil
	case rt.Floor, rt.Ceil, rt.Round, rt.Sign:
		return nil // zero almost everywhere
	case rt.Clip:
		x.add(o.X, g.where(g.bin(rt.Equal, v.X, v.Y), dy, g.scalar(0, dy.DType, dy.Shape)))
		return nil
	}
	d, err := x.derivative(o.Fn, v.X, v.Y, o.Alpha, o.Beta)
	if err != nil {
		return err
	}
	t, commit := x.target(o.X, dy.Shape)
	// d may be a saved forward value itself (Exp's Y): keep it alive.
	g.emit(&rt.Binary{Fn: rt.Mul, A: dy, B: g.use(d), Y: t})
	commit()
	return nil
}

// derivative returns f'(x) elementwise, shaped like x.
func (x *vjp) derivative(fn rt.UnaryFn, X, Y rt.Ref, alpha, beta float64) (rt.Ref, error) {
	g := x.g
	un := func(f rt.UnaryFn, r rt.Ref) rt.Ref { return g.un(f, r, 0, 0) }
	aff := func(r rt.Ref, a, b float64) rt.Ref { return g.un(rt.Affine, r, a, b) }
	mul := func(a, b rt.Ref) rt.Ref { return g.bin(rt.Mul, a, b) }
	c := func(v float64) rt.Ref { return g.scalar(v, X.DType, X.Shape) }
	gt0 := func() rt.Ref { return g.bin(rt.Greater, X, c(0)) }
	switch fn {
	case rt.Abs:
		return un(rt.Sign, X), nil
	case rt.Relu:
		return un(rt.Sign, Y), nil
	case rt.LeakyRelu:
		return g.where(gt0(), c(1), c(alpha)), nil
	case rt.Elu:
		return g.where(gt0(), c(1), aff(Y, 1, alpha)), nil
	case rt.Selu:
		return g.where(gt0(), c(beta), aff(Y, 1, alpha*beta)), nil
	case rt.Celu:
		return g.where(gt0(), c(1), un(rt.Exp, aff(X, 1/alpha, 0))), nil
	case rt.Sigmoid:
		return mul(Y, aff(Y, -1, 1)), nil
	case rt.HardSigmoid:
		z := aff(X, alpha, beta)
		in := g.bin(rt.And, g.bin(rt.Greater, z, c(0)), g.bin(rt.Less, z, c(1)))
		return g.where(in, c(alpha), c(0)), nil
	case rt.HardSwish:
		mid := g.where(g.bin(rt.LessEq, X, c(3)), aff(X, 1.0/3, 0.5), c(1))
		return g.where(g.bin(rt.Less, X, c(-3)), c(0), mid), nil
	case rt.Tanh:
		return aff(un(rt.Square, Y), -1, 1), nil
	case rt.Gelu:
		cdf := aff(un(rt.Erf, aff(X, 1/math.Sqrt2, 0)), 0.5, 0.5)
		pdf := aff(un(rt.Exp, aff(un(rt.Square, X), -0.5, 0)), 1/math.Sqrt(2*math.Pi), 0)
		return g.bin(rt.Add, cdf, mul(X, pdf)), nil
	case rt.GeluTanh:
		k, a := math.Sqrt(2/math.Pi), 0.044715
		x2 := un(rt.Square, X)
		t := un(rt.Tanh, aff(g.bin(rt.Add, X, aff(mul(x2, X), a, 0)), k, 0))
		left := aff(t, 0.5, 0.5)
		sech2 := aff(un(rt.Square, t), -1, 1)
		right := mul(mul(sech2, aff(x2, 3*a*k, k)), aff(X, 0.5, 0))
		return g.bin(rt.Add, left, right), nil
	case rt.Silu:
		s := un(rt.Sigmoid, X)
		return mul(s, aff(mul(X, aff(s, -1, 1)), 1, 1)), nil
	case rt.Mish:
		tsp := un(rt.Tanh, un(rt.Softplus, X))
		sech2 := aff(un(rt.Square, tsp), -1, 1)
		return g.bin(rt.Add, tsp, mul(mul(X, un(rt.Sigmoid, X)), sech2)), nil
	case rt.Softplus:
		return un(rt.Sigmoid, X), nil
	case rt.Softsign:
		return un(rt.Reciprocal, un(rt.Square, aff(un(rt.Abs, X), 1, 1))), nil
	case rt.Exp:
		return Y, nil
	case rt.Log:
		return un(rt.Reciprocal, X), nil
	case rt.Sqrt:
		return aff(un(rt.Reciprocal, Y), 0.5, 0), nil
	case rt.Rsqrt:
		return aff(mul(un(rt.Square, Y), Y), -0.5, 0), nil
	case rt.Reciprocal:
		return un(rt.Neg, un(rt.Square, Y)), nil
	case rt.Sin:
		return un(rt.Cos, X), nil
	case rt.Cos:
		return un(rt.Neg, un(rt.Sin, X)), nil
	case rt.Erf:
		return aff(un(rt.Exp, un(rt.Neg, un(rt.Square, X))), 2/math.Sqrt(math.Pi), 0), nil
	case rt.Square:
		return aff(X, 2, 0), nil
	}
	return rt.Ref{}, fmt.Errorf("%w for Unary.%s", errNoRule, fn)
}

func (x *vjp) binary(o, v *rt.Binary) error {
	g := x.g
	if !x.wants(o.A) && !x.wants(o.B) {
		return nil
	}
	dy := x.dy(o.Y)
	zero := func() rt.Ref { return g.scalar(0, dy.DType, dy.Shape) }
	switch o.Fn {
	case rt.Add:
		x.add(o.A, dy)
		x.add(o.B, dy)
	case rt.Sub:
		x.add(o.A, dy)
		if x.wants(o.B) {
			x.add(o.B, g.un(rt.Neg, dy, 0, 0))
		}
	case rt.Mul:
		if x.wants(o.A) {
			x.add(o.A, g.bin(rt.Mul, dy, v.B))
		}
		if x.wants(o.B) {
			x.add(o.B, g.bin(rt.Mul, dy, v.A))
		}
	case rt.Div:
		t := g.bin(rt.Div, dy, v.B)
		x.add(o.A, t)
		if x.wants(o.B) {
			x.add(o.B, g.un(rt.Neg, g.bin(rt.Mul, t, v.Y), 0, 0))
		}
	case rt.Pow:
		if x.wants(o.A) {
			pw := g.bin(rt.Pow, v.A, g.un(rt.Affine, v.B, 1, -1))
			x.add(o.A, g.bin(rt.Mul, g.bin(rt.Mul, dy, v.B), pw))
		}
		if x.wants(o.B) {
			x.add(o.B, g.bin(rt.Mul, g.bin(rt.Mul, dy, v.Y), g.un(rt.Log, v.A, 0, 0)))
		}
	case rt.Max, rt.Min:
		cmp := rt.Greater
		if o.Fn == rt.Min {
			cmp = rt.Less
		}
		m := g.bin(cmp, v.A, v.B)
		if x.wants(o.A) {
			x.add(o.A, g.where(m, dy, zero()))
		}
		if x.wants(o.B) {
			x.add(o.B, g.where(m, zero(), dy))
		}
	case rt.PRelu:
		pos := g.bin(rt.Greater, v.A, g.scalar(0, v.A.DType, v.A.Shape))
		if x.wants(o.A) {
			x.add(o.A, g.where(pos, dy, g.bin(rt.Mul, dy, v.B)))
		}
		if x.wants(o.B) {
			x.add(o.B, g.where(pos, zero(), g.bin(rt.Mul, dy, v.A)))
		}
	default:
		return fmt.Errorf("%w for Binary.%s", errNoRule, o.Fn)
	}
	return nil
}

func (x *vjp) reduce(o, v *rt.Reduce) error {
	if !x.wants(o.X) {
		return nil
	}
	g := x.g
	sh := []int{o.Outer, o.N, o.Inner}
	bst := []int{o.Inner, 0, 1}
	X3 := reshaped(o.X, sh...)
	dyB := strided(x.dy(o.Y), sh, bst)
	var vX, vY rt.Ref
	if v.X.Valid() {
		vX = reshaped(v.X, sh...)
	}
	if v.Y.Valid() {
		vY = strided(v.Y, sh, bst)
	}
	switch o.Fn {
	case rt.Sum:
		x.add(X3, dyB)
	case rt.Mean:
		x.add(X3, g.un(rt.Affine, dyB, 1/float64(o.N), 0))
	case rt.SumSquare:
		x.add(X3, g.bin(rt.Mul, dyB, g.un(rt.Affine, vX, 2, 0)))
	case rt.L1:
		x.add(X3, g.bin(rt.Mul, dyB, g.un(rt.Sign, vX, 0, 0)))
	case rt.L2:
		x.add(X3, g.bin(rt.Mul, dyB, g.bin(rt.Div, vX, vY)))
	case rt.LogSumExp:
		x.add(X3, g.bin(rt.Mul, dyB, g.un(rt.Exp, g.bin(rt.Sub, vX, vY), 0, 0)))
	case rt.Prod:
		x.add(X3, g.bin(rt.Mul, dyB, g.bin(rt.Div, vY, vX)))
	case rt.RMax, rt.RMin:
		x.add(X3, g.where(g.bin(rt.Equal, vX, vY), dyB, g.scalar(0, o.X.DType, sh)))
	default:
		return fmt.Errorf("%w for Reduce.%s", errNoRule, o.Fn)
	}
	return nil
}

// sumMiddle reduces contiguous r, seen as [outer, n, inner], over n and
// returns the result broadcast back to [outer, n, inner].
func (g *gctx) sumMiddle(r rt.Ref, outer, n, inner int, fn rt.ReduceFn) rt.Ref {
	s := g.tmp(r.DType, []int{outer, 1, inner})
	g.emit(&rt.Reduce{Fn: fn, X: g.use(g.contiguous(r)), Y: s, Outer: outer, N: n, Inner: inner})
	return strided(s, []int{outer, n, inner}, []int{inner, 0, 1})
}

func (x *vjp) softmax(o, v *rt.Softmax) error {
	if !x.wants(o.X) {
		return nil
	}
	g := x.g
	sh := []int{o.Outer, o.N, o.Inner}
	dy, y := reshaped(x.dy(o.Y), sh...), reshaped(v.Y, sh...)
	X3 := reshaped(o.X, sh...)
	if o.Log {
		s := g.sumMiddle(dy, o.Outer, o.N, o.Inner, rt.Sum)
		x.add(X3, g.bin(rt.Sub, dy, g.bin(rt.Mul, g.un(rt.Exp, y, 0, 0), s)))
		return nil
	}
	s := g.sumMiddle(g.bin(rt.Mul, dy, y), o.Outer, o.N, o.Inner, rt.Sum)
	t, commit := x.target(X3, sh)
	g.emit(&rt.Binary{Fn: rt.Mul, A: g.use(y), B: g.bin(rt.Sub, dy, s), Y: t})
	commit()
	return nil
}

// epilogue returns the gradient before a fused activation: dY * act'(y),
// computed from the op's output y (shape and strides of view).
func (x *vjp) epilogue(act rt.Activation, dy, y rt.Ref, shape, strides []int) (rt.Ref, error) {
	if act.Fn == rt.Copy {
		return dy, nil
	}
	g := x.g
	dy, y = strided(dy, shape, strides), strided(y, shape, strides)
	var d rt.Ref
	switch act.Fn {
	case rt.Relu:
		d = g.un(rt.Sign, y, 0, 0)
	case rt.Sigmoid:
		d = g.bin(rt.Mul, y, g.un(rt.Affine, y, -1, 1))
	case rt.Tanh:
		d = g.un(rt.Affine, g.un(rt.Square, y, 0, 0), -1, 1)
	default:
		return rt.Ref{}, fmt.Errorf("%w for a fused %s epilogue", errNoRule, act.Fn)
	}
	return g.bin(rt.Mul, dy, d), nil
}

func (x *vjp) matmul(o, v *rt.MatMul) error {
	g := x.g
	b, m, n, k := o.Batch, o.M, o.N, o.K
	G, err := x.epilogue(o.Act, x.dy(o.Y), v.Y, []int{b, m, n}, []int{o.StrideY, n, 1})
	if err != nil {
		return err
	}
	sy := o.StrideY
	if o.Act.Fn != rt.Copy {
		sy = m * n
	}
	if x.wants(o.A) {
		rows, cols := m, k
		if o.TransA {
			rows, cols = k, m
		}
		dst := strided(o.A, []int{b, rows, cols}, []int{o.StrideA, cols, 1})
		t, commit := x.target(dst, []int{b, rows, cols})
		mm := &rt.MatMul{Y: t, Batch: b, StrideY: rows * cols, Alpha: o.Alpha}
		if !o.TransA { // dA = G op(B)^T
			mm.A, mm.B, mm.TransB = G, g.use(v.B), !o.TransB
			mm.M, mm.N, mm.K, mm.StrideA, mm.StrideB = m, k, n, sy, o.StrideB
		} else { // dA = op(B) G^T
			mm.A, mm.TransA, mm.B, mm.TransB = g.use(v.B), o.TransB, G, true
			mm.M, mm.N, mm.K, mm.StrideA, mm.StrideB = k, m, n, o.StrideB, sy
		}
		g.emit(mm)
		commit()
	}
	if x.wants(o.B) {
		rows, cols := k, n
		if o.TransB {
			rows, cols = n, k
		}
		dst := strided(o.B, []int{b, rows, cols}, []int{o.StrideB, cols, 1})
		bb := b
		if o.StrideB == 0 && b > 1 && !o.TransA && o.StrideA == m*k && sy == m*n {
			// A shared B (a Linear layer over a batch): one GEMM over the
			// stacked rows instead of a GEMM per batch and a sum.
			bb, m = 1, b*m
			dst = strided(o.B, []int{1, rows, cols}, []int{0, cols, 1})
		}
		t, commit := x.target(dst, []int{bb, rows, cols})
		mm := &rt.MatMul{Y: t, Batch: bb, StrideY: rows * cols, Alpha: o.Alpha}
		if !o.TransB { // dB = op(A)^T G
			mm.A, mm.TransA, mm.B = g.use(v.A), !o.TransA, G
			mm.M, mm.N, mm.K, mm.StrideA, mm.StrideB = k, n, m, o.StrideA, sy
		} else { // dB = G^T op(A)
			mm.A, mm.TransA, mm.B, mm.TransB = G, true, g.use(v.A), o.TransA
			mm.M, mm.N, mm.K, mm.StrideA, mm.StrideB = n, k, m, sy, o.StrideA
		}
		g.emit(mm)
		commit()
		m = o.M
	}
	if o.Bias.Valid() && x.wants(o.Bias) && o.Beta != 0 {
		bst := o.Bias.StridesOrContiguous()
		dst := strided(o.Bias, []int{b, m, n}, []int{0, bst[0], bst[1]})
		src := strided(G, []int{b, m, n}, []int{sy, n, 1})
		if o.Beta != 1 {
			src = g.un(rt.Affine, src, o.Beta, 0)
		}
		x.add(dst, src)
	}
	return nil
}

func (x *vjp) conv(o, v *rt.Conv) error {
	g := x.g
	sh := []int{o.N, o.K, o.OH, o.OW}
	G, err := x.epilogue(o.Act, reshaped(x.dy(o.Y), sh...), reshaped(v.Y, sh...), sh, rt.ContiguousStrides(sh))
	if err != nil {
		return err
	}
	if x.wants(o.X) {
		t, commit := x.target(o.X, []int{o.N, o.C, o.H, o.Width})
		g.emit(&rt.ConvTranspose{X: G, W: g.use(v.W), Y: t, N: o.N, C: o.K, H: o.OH, Width: o.OW,
			K: o.C, OH: o.H, OW: o.Width, KH: o.KH, KW: o.KW, StrideH: o.StrideH, StrideW: o.StrideW,
			PadT: o.PadT, PadL: o.PadL, DilH: o.DilH, DilW: o.DilW, Groups: o.Groups})
		commit()
	}
	if x.wants(o.W) {
		x.convWeightGrad(o, v.X, G, o.W)
	}
	if o.Bias.Valid() && x.wants(o.Bias) {
		ohw := o.OH * o.OW
		x.add(strided(o.Bias, []int{o.N, o.K, ohw}, []int{0, 1, 0}), reshaped(G, o.N, o.K, ohw))
	}
	return nil
}

// convWeightGrad adds the weight gradient of convolution o, given its
// input values xv and output gradient G, into the gradient of w: a
// convolution in which the batch becomes the reduction channels and the
// output gradient the kernel, with stride and dilation swapped.
func (x *vjp) convWeightGrad(o *rt.Conv, xv, G, w rt.Ref) {
	g := x.g
	gr, cg := o.Groups, o.C/o.Groups
	hw := o.H * o.Width
	xs := g.contiguous(strided(xv, []int{cg, gr, o.N, o.H, o.Width}, []int{hw, cg * hw, o.C * hw, o.Width, 1}))
	ohw := o.OH * o.OW
	ws := g.contiguous(strided(G, []int{o.K, o.N, o.OH, o.OW}, []int{ohw, o.K * ohw, o.OW, 1}))
	y := g.tmp(w.DType, []int{cg, o.K, o.KH, o.KW})
	g.emit(&rt.Conv{X: reshaped(xs, cg, gr*o.N, o.H, o.Width), W: ws, Y: y, N: cg, C: gr * o.N,
		H: o.H, Width: o.Width, K: o.K, OH: o.KH, OW: o.KW, KH: o.OH, KW: o.OW,
		StrideH: o.DilH, StrideW: o.DilW, PadT: o.PadT, PadL: o.PadL, DilH: o.StrideH, DilW: o.StrideW, Groups: gr})
	khw := o.KH * o.KW
	x.add(strided(w, []int{cg, o.K, o.KH, o.KW}, []int{khw, cg * khw, o.KW, 1}), y)
}

// convTranspose differentiates Y = ConvTranspose(X, W): the input
// gradient is the forward convolution of dY, and the weight gradient is
// that of the convolution dY -> X.
func (x *vjp) convTranspose(o, v *rt.ConvTranspose) error {
	g := x.g
	G := reshaped(x.dy(o.Y), o.N, o.K, o.OH, o.OW)
	if x.wants(o.X) {
		t, commit := x.target(o.X, []int{o.N, o.C, o.H, o.Width})
		g.emit(&rt.Conv{X: G, W: v.W, Y: t, N: o.N, C: o.K, H: o.OH, Width: o.OW, K: o.C, OH: o.H, OW: o.Width,
			KH: o.KH, KW: o.KW, StrideH: o.StrideH, StrideW: o.StrideW, PadT: o.PadT, PadL: o.PadL,
			DilH: o.DilH, DilW: o.DilW, Groups: o.Groups})
		commit()
	}
	if x.wants(o.W) {
		c := &rt.Conv{N: o.N, C: o.K, H: o.OH, Width: o.OW, K: o.C, OH: o.H, OW: o.Width, KH: o.KH, KW: o.KW,
			StrideH: o.StrideH, StrideW: o.StrideW, PadT: o.PadT, PadL: o.PadL, DilH: o.DilH, DilW: o.DilW, Groups: o.Groups}
		x.convWeightGrad(c, G, reshaped(v.X, o.N, o.C, o.H, o.Width), o.W)
	}
	if o.Bias.Valid() && x.wants(o.Bias) {
		ohw := o.OH * o.OW
		x.add(strided(o.Bias, []int{o.N, o.K, ohw}, []int{0, 1, 0}), reshaped(G, o.N, o.K, ohw))
	}
	return nil
}

func (x *vjp) pool(o, v *rt.Pool) error {
	if !x.wants(o.X) {
		return nil
	}
	g := x.g
	G := reshaped(x.dy(o.Y), o.NC, o.OH, o.OW)
	switch o.Fn {
	case rt.AvgPool:
		// Divide by each window's count, then spread with a transposed
		// convolution by a kernel of ones.
		cnt := make([]float64, o.OH*o.OW)
		for oh := 0; oh < o.OH; oh++ {
			for ow := 0; ow < o.OW; ow++ {
				cnt[oh*o.OW+ow] = float64(poolCount(o, oh, ow))
			}
		}
		ct := g.constTensor(rt.FromFloat64(o.X.DType, cnt, o.OH, o.OW))
		gs := g.bin(rt.Div, G, strided(ct, []int{o.NC, o.OH, o.OW}, []int{0, o.OW, 1}))
		ones := make([]float64, o.KH*o.KW)
		for i := range ones {
			ones[i] = 1
		}
		w := g.constTensor(rt.FromFloat64(o.X.DType, ones, 1, 1, o.KH, o.KW))
		t, commit := x.target(o.X, []int{o.NC, 1, o.H, o.W})
		g.emit(&rt.ConvTranspose{X: reshaped(gs, o.NC, 1, o.OH, o.OW), W: w, Y: t, N: o.NC, C: 1, H: o.OH, Width: o.OW,
			K: 1, OH: o.H, OW: o.W, KH: o.KH, KW: o.KW, StrideH: o.StrideH, StrideW: o.StrideW,
			PadT: o.PadT, PadL: o.PadL, DilH: o.DilH, DilW: o.DilW, Groups: 1})
		commit()
		return nil
	case rt.MaxPool:
		return x.maxPool(o, v, G)
	}
	return fmt.Errorf("%w for Pool.%s", errNoRule, o.Fn)
}

// poolCount is the divisor of an average-pooling window.
func poolCount(o *rt.Pool, oh, ow int) int {
	n := 0
	for kh := 0; kh < o.KH; kh++ {
		ih := oh*o.StrideH - o.PadT + kh*o.DilH
		for kw := 0; kw < o.KW; kw++ {
			iw := ow*o.StrideW - o.PadL + kw*o.DilW
			if o.CountIncludePad {
				if ih < o.H+o.PadB && iw < o.W+o.PadR {
					n++
				}
			} else if ih >= 0 && ih < o.H && iw >= 0 && iw < o.W {
				n++
			}
		}
	}
	return max(n, 1)
}

// maxPool routes the gradient to each window's first maximum: the windows
// are gathered from a -inf padded copy of X, TopK finds the argmax, and a
// scatter-add sends the gradient there.
func (x *vjp) maxPool(o, v *rt.Pool, G rt.Ref) error {
	g := x.g
	hp := max(o.PadT+o.H, (o.OH-1)*o.StrideH+(o.KH-1)*o.DilH+1)
	wp := max(o.PadL+o.W, (o.OW-1)*o.StrideW+(o.KW-1)*o.DilW+1)
	kk, ohw := o.KH*o.KW, o.OH*o.OW
	l := ohw * kk
	xp := g.tmp(o.X.DType, []int{o.NC, hp * wp})
	g.emit(&rt.Fill{Y: xp, Value: math.Inf(-1)})
	in := strided(xp, []int{o.NC, o.H, o.W}, []int{hp * wp, wp, 1})
	in.Off += int64((o.PadT*wp + o.PadL) * o.X.DType.Size())
	g.emit(&rt.Unary{Fn: rt.Copy, X: g.use(reshaped(v.X, o.NC, o.H, o.W)), Y: in})
	pidx := make([]float64, l)   // window element -> padded position
	flat := make([]float64, l)   // window element -> input position
	base := make([]float64, ohw) // first window element of each output
	for oh := 0; oh < o.OH; oh++ {
		for ow := 0; ow < o.OW; ow++ {
			base[oh*o.OW+ow] = float64((oh*o.OW + ow) * kk)
			for kh := 0; kh < o.KH; kh++ {
				for kw := 0; kw < o.KW; kw++ {
					i := (oh*o.OW+ow)*kk + kh*o.KW + kw
					ph, pw := oh*o.StrideH+kh*o.DilH, ow*o.StrideW+kw*o.DilW
					pidx[i] = float64(ph*wp + pw)
					if ih, iw := ph-o.PadT, pw-o.PadL; ih >= 0 && ih < o.H && iw >= 0 && iw < o.W {
						flat[i] = float64(ih*o.W + iw)
					}
				}
			}
		}
	}
	pi := g.constTensor(rt.FromFloat64(rt.I64, pidx, l))
	win := g.tmp(o.X.DType, []int{o.NC, l, 1})
	g.emit(&rt.GatherElements{X: xp, Idx: strided(pi, []int{o.NC, l, 1}, []int{0, 1, 0}), Y: win,
		Outer: o.NC, Axis: hp * wp, N: l, Inner: 1, AllowOutOfRange: true})
	vals := g.tmp(o.X.DType, []int{o.NC * ohw, 1, 1})
	am := g.tmp(rt.I64, []int{o.NC * ohw, 1, 1})
	g.emit(&rt.TopK{X: win, Values: vals, Indices: am, Outer: o.NC * ohw, N: kk, Inner: 1, K: 1, Largest: true})
	bt := g.constTensor(rt.FromFloat64(rt.I64, base, ohw))
	pos := g.bin(rt.Add, reshaped(am, o.NC, ohw), strided(bt, []int{o.NC, ohw}, []int{0, 1}))
	ft := g.constTensor(rt.FromFloat64(rt.I64, flat, l))
	q := g.tmp(rt.I64, []int{1, o.NC * ohw, 1})
	g.emit(&rt.GatherElements{X: ft, Idx: reshaped(pos, 1, o.NC*ohw, 1), Y: q, Outer: 1, Axis: l, N: o.NC * ohw, Inner: 1,
		AllowOutOfRange: true})
	x.scatterAdd(reshaped(o.X, o.NC, o.H*o.W, 1), []int{o.NC, o.H * o.W, 1}, reshaped(q, o.NC, ohw, 1), reshaped(G, o.NC, ohw, 1))
	return nil
}

// constTensor adds a plan-time constant and returns a contiguous ref.
func (g *gctx) constTensor(v *rt.Tensor) rt.Ref {
	t := g.p.addTensor(&tensor{name: fmt.Sprintf("%s.const%d", g.node.Name, len(g.p.tensors)), dtype: v.DType,
		shape: v.Shape, value: v, where: inWeights, defined: true})
	return g.p.ref(t)
}

func (x *vjp) normalize(o, v *rt.Normalize) error {
	g := x.g
	on, n := o.Outer, o.N
	sh := []int{on, n, 1}
	X3 := reshaped(o.X, sh...)
	G := reshaped(x.dy(o.Y), sh...)
	vx := reshaped(v.X, sh...)
	mean := g.sumMiddle(vx, on, n, 1, rt.Mean)
	xc := g.bin(rt.Sub, vx, mean)
	vr := g.tmp(o.X.DType, []int{on, 1, 1})
	g.emit(&rt.Reduce{Fn: rt.SumSquare, X: xc, Y: vr, Outer: on, N: n, Inner: 1})
	rstd := g.un(rt.Rsqrt, g.un(rt.Affine, vr, 1/float64(n), o.Eps), 0, 0)
	rstdB := strided(rstd, sh, []int{1, 0, 1})
	xhat := g.bin(rt.Mul, xc, rstdB)
	row := []int{0, 1, 0}
	if o.Bias.Valid() && x.wants(o.Bias) {
		x.add(strided(o.Bias, sh, row), G)
	}
	if o.Scale.Valid() && x.wants(o.Scale) {
		x.add(strided(o.Scale, sh, row), g.bin(rt.Mul, G, xhat))
	}
	if !x.wants(o.X) {
		return nil
	}
	gx := G
	if o.Scale.Valid() {
		gx = g.bin(rt.Mul, G, strided(v.Scale, sh, row))
	}
	m1 := g.sumMiddle(gx, on, n, 1, rt.Mean)
	m2 := g.sumMiddle(g.bin(rt.Mul, gx, xhat), on, n, 1, rt.Mean)
	d := g.bin(rt.Sub, g.bin(rt.Sub, gx, m1), g.bin(rt.Mul, xhat, m2))
	t, commit := x.target(X3, sh)
	g.emit(&rt.Binary{Fn: rt.Mul, A: d, B: rstdB, Y: t})
	commit()
	return nil
}
