package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

// ONNX operators composed from the core primitives: padding,
// normalisations, space/depth rearrangements, small activations, window
// constants, LRN and ConvTranspose.

func init() {
	register("Pad", 2, 4, lowerPad)
	register("RMSNormalization", 2, 2, lowerRMSNorm)
	register("GroupNormalization", 3, 3, lowerGroupNorm)
	register("LpNormalization", 1, 1, lowerLpNorm)
	register("DepthToSpace", 1, 1, func(c *nodeCtx) error { return lowerSpaceDepth(c, true) })
	register("SpaceToDepth", 1, 1, func(c *nodeCtx) error { return lowerSpaceDepth(c, false) })
	register("Swish", 1, 1, lowerSwish)
	register("ThresholdedRelu", 1, 1, lowerThresholdedRelu)
	register("Shrink", 1, 1, lowerShrink)
	register("IsNaN", 1, 1, lowerIsNaN)
	register("IsInf", 1, 1, lowerIsInf)
	register("EyeLike", 1, 1, lowerEyeLike)
	register("Tan", 1, 1, func(c *nodeCtx) error { return lowerHyper(c, "tan") })
	register("Sinh", 1, 1, func(c *nodeCtx) error { return lowerHyper(c, "sinh") })
	register("Cosh", 1, 1, func(c *nodeCtx) error { return lowerHyper(c, "cosh") })
	register("HannWindow", 1, 1, func(c *nodeCtx) error { return lowerWindow(c, []float64{0.5, 0.5}) })
	register("HammingWindow", 1, 1, func(c *nodeCtx) error { return lowerWindow(c, []float64{25.0 / 46, 21.0 / 46}) })
	register("BlackmanWindow", 1, 1, func(c *nodeCtx) error { return lowerWindow(c, []float64{0.42, 0.5, 0.08}) })
	register("LRN", 1, 1, lowerLRN)
	register("ConvTranspose", 2, 3, lowerConvTranspose)
}

