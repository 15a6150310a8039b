package engine

import (
	"github.com/vrun-go/vrun/rt"
)

// Training-mode lowerings: what BatchNormalization and Dropout compute
// while a model trains. The backward pass differentiates the primitives
// they lower to, like any other op.

// lowerBatchNormTrain normalises with the batch statistics and updates
// the running statistics (inputs 3 and 4, mutable weights) in place:
// running = running*momentum + batch*(1-momentum), with the unbiased
// batch variance, as ONNX and PyTorch (whose momentum is 1 - ONNX's) do.
func lowerBatchNormTrain(c *nodeCtx) error {
	x, scale, bias, rmean, rvar := c.in[0], c.in[1], c.in[2], c.in[3], c.in[4]
	if len(c.out) > 1 {
		return c.unsupported("the running-statistics outputs of a training-mode BatchNormalization (the statistics are updated in place)")
	}
	n, ch, s := x.shape[0], x.shape[1], prod(x.shape[2:])
	cnt := n * s
	if cnt < 2 {
		return c.shapeErr("training-mode BatchNormalization needs more than one value per channel, input is %v", x.shape)
	}
	eps, mom := c.attrFloat("epsilon", 1e-5), c.attrFloat("momentum", 0.9)
	x3 := c.view(x, []int{n, ch, s}, nil, 0)
	perC := func(t *tensor) rt.Ref { return c.view(t, []int{n, ch, s}, []int{0, 1, 0}, 0) }
	vec := func(t *tensor) rt.Ref { return c.view(t, []int{ch}, nil, 0) }
	part := c.temp(x.dtype, []int{n, ch})
	mean := c.temp(x.dtype, []int{ch})
	c.emit(&rt.Reduce{Fn: rt.Sum, X: x3, Y: c.ref(part), Outer: n * ch, N: s, Inner: 1})
	c.emit(&rt.Reduce{Fn: rt.Sum, X: c.ref(part), Y: c.ref(mean), Outer: 1, N: n, Inner: ch})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / float64(cnt), X: c.ref(mean), Y: c.ref(mean)})
	xc := c.temp(x.dtype, []int{n, ch, s})
	c.emit(&rt.Binary{Fn: rt.Sub, A: x3, B: perC(mean), Y: c.ref(xc)})
	part2 := c.temp(x.dtype, []int{n, ch})
	vr := c.temp(x.dtype, []int{ch})
	c.emit(&rt.Reduce{Fn: rt.SumSquare, X: c.ref(xc), Y: c.ref(part2), Outer: n * ch, N: s, Inner: 1})
	c.emit(&rt.Reduce{Fn: rt.Sum, X: c.ref(part2), Y: c.ref(vr), Outer: 1, N: n, Inner: ch})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / float64(cnt), X: c.ref(vr), Y: c.ref(vr)})
	a := c.temp(x.dtype, []int{ch})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1, Beta: eps, X: c.ref(vr), Y: c.ref(a)})
	c.emit(&rt.Unary{Fn: rt.Rsqrt, X: c.ref(a), Y: c.ref(a)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(a), B: vec(scale), Y: c.ref(a)})
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	y3 := c.view(y, []int{n, ch, s}, nil, 0)
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(xc), B: perC(a), Y: y3})
	c.emit(&rt.Binary{Fn: rt.Add, A: y3, B: perC(bias), Y: y3})
	// Running statistics: only mutable weights can be updated.
	if rmean.init == nil || rvar.init == nil {
		return nil
	}
	upd := func(run *tensor, batch rt.Ref, unbias float64) {
		t := c.temp(x.dtype, []int{ch})
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: (1 - mom) * unbias, X: batch, Y: c.ref(t)})
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: mom, X: vec(run), Y: vec(run)})
		c.emit(&rt.Binary{Fn: rt.Add, A: vec(run), B: c.ref(t), Y: vec(run)})
	}
	upd(rmean, c.ref(mean), 1)
	upd(rvar, c.ref(vr), float64(cnt)/float64(cnt-1))
	return nil
}

// dropMask is a Dropout mask fed per training step: 0 or 1/(1-ratio).
type dropMask struct {
	t     *tensor
	ratio float64
}

// lowerDropoutTrain multiplies by a mask that the trainer draws for each
// step from its seeded generator.
func lowerDropoutTrain(c *nodeCtx) error {
	x := c.in[0]
	ratio := 0.5
	if c.has(1) {
		r, err := c.constFloat(1)
		if err != nil {
			return err
		}
		ratio = r
	}
	if c.has(2) {
		on, err := c.constFloat(2)
		if err != nil {
			return err
		}
		if on == 0 {
			return c.alias(0, x, x.shape)
		}
	}
	if ratio < 0 || ratio >= 1 {
		return c.errf("dropout ratio %g outside [0, 1)", ratio)
	}
	if len(c.out) > 1 && c.out[1] != nil {
		return c.unsupported("the mask output of a training-mode Dropout")
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	if ratio == 0 {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(x), Y: c.ref(y)})
		return nil
	}
	m := c.p.addTensor(&tensor{name: c.n.Name + ".mask", dtype: x.dtype, shape: append([]int{}, x.shape...),
		input: true, defined: true, lastUse: c.step})
	c.p.inputs = append(c.p.inputs, m)
	c.p.masks = append(c.p.masks, dropMask{t: m, ratio: ratio})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(x), B: c.ref(m), Y: c.ref(y)})
	return nil
}
