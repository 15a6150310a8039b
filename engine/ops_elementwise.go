package engine

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	unary := func(name string, fn rt.UnaryFn, alpha, beta func(c *nodeCtx) float64) {
		register(name, 1, 1, func(c *nodeCtx) error {
			var a, b float64
			if alpha != nil {
				a = alpha(c)
			}
			if beta != nil {
				b = beta(c)
			}
			return lowerUnary(c, fn, a, b)
		})
	}
	attr := func(name string, def float64) func(c *nodeCtx) float64 {
		return func(c *nodeCtx) float64 { return c.attrFloat(name, def) }
	}
	for name, fn := range map[string]rt.UnaryFn{
		"Relu": rt.Relu, "Sigmoid": rt.Sigmoid, "Tanh": rt.Tanh, "Exp": rt.Exp, "Log": rt.Log,
		"Sqrt": rt.Sqrt, "Neg": rt.Neg, "Abs": rt.Abs, "Silu": rt.Silu, "Mish": rt.Mish,
		"Softplus": rt.Softplus, "Softsign": rt.Softsign, "Reciprocal": rt.Reciprocal,
		"Floor": rt.Floor, "Ceil": rt.Ceil, "Round": rt.Round, "Sign": rt.Sign, "Sin": rt.Sin,
		"Cos": rt.Cos, "Erf": rt.Erf, "Not": rt.Not, "HardSwish": rt.HardSwish,
	} {
		unary(name, fn, nil, nil)
	}
	unary("LeakyRelu", rt.LeakyRelu, attr("alpha", 0.01), nil)
	unary("Elu", rt.Elu, attr("alpha", 1), nil)
	unary("Celu", rt.Celu, attr("alpha", 1), nil)
	unary("Selu", rt.Selu, attr("alpha", 1.67326319217681884765625), attr("gamma", 1.05070102214813232421875))
	unary("HardSigmoid", rt.HardSigmoid, attr("alpha", 0.2), attr("beta", 0.5))
	register("Gelu", 1, 1, func(c *nodeCtx) error {
		switch a := c.attrString("approximate", "none"); a {
		case "none":
			return lowerUnary(c, rt.Gelu, 0, 0)
		case "tanh":
			return lowerUnary(c, rt.GeluTanh, 0, 0)
		default:
			return c.errf("unknown approximate=%q", a)
		}
	})
	register("Identity", 1, 1, func(c *nodeCtx) error { return c.alias(0, c.in[0], c.in[0].shape) })
	register("Dropout", 1, 3, func(c *nodeCtx) error {
		if c.p.mode.train {
			return lowerDropoutTrain(c)
		}
		if err := c.alias(0, c.in[0], c.in[0].shape); err != nil {
			return err
		}
		if len(c.out) > 1 { // inference: the mask keeps everything
			m, err := c.define(1, rt.Bool, c.in[0].shape)
			if err != nil {
				return err
			}
			c.emit(&rt.Fill{Y: c.ref(m), Value: 1})
		}
		return nil
	})
	register("Clip", 1, 3, func(c *nodeCtx) error {
		lo, hi := math.Inf(-1), math.Inf(1)
		var err error
		if (c.has(1) && c.in[1].value == nil) || (c.has(2) && c.in[2].value == nil) {
			return lowerClipRuntime(c)
		}
		if c.has(1) {
			if lo, err = c.constFloat(1); err != nil {
				return err
			}
		}
		if c.has(2) {
			if hi, err = c.constFloat(2); err != nil {
				return err
			}
		}
		return lowerUnary(c, rt.Clip, lo, hi)
	})
	register("Cast", 1, 1, func(c *nodeCtx) error {
		dt, err := onnxDType(c.attrInt("to", 0))
		if err != nil {
			return err
		}
		return lowerCast(c, c.in[0], dt)
	})
	register("CastLike", 2, 2, func(c *nodeCtx) error {
		// Only input 1's dtype matters: a constant input 0 folds even when
		// input 1 is computed at run time.
		if x := c.in[0]; x.value != nil && (x.dtype.IsFloat() || c.in[1].dtype.IsFloat()) && x.value.Len() <= 1<<16 {
			return c.constant(0, rt.FromFloat64(c.in[1].dtype, x.value.Float64s(), x.shape...))
		}
		return lowerCast(c, c.in[0], c.in[1].dtype)
	})

	for name, fn := range map[string]rt.BinaryFn{
		"Add": rt.Add, "Sub": rt.Sub, "Mul": rt.Mul, "Div": rt.Div, "Pow": rt.Pow,
		"Equal": rt.Equal, "Less": rt.Less, "LessOrEqual": rt.LessEq,
		"Greater": rt.Greater, "GreaterOrEqual": rt.GreaterEq, "And": rt.And, "Or": rt.Or, "Xor": rt.Xor,
	} {
		fn := fn
		register(name, 2, 2, func(c *nodeCtx) error { return lowerBinary(c, fn, c.in[0], c.in[1], 0) })
	}
	register("PRelu", 2, 2, lowerPRelu)
	register("Mod", 2, 2, func(c *nodeCtx) error {
		fn := rt.Mod
		if c.attrInt("fmod", 0) != 0 {
			fn = rt.Fmod
		}
		return lowerBinary(c, fn, c.in[0], c.in[1], 0)
	})
	// Variadic Max, Min, Sum, Mean fold left.
	for name, fn := range map[string]rt.BinaryFn{"Max": rt.Max, "Min": rt.Min, "Sum": rt.Add, "Mean": rt.Add} {
		name, fn := name, fn
		register(name, 1, -1, func(c *nodeCtx) error { return lowerVariadic(c, name, fn) })
	}
	register("Where", 3, 3, func(c *nodeCtx) error {
		cond, a, b := c.in[0], c.in[1], c.in[2]
		if cond.dtype != rt.Bool {
			return c.errf("condition has dtype %s, want bool", cond.dtype)
		}
		if a.dtype != b.dtype {
			return c.shapeErr("X has dtype %s but Y has %s", a.dtype, b.dtype)
		}
		shape, err := broadcastShapes(cond.shape, a.shape, b.shape)
		if err != nil {
			return err
		}
		y, err := c.define(0, a.dtype, shape)
		if err != nil {
			return err
		}
		c.emit(&rt.Where{Cond: c.bcast(cond, shape), A: c.bcast(a, shape), B: c.bcast(b, shape), Y: c.ref(y)})
		return nil
	})
}