func lowerPad(c *nodeCtx) error {
	x := c.in[0]
	r := len(x.shape)
	pads, err := c.constInts(1)
	if err != nil {
		return err
	}
	axes := allAxes(r)
	if c.has(3) {
		av, err := c.constInts(3)
		if err != nil {
			return err
		}
		if axes, err = c.normAxes(av, r); err != nil {
			return err
		}
	}
	if len(pads) != 2*len(axes) {
		return c.shapeErr("pads %v for %d axes", pads, len(axes))
	}
	begin, end := make([]int, r), make([]int, r)
	for i, a := range axes {
		begin[a], end[a] = int(pads[i]), int(pads[len(axes)+i])
	}
	shape := make([]int, r)
	for d := range shape {
		shape[d] = x.shape[d] + begin[d] + end[d]
		if shape[d] < 0 {
			return c.shapeErr("pads %v crop more than shape %v", pads, x.shape)
		}
	}
	mode := c.attrString("mode", "constant")
	value := 0.0
	if c.has(2) {
		if value, err = c.constFloat(2); err != nil {
			return err
		}
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil || prod(shape) == 0 {
		return err
	}
	if mode == "constant" || prod(x.shape) == 0 {
		c.emit(&rt.Fill{Y: c.ref(y), Value: value})
		st, yst := rt.ContiguousStrides(x.shape), rt.ContiguousStrides(shape)
		inner := make([]int, r)
		xoff, yoff := 0, 0
		for d := range shape {
			lo, hi := max(0, -begin[d]), x.shape[d]-max(0, -end[d])
			inner[d] = max(0, hi-lo)
			xoff += lo * st[d]
			yoff += max(0, begin[d]) * yst[d]
		}
		if prod(inner) > 0 {
			c.copyInto(c.view(y, inner, yst, yoff), c.view(x, inner, st, xoff))
		}
		return nil
	}
	if prod(shape) > 1<<24 {
		return c.unsupported("Pad mode %s with %d output elements", mode, prod(shape))
	}
	// The other modes read x[map(o)]: one Gather through a constant flat
	// index per output element.
	maps := make([][]int64, r)
	for d := range shape {
		n := x.shape[d]
		maps[d] = make([]int64, shape[d])
		for o := range maps[d] {
			p := o - begin[d]
			switch mode {
			case "edge":
				p = min(max(p, 0), n-1)
			case "wrap":
				p = ((p % n) + n) % n
			case "reflect":
				for n > 1 && (p < 0 || p >= n) {
					if p < 0 {
						p = -p
					} else {
						p = 2*(n-1) - p
					}
				}
				if n == 1 {
					p = 0
				}
			default:
				return c.errf("unknown mode %q", mode)
			}
			maps[d][o] = int64(p)
		}
	}
	st := rt.ContiguousStrides(x.shape)
	idx := make([]int64, prod(shape))
	pos := make([]int, r)
	for i := range idx {
		var f int64
		for d := range pos {
			f += maps[d][pos[d]] * int64(st[d])
		}
		idx[i] = f
		for d := r - 1; d >= 0; d-- {
			if pos[d]++; pos[d] < shape[d] {
				break
			}
			pos[d] = 0
		}
	}
	it := c.i64Const(idx, len(idx))
	c.emit(&rt.Gather{X: c.v3(x, 1, prod(x.shape), 1), Idx: c.ref(it), Y: c.ref(y), Outer: 1, Axis: prod(x.shape), Inner: 1,
		AllowOutOfRange: true})
	return nil
}

func lowerRMSNorm(c *nodeCtx) error {
	x, scale := c.in[0], c.in[1]
	if err := needFloat(c, x, scale); err != nil {
		return err
	}
	if len(x.shape) == 0 {
		return c.shapeErr("RMSNormalization input must have rank >= 1")
	}
	axis, err := c.normAxis(c.attrInt("axis", -1), len(x.shape))
	if err != nil {
		return err
	}
	if _, err := broadcastShapes(scale.shape, x.shape[axis:]); err != nil || len(scale.shape) > len(x.shape)-axis {
		return c.shapeErr("scale %v does not broadcast to %v", scale.shape, x.shape[axis:])
	}
	outer, n := prod(x.shape[:axis]), prod(x.shape[axis:])
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || outer*n == 0 {
		return err
	}
	rs := c.temp(x.dtype, []int{outer, 1})
	c.emit(&rt.Reduce{Fn: rt.SumSquare, X: c.ref(x), Y: c.ref(rs), Outer: outer, N: n, Inner: 1})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1 / float64(n), Beta: c.attrFloat("epsilon", 1e-5), X: c.ref(rs), Y: c.ref(rs)})
	c.emit(&rt.Unary{Fn: rt.Rsqrt, X: c.ref(rs), Y: c.ref(rs)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.view(x, []int{outer, n}, nil, 0), B: c.view(rs, []int{outer, n}, []int{1, 0}, 0), Y: c.view(y, []int{outer, n}, nil, 0)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(y), B: c.bcast(scale, x.shape), Y: c.ref(y)})
	return nil
}

func lowerGroupNorm(c *nodeCtx) error {
	x, scale, bias := c.in[0], c.in[1], c.in[2]
	if err := needFloat(c, x, scale, bias); err != nil {
		return err
	}
	if len(x.shape) < 3 {
		return c.shapeErr("GroupNormalization input must have rank >= 3, got %v", x.shape)
	}
	ch := x.shape[1]
	g := int(c.attrInt("num_groups", 0))
	if g < 1 || ch%g != 0 || prod(scale.shape) != ch || prod(bias.shape) != ch {
		return c.shapeErr("num_groups %d, channels %d, scale %v, bias %v", g, ch, scale.shape, bias.shape)
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || prod(x.shape) == 0 {
		return err
	}
	c.emit(&rt.Normalize{X: c.ref(x), Y: c.ref(y), Outer: x.shape[0] * g, N: ch / g * prod(x.shape[2:]), Eps: c.attrFloat("epsilon", 1e-5)})
	bshape := make([]int, len(x.shape)-1)
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[0] = ch
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(y), B: c.bcast(viewAs(scale, bshape), x.shape), Y: c.ref(y)})
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(y), B: c.bcast(viewAs(bias, bshape), x.shape), Y: c.ref(y)})
	return nil
}

