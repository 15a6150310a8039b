package engine

import (
	"errors"
	"fmt"

	"github.com/vrun-go/vrun/rt"
)

// ErrUnsupportedFeature is wrapped when a supported op is used in a way the
// engine does not implement: an attribute value, an optional output or an
// input dtype. It tells such models apart from malformed ones.
var ErrUnsupportedFeature = errors.New("unsupported feature")

// unsupported returns an error wrapping ErrUnsupportedFeature.
func (c *nodeCtx) unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupportedFeature, fmt.Sprintf(format, args...))
}

// NotConstantError is returned when an input that the engine needs at plan
// time (a shape, axes, sizes, ...) is computed at run time or fed as a
// graph input. A caller that knows the value can bind the input as a
// constant (make it a weight) and plan again.
type NotConstantError struct {
	Input string // the tensor's name
	Index int    // the node input position
}

func (e *NotConstantError) Error() string {
	return fmt.Sprintf("input %d (%q) must be a constant known when the model is planned", e.Index, e.Input)
}

// needConst returns a *NotConstantError unless input i has a plan-time value.
func (c *nodeCtx) needConst(i int) error {
	if t := c.in[i]; t != nil && t.value == nil {
		return &NotConstantError{Input: t.name, Index: i}
	}
	return nil
}

// layerNormStats defines LayerNormalization's optional outputs 1 (Mean)
// and 2 (InvStdDev), shaped like X with the normalised dims set to 1.
func layerNormStats(c *nodeCtx, x *tensor, outer, n int, eps float64) error {
	if len(c.out) < 2 {
		return nil
	}
	shape := append([]int{}, x.shape...)
	for i, k := len(shape)-1, 1; i >= 0 && k < n; i-- {
		k *= shape[i]
		shape[i] = 1
	}
	mean := c.temp(x.dtype, []int{outer, 1})
	if m, err := c.define(1, x.dtype, shape); err != nil {
		return err
	} else if m != nil {
		mean = m
	}
	c.emit(&rt.Reduce{Fn: rt.Mean, X: c.ref(x), Y: c.ref(mean), Outer: outer, N: n, Inner: 1})
	inv, err := c.define(2, x.dtype, shape)
	if err != nil || inv == nil {
		return err
	}
	d := c.temp(x.dtype, []int{outer, n})
	c.emit(&rt.Binary{Fn: rt.Sub, A: c.view(x, []int{outer, n}, nil, 0), B: c.view(mean, []int{outer, n}, []int{1, 0}, 0), Y: c.ref(d)})
	c.emit(&rt.Reduce{Fn: rt.SumSquare, X: c.ref(d), Y: c.ref(inv), Outer: outer, N: n, Inner: 1})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / float64(n), Beta: eps, X: c.ref(inv), Y: c.ref(inv)})
	c.emit(&rt.Unary{Fn: rt.Rsqrt, X: c.ref(inv), Y: c.ref(inv)})
	return nil
}

// lowerBatchNormRuntime is inference-mode BatchNormalization with
// statistics computed at run time: a = scale/sqrt(var+eps), b = B - mean*a,
// y = x*a + b, with a and b per channel.
func lowerBatchNormRuntime(c *nodeCtx) error {
	x := c.in[0]
	ch := x.shape[1]
	bshape := make([]int, len(x.shape)-1)
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[0] = ch
	a, b := c.temp(x.dtype, bshape), c.temp(x.dtype, bshape)
	vec := func(t *tensor) rt.Ref { return c.view(t, []int{ch}, nil, 0) }
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1, Beta: c.attrFloat("epsilon", 1e-5), X: vec(c.in[4]), Y: vec(a)})
	c.emit(&rt.Unary{Fn: rt.Rsqrt, X: vec(a), Y: vec(a)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: vec(a), B: vec(c.in[1]), Y: vec(a)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: vec(a), B: vec(c.in[3]), Y: vec(b)})
	c.emit(&rt.Binary{Fn: rt.Sub, A: vec(c.in[2]), B: vec(b), Y: vec(b)})
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(x), B: c.bcast(a, x.shape), Y: c.ref(y)})
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(y), B: c.bcast(b, x.shape), Y: c.ref(y)})
	return nil
}