func lowerUnary(c *nodeCtx, fn rt.UnaryFn, alpha, beta float64) error {
	x := c.in[0]
	if fn == rt.Not && x.dtype != rt.Bool {
		return c.errf("Not needs bool input, got %s", x.dtype)
	}
	if x.act != nil && fn != rt.Not && c.canFuse(x) {
		// Fuse into the producing MatMul or Conv.
		*x.act = rt.Activation{Fn: fn, Alpha: alpha, Beta: beta}
		x.act = nil
		return c.alias(0, x, x.shape)
	}
	y, err := c.defineInplace(0, x.dtype, x.shape, x)
	if err != nil {
		return err
	}
	c.emit(&rt.Unary{Fn: fn, Alpha: alpha, Beta: beta, X: c.ref(x), Y: c.ref(y)})
	return nil
}

// lowerClipRuntime clips with bounds computed at run time: Max then Min
// against the broadcast scalar bounds.
func lowerClipRuntime(c *nodeCtx) error {
	x := c.in[0]
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	src := x
	for i, fn := range []rt.BinaryFn{rt.Max, rt.Min} {
		if !c.has(i + 1) {
			continue
		}
		bound := c.in[i+1]
		if bound.dtype != x.dtype || prod(bound.shape) != 1 {
			return c.shapeErr("bound %q must be a scalar of dtype %s, is %s%v", bound.name, x.dtype, bound.dtype, bound.shape)
		}
		c.emit(&rt.Binary{Fn: fn, A: c.ref(src), B: c.bcast(viewAs(bound, nil), x.shape), Y: c.ref(y)})
		src = y
	}
	return nil
}

func lowerCast(c *nodeCtx, x *tensor, dt rt.DType) error {
	if dt == x.dtype {
		return c.alias(0, x, x.shape)
	}
	y, err := c.define(0, dt, x.shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(x), Y: c.ref(y)})
	return nil
}

// lowerBinary emits out = fn(a, b) with broadcasting into output slot i.
func lowerBinary(c *nodeCtx, fn rt.BinaryFn, a, b *tensor, i int) error {
	if a.dtype != b.dtype {
		if fn != rt.Pow && fn != rt.PRelu {
			return c.shapeErr("operands have dtypes %s and %s", a.dtype, b.dtype)
		}
		// Pow with an integer exponent: cast the exponent.
		if !b.dtype.IsFloat() || !a.dtype.IsFloat() {
			t := c.temp(a.dtype, b.shape)
			c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(b), Y: c.ref(t)})
			b = t
		} else {
			return c.shapeErr("operands have dtypes %s and %s", a.dtype, b.dtype)
		}
	}
	if (fn.IsLogical()) && a.dtype != rt.Bool {
		return c.errf("%s needs bool operands, got %s", fn, a.dtype)
	}
	if fn == rt.Add && sameShape(a.shape, b.shape) {
		if foldResidual(c, a, b, i) || foldResidual(c, b, a, i) {
			return nil
		}
	}
	shape, err := broadcastShapes(a.shape, b.shape)
	if err != nil {
		return err
	}
	dt := a.dtype
	if fn.IsCompare() {
		dt = rt.Bool
	}
	var y *tensor
	switch {
	case sameShape(a.shape, shape):
		y, err = c.defineInplace(i, dt, shape, a)
	case sameShape(b.shape, shape):
		y, err = c.defineInplace(i, dt, shape, b)
	default:
		y, err = c.define(i, dt, shape)
	}
	if err != nil {
		return err
	}
	c.emit(&rt.Binary{Fn: fn, A: c.bcast(a, shape), B: c.bcast(b, shape), Y: c.ref(y)})
	return nil
}