func lowerLpNorm(c *nodeCtx) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if len(x.shape) == 0 {
		return c.shapeErr("LpNormalization of a scalar")
	}
	axis, err := c.normAxis(c.attrInt("axis", -1), len(x.shape))
	if err != nil {
		return err
	}
	fn := rt.L2
	switch p := c.attrInt("p", 2); p {
	case 1:
		fn = rt.L1
	case 2:
	default:
		return c.errf("p = %d, want 1 or 2", p)
	}
	o, n, in := split3(x.shape, axis)
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || o*n*in == 0 {
		return err
	}
	norm := c.temp(x.dtype, []int{o, 1, in})
	c.emit(&rt.Reduce{Fn: fn, X: c.ref(x), Y: c.ref(norm), Outer: o, N: n, Inner: in})
	// A zero norm (an all-zero slice) divides by 1 instead, giving zeros.
	zero := c.temp(rt.Bool, norm.shape)
	c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(norm), B: c.bcast(c.scalar(x.dtype, 0), norm.shape), Y: c.ref(zero)})
	c.emit(&rt.Where{Cond: c.ref(zero), A: c.bcast(c.scalar(x.dtype, 1), norm.shape), B: c.ref(norm), Y: c.ref(norm)})
	s := []int{o, n, in}
	c.emit(&rt.Binary{Fn: rt.Div, A: c.view(x, s, nil, 0), B: c.bcast(norm, s), Y: c.view(y, s, nil, 0)})
	return nil
}

// lowerSpaceDepth rearranges blocks as a reshape, a transposing copy and
// a reshape.
func lowerSpaceDepth(c *nodeCtx, toSpace bool) error {
	x := c.in[0]
	b := int(c.attrInt("blocksize", 0))
	if len(x.shape) != 4 || b < 1 {
		return c.shapeErr("needs a 4-D input and blocksize >= 1, got %v and %d", x.shape, b)
	}
	n, ch, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	var split, perm, out []int
	if toSpace {
		if ch%(b*b) != 0 {
			return c.shapeErr("channels %d not divisible by blocksize² %d", ch, b*b)
		}
		cc := ch / (b * b)
		out = []int{n, cc, h * b, w * b}
		if c.attrString("mode", "DCR") == "CRD" {
			split, perm = []int{n, cc, b, b, h, w}, []int{0, 1, 4, 2, 5, 3}
		} else {
			split, perm = []int{n, b, b, cc, h, w}, []int{0, 3, 4, 1, 5, 2}
		}
	} else {
		if h%b != 0 || w%b != 0 {
			return c.shapeErr("spatial dims %dx%d not divisible by blocksize %d", h, w, b)
		}
		split, perm = []int{n, ch, h / b, b, w / b, b}, []int{0, 3, 5, 1, 2, 4}
		if c.attrString("mode", "DCR") == "CRD" {
			perm = []int{0, 1, 3, 5, 2, 4}
		}
		out = []int{n, ch * b * b, h / b, w / b}
	}
	st := rt.ContiguousStrides(split)
	shape, strides := make([]int, 6), make([]int, 6)
	for i, p := range perm {
		shape[i], strides[i] = split[p], st[p]
	}
	y, err := c.define(0, x.dtype, out)
	if err != nil || prod(out) == 0 {
		return err
	}
	c.copyInto(c.view(y, shape, nil, 0), c.view(x, shape, strides, 0))
	return nil
}

func lowerSwish(c *nodeCtx) error {
	x, y, err := floatMap(c, c.in[0].dtype)
	if err != nil {
		return err
	}
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: c.attrFloat("alpha", 1), X: c.ref(x), Y: c.ref(y)})
	c.emit(&rt.Unary{Fn: rt.Sigmoid, X: c.ref(y), Y: c.ref(y)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(x), B: c.ref(y), Y: c.ref(y)})
	return nil
}

func lowerThresholdedRelu(c *nodeCtx) error {
	x := c.in[0]
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	m := c.temp(rt.Bool, x.shape)
	c.emit(&rt.Binary{Fn: rt.Greater, A: c.ref(x), B: c.bcast(c.scalar(x.dtype, c.attrFloat("alpha", 1)), x.shape), Y: c.ref(m)})
	c.emit(&rt.Where{Cond: c.ref(m), A: c.ref(x), B: c.bcast(c.scalar(x.dtype, 0), x.shape), Y: c.ref(y)})
	return nil
}

func lowerShrink(c *nodeCtx) error {
	x, y, err := floatMap(c, c.in[0].dtype)
	if err != nil {
		return err
	}
	l, b := c.attrFloat("lambd", 0.5), c.attrFloat("bias", 0)
	lo, hi := c.temp(rt.Bool, x.shape), c.temp(rt.Bool, x.shape)
	c.emit(&rt.Binary{Fn: rt.Less, A: c.ref(x), B: c.bcast(c.scalar(x.dtype, -l), x.shape), Y: c.ref(lo)})
	c.emit(&rt.Binary{Fn: rt.Greater, A: c.ref(x), B: c.bcast(c.scalar(x.dtype, l), x.shape), Y: c.ref(hi)})
	up, dn := c.temp(x.dtype, x.shape), c.temp(x.dtype, x.shape)
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1, Beta: b, X: c.ref(x), Y: c.ref(up)})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 1, Beta: -b, X: c.ref(x), Y: c.ref(dn)})
	c.emit(&rt.Where{Cond: c.ref(hi), A: c.ref(dn), B: c.bcast(c.scalar(x.dtype, 0), x.shape), Y: c.ref(y)})
	c.emit(&rt.Where{Cond: c.ref(lo), A: c.ref(up), B: c.ref(y), Y: c.ref(y)})
	return nil
}

// floatMap is the frame of an elementwise op on a float input: it checks
// that input 0 has a float dtype and defines output 0 with its shape and
// dtype dt.
func floatMap(c *nodeCtx, dt rt.DType) (x, y *tensor, err error) {
	x = c.in[0]
	if err := needFloat(c, x); err != nil {
		return nil, nil, err
	}
	y, err = c.define(0, dt, x.shape)
	return x, y, err
}

func lowerIsNaN(c *nodeCtx) error {
	x, y, err := floatMap(c, rt.Bool)
	if err != nil {
		return err
	}
	c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(x), B: c.ref(x), Y: c.ref(y)})
	c.emit(&rt.Unary{Fn: rt.Not, X: c.ref(y), Y: c.ref(y)})
	return nil
}

func lowerIsInf(c *nodeCtx) error {
	x, y, err := floatMap(c, rt.Bool)
	if err != nil {
		return err
	}
	c.emit(&rt.Fill{Y: c.ref(y), Value: 0})
	t := c.temp(rt.Bool, x.shape)
	for _, s := range []struct {
		attr string
		v    float64
	}{{"detect_positive", math.Inf(1)}, {"detect_negative", math.Inf(-1)}} {
		if c.attrInt(s.attr, 1) != 0 {
			c.emit(&rt.Binary{Fn: rt.Equal, A: c.ref(x), B: c.bcast(c.scalar(x.dtype, s.v), x.shape), Y: c.ref(t)})
			c.emit(&rt.Binary{Fn: rt.Or, A: c.ref(y), B: c.ref(t), Y: c.ref(y)})
		}
	}
	return nil
}

func lowerEyeLike(c *nodeCtx) error {
	x := c.in[0]
	if len(x.shape) != 2 {
		return c.shapeErr("EyeLike needs a 2-D input, got %v", x.shape)
	}
	dt := x.dtype
	if a, ok := c.n.Attr("dtype"); ok {
		var err error
		if dt, err = onnxDType(a.Int); err != nil {
			return err
		}
	}
	k := int(c.attrInt("k", 0))
	h, w := x.shape[0], x.shape[1]
	v := make([]float64, h*w)
	for i := 0; i < h; i++ {
		if j := i + k; j >= 0 && j < w {
			v[i*w+j] = 1
		}
	}
	return c.constant(0, rt.FromFloat64(dt, v, h, w))
}