// lowerPRelu lowers PRelu(X, slope). Older PyTorch exports write a
// per-channel slope as [C] for X [N, C, ...], which ONNX's unidirectional
// broadcasting would align with X's last dim; when such a slope does not
// broadcast as is (C differs from the last dim), it is taken as
// [C, 1, ..., 1], the per-channel slope PyTorch meant. A [C] slope that
// does broadcast (C equals the last dim) keeps ONNX's meaning.
func lowerPRelu(c *nodeCtx) error {
	x, slope := c.in[0], c.in[1]
	if len(slope.shape) == 1 && len(x.shape) >= 3 && slope.shape[0] == x.shape[1] {
		if _, err := broadcastShapes(x.shape, slope.shape); err != nil {
			shape := make([]int, len(x.shape)-1)
			for i := range shape {
				shape[i] = 1
			}
			shape[0] = slope.shape[0]
			slope = viewAs(slope, shape)
		}
	}
	return lowerBinary(c, rt.PRelu, x, slope, 0)
}

func lowerVariadic(c *nodeCtx, name string, fn rt.BinaryFn) error {
	for _, t := range c.in {
		if t == nil {
			return c.errf("%s inputs cannot be omitted", name)
		}
	}
	if len(c.in) == 1 {
		return c.alias(0, c.in[0], c.in[0].shape)
	}
	var shapes [][]int
	for _, t := range c.in {
		shapes = append(shapes, t.shape)
	}
	shape, err := broadcastShapes(shapes...)
	if err != nil {
		return err
	}
	dt := c.in[0].dtype
	for _, t := range c.in {
		if t.dtype != dt {
			return c.shapeErr("inputs have dtypes %s and %s", dt, t.dtype)
		}
	}
	y, err := c.define(0, dt, shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Binary{Fn: fn, A: c.bcast(c.in[0], shape), B: c.bcast(c.in[1], shape), Y: c.ref(y)})
	for _, t := range c.in[2:] {
		c.emit(&rt.Binary{Fn: fn, A: c.ref(y), B: c.bcast(t, shape), Y: c.ref(y)})
	}
	if name == "Mean" {
		if !dt.IsFloat() {
			return c.errf("Mean needs float inputs, got %s", dt)
		}
		c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / float64(len(c.in)), X: c.ref(y), Y: c.ref(y)})
	}
	return nil
}

// onnxDType maps an ONNX TensorProto.DataType code to a dtype.
func onnxDType(code int64) (rt.DType, error) {
	switch code {
	case 1:
		return rt.F32, nil
	case 2:
		return rt.U8, nil
	case 3:
		return rt.I8, nil
	case 6:
		return rt.I32, nil
	case 7:
		return rt.I64, nil
	case 9:
		return rt.Bool, nil
	case 10:
		return rt.F16, nil
	case 11:
		return rt.F64, nil
	}
	return 0, fmt.Errorf("%w: ONNX data type %d", ErrUnsupportedFeature, code)
}

// foldResidual folds out = x + r into the Conv that wrote x, as its
// residual (rt.Conv.Res: the shortcut Add of a ResNet or MobileNetV2
// block), and reports whether it did. It does when x comes straight from
// a Conv (its bias and BatchNormalization folded in, no activation yet)
// that only this node reads, r (of x's shape) was computed before that
// Conv ran, and the device runs a Conv with a residual (an inference plan
// that may fuse: not with Options.NoFusion). An activation node reading
// the sum can still fuse into the Conv (Act applies after Res); a
// BatchNormalization cannot (it would have to scale the residual too).
func foldResidual(c *nodeCtx, x, r *tensor, i int) bool {
	if x.conv == nil || x.act == nil || x.act.Fn != rt.Copy || x.conv.Res.Buf != nil || x.dtype != r.dtype {
		return false
	}
	if r.root == x.root || r.root.first >= x.root.first || !c.canFuse(x) {
		return false
	}
	trial := *x.conv
	trial.Res = c.ref(r)
	if !c.p.optional(&trial) {
		return false
	}
	if err := c.alias(i, x, x.shape); err != nil {
		return false
	}
	x.conv.Res = trial.Res
	c.out[i].act = x.act
	x.act, x.conv = nil, nil
	return true
}