// lowerHyper computes tan = sin/cos, sinh = (e^x - e^-x)/2 and
// cosh = (e^x + e^-x)/2.
func lowerHyper(c *nodeCtx, fn string) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	t := c.temp(x.dtype, x.shape)
	if fn == "tan" {
		c.emit(&rt.Unary{Fn: rt.Sin, X: c.ref(x), Y: c.ref(y)})
		c.emit(&rt.Unary{Fn: rt.Cos, X: c.ref(x), Y: c.ref(t)})
		c.emit(&rt.Binary{Fn: rt.Div, A: c.ref(y), B: c.ref(t), Y: c.ref(y)})
		return nil
	}
	c.emit(&rt.Unary{Fn: rt.Exp, X: c.ref(x), Y: c.ref(y)})
	c.emit(&rt.Unary{Fn: rt.Neg, X: c.ref(x), Y: c.ref(t)})
	c.emit(&rt.Unary{Fn: rt.Exp, X: c.ref(t), Y: c.ref(t)})
	op := rt.Sub
	if fn == "cosh" {
		op = rt.Add
	}
	c.emit(&rt.Binary{Fn: op, A: c.ref(y), B: c.ref(t), Y: c.ref(y)})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: 0.5, X: c.ref(y), Y: c.ref(y)})
	return nil
}

// lowerWindow computes a generalised cosine window
// w[n] = sum_k (-1)^k a_k cos(2 pi k n / N) as a plan-time constant
// (N = size when periodic, size-1 otherwise).
func lowerWindow(c *nodeCtx, a []float64) error {
	sv, err := c.constInts(0)
	if err != nil {
		return err
	}
	if len(sv) != 1 || sv[0] < 0 || sv[0] > 1<<24 {
		return c.shapeErr("size %v is invalid", sv)
	}
	dt, err := onnxDType(c.attrInt("output_datatype", 1))
	if err != nil {
		return err
	}
	n := int(sv[0])
	den := float64(n)
	if c.attrInt("periodic", 1) == 0 {
		den = float64(n - 1)
	}
	v := make([]float64, n)
	for i := range v {
		sign := 1.0
		for k, ak := range a {
			v[i] += sign * ak * math.Cos(2*math.Pi*float64(k*i)/den)
			sign = -sign
		}
	}
	return c.constant(0, rt.FromFloat64(dt, v, n))
}

// lowerLRN sums squares over a channel window with an average Pool over
// the [N, C, H*W] view (C as the pooled height, padded so each window is
// centred), then y = x * (bias + alpha*avg)^-beta.
func lowerLRN(c *nodeCtx) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if len(x.shape) < 3 {
		return c.shapeErr("LRN needs rank >= 3, got %v", x.shape)
	}
	size := int(c.attrInt("size", 0))
	if size < 1 {
		return c.errf("size %d is invalid", size)
	}
	n, ch, hw := x.shape[0], x.shape[1], prod(x.shape[2:])
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil || n*ch*hw == 0 {
		return err
	}
	sq := c.temp(x.dtype, x.shape)
	c.emit(&rt.Unary{Fn: rt.Square, X: c.ref(x), Y: c.ref(sq)})
	avg := c.temp(x.dtype, x.shape)
	pt := (size - 1) / 2
	c.emit(&rt.Pool{Fn: rt.AvgPool, X: c.ref(sq), Y: c.ref(avg), NC: n, H: ch, W: hw, OH: ch, OW: hw, KH: size, KW: 1,
		StrideH: 1, StrideW: 1, PadT: pt, PadB: size - 1 - pt, DilH: 1, DilW: 1, CountIncludePad: true})
	c.emit(&rt.Unary{Fn: rt.Affine, Alpha: c.attrFloat("alpha", 1e-4), Beta: c.attrFloat("bias", 1), X: c.ref(avg), Y: c.ref(avg)})
	c.emit(&rt.Binary{Fn: rt.Pow, A: c.ref(avg), B: c.bcast(c.scalar(x.dtype, -c.attrFloat("beta", 0.75)), x.shape), Y: c.ref(avg)})
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(x), B: c.ref(avg), Y: c.ref(y)})
	return nil
}

func lowerConvTranspose(c *nodeCtx) error {
	x, w := c.in[0], c.in[1]
	if err := needFloat(c, x, w); err != nil {
		return err
	}
	nd := len(x.shape) - 2
	if nd < 1 || len(w.shape) != nd+2 {
		return c.shapeErr("ConvTranspose: X %v, W %v", x.shape, w.shape)
	}
	if nd > 3 {
		return c.unsupported("ConvTranspose supports 1-D, 2-D and 3-D, got X %v", x.shape)
	}
	g := int(c.attrInt("group", 1))
	cin := x.shape[1]
	if g < 1 || cin%g != 0 || w.shape[0] != cin {
		return c.shapeErr("ConvTranspose: X has %d channels, W is %v, group %d", cin, w.shape, g)
	}
	k := w.shape[1] * g
	kernel := w.shape[2:]
	ints := func(name string, def int) []int {
		out := make([]int, nd)
		v, ok := c.attrInts(name)
		for i := range out {
			out[i] = def
			if ok && i < len(v) {
				out[i] = int(v[i])
			}
		}
		return out
	}
	strides, dil, outPad := ints("strides", 1), ints("dilations", 1), ints("output_padding", 0)
	padB, padE := make([]int, nd), make([]int, nd)
	if p, ok := c.attrInts("pads"); ok && len(p) == 2*nd {
		for i := 0; i < nd; i++ {
			padB[i], padE[i] = int(p[i]), int(p[nd+i])
		}
	}
	in := x.shape[2:]
	out := make([]int, nd)
	full := func(i int) int { return strides[i]*(in[i]-1) + outPad[i] + (kernel[i]-1)*dil[i] + 1 }
	autoPad := c.attrString("auto_pad", "NOTSET")
	os, haveOS := c.attrInts("output_shape")
	for i := 0; i < nd; i++ {
		switch {
		case haveOS || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER":
			target := in[i] * strides[i]
			if haveOS {
				if len(os) < nd {
					return c.shapeErr("output_shape %v for %d spatial dims", os, nd)
				}
				target = int(os[len(os)-nd+i])
			}
			total := full(i) - target
			if autoPad == "SAME_LOWER" {
				padB[i], padE[i] = total-total/2, total/2
			} else {
				padB[i], padE[i] = total/2, total-total/2
			}
			out[i] = target
		default:
			if autoPad == "VALID" {
				padB[i], padE[i] = 0, 0
			}
			out[i] = full(i) - padB[i] - padE[i]
		}
		if out[i] < 0 {
			return c.shapeErr("ConvTranspose output size %d is negative", out[i])
		}
	}
	var b *tensor
	if c.has(2) {
		b = c.in[2]
		if err := needFloat(c, x, b); err != nil {
			return err
		}
		if prod(b.shape) != k {
			return c.shapeErr("ConvTranspose bias has shape %v, want [%d]", b.shape, k)
		}
	}
	if nd == 3 {
		return lowerConvTranspose3D(c, x, w, b, g, strides, dil, padB, out)
	}
	y, err := c.define(0, x.dtype, append([]int{x.shape[0], k}, out...))
	if err != nil {
		return err
	}
	op := &rt.ConvTranspose{X: c.ref(x), W: c.ref(w), Y: c.ref(y), N: x.shape[0], C: cin, K: k, Groups: g,
		H: 1, Width: in[0], OH: 1, OW: out[0], KH: 1, KW: kernel[0], StrideH: 1, StrideW: strides[0], PadL: padB[0], DilH: 1, DilW: dil[0]}
	if nd == 2 {
		op.H, op.Width, op.OH, op.OW, op.KH, op.KW = in[0], in[1], out[0], out[1], kernel[0], kernel[1]
		op.StrideH, op.StrideW, op.PadT, op.PadL, op.DilH, op.DilW = strides[0], strides[1], padB[0], padB[1], dil[0], dil[1]
	}
	if b != nil {
		op.Bias = c.ref(b)
	}
	c.emit(op)
	return nil
}
