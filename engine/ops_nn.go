package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	register("Gemm", 2, 3, lowerGemm)
	register("MatMul", 2, 2, lowerMatMul)
	register("Softmax", 1, 1, func(c *nodeCtx) error { return lowerSoftmax(c, false) })
	register("LogSoftmax", 1, 1, func(c *nodeCtx) error { return lowerSoftmax(c, true) })
	register("LayerNormalization", 2, 3, lowerLayerNorm)
	register("BatchNormalization", 5, 5, lowerBatchNorm)
	register("InstanceNormalization", 3, 3, lowerInstanceNorm)
	register("Conv", 2, 3, lowerConv)
	register("MaxPool", 1, 1, func(c *nodeCtx) error { return lowerPool(c, rt.MaxPool) })
	register("AveragePool", 1, 1, func(c *nodeCtx) error { return lowerPool(c, rt.AvgPool) })
	register("LpPool", 1, 1, func(c *nodeCtx) error { return lowerPool(c, rt.LpPool) })
	register("GlobalAveragePool", 1, 1, func(c *nodeCtx) error { return lowerGlobalPool(c, rt.Mean) })
	register("GlobalMaxPool", 1, 1, func(c *nodeCtx) error { return lowerGlobalPool(c, rt.RMax) })
}

func needFloat(c *nodeCtx, ts ...*tensor) error {
	for _, t := range ts {
		if t != nil && !t.dtype.IsFloat() {
			return c.unsupported("input %q has dtype %s, want a float type", t.name, t.dtype)
		}
		if t != nil && t.dtype != ts[0].dtype {
			return c.shapeErr("input %q has dtype %s, want %s", t.name, t.dtype, ts[0].dtype)
		}
	}
	return nil
}

func lowerGemm(c *nodeCtx) error {
	a, b := c.in[0], c.in[1]
	if err := needFloat(c, a, b); err != nil {
		return err
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return c.shapeErr("Gemm needs 2-D A and B, got %v and %v", a.shape, b.shape)
	}
	ta, tb := c.attrInt("transA", 0) != 0, c.attrInt("transB", 0) != 0
	m, k := a.shape[0], a.shape[1]
	if ta {
		m, k = k, m
	}
	k2, n := b.shape[0], b.shape[1]
	if tb {
		k2, n = n, k2
	}
	if k != k2 {
		return c.shapeErr("Gemm: A is %v (transA=%v), B is %v (transB=%v): inner dims %d != %d", a.shape, ta, b.shape, tb, k, k2)
	}
	op := &rt.MatMul{Batch: 1, M: m, N: n, K: k, TransA: ta, TransB: tb,
		Alpha: c.attrFloat("alpha", 1), Beta: c.attrFloat("beta", 1)}
	if c.has(2) {
		bias := c.in[2]
		if err := needFloat(c, a, bias); err != nil {
			return err
		}
		if _, err := broadcastShapes(bias.shape, []int{m, n}); err != nil || len(bias.shape) > 2 {
			return c.shapeErr("Gemm: C shape %v does not broadcast to [%d %d]", bias.shape, m, n)
		}
		op.Bias = c.bcast(bias, []int{m, n})
	}
	y, err := c.define(0, a.dtype, []int{m, n})
	if err != nil {
		return err
	}
	op.A, op.B, op.Y = c.ref(a), c.ref(b), c.ref(y)
	c.emit(op)
	y.act = &op.Act
	return nil
}

// lowerMatMul implements NumPy matmul: 1-D operands are promoted and the
// batch dims broadcast.
func lowerMatMul(c *nodeCtx) error {
	a, b := c.in[0], c.in[1]
	if err := needFloat(c, a, b); err != nil {
		return err
	}
	if len(a.shape) == 0 || len(b.shape) == 0 {
		return c.shapeErr("MatMul operands must have rank >= 1, got %v and %v", a.shape, b.shape)
	}
	as, bs := a.shape, b.shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	m, k := as[len(as)-2], as[len(as)-1]
	k2, n := bs[len(bs)-2], bs[len(bs)-1]
	if k != k2 {
		return c.shapeErr("MatMul: %v @ %v: inner dims %d != %d", a.shape, b.shape, k, k2)
	}
	batch, err := broadcastShapes(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		return err
	}
	var outShape []int
	outShape = append(outShape, batch...)
	if len(a.shape) > 1 {
		outShape = append(outShape, m)
	}
	if len(b.shape) > 1 {
		outShape = append(outShape, n)
	}
	y, err := c.define(0, a.dtype, outShape)
	if err != nil {
		return err
	}
	nb := prod(batch)
	if nb == 0 {
		return nil // an empty batch: nothing to compute
	}
	// Batch strides: a batch operand can be expressed with one stride only
	// when it is either fully broadcast or not broadcast at all.
	stride := func(t []int, mat int) (int, bool) {
		tb := t[:len(t)-2]
		if prod(tb) == 1 {
			return 0, true
		}
		full := len(tb) == len(batch)
		for i := range tb {
			if tb[i] != batch[i] {
				full = false
			}
		}
		return mat, full
	}
	sa, okA := stride(as, m*k)
	sb, okB := stride(bs, k*n)
	ar, br := c.ref(a), c.ref(b)
	if !okA {
		t := c.temp(a.dtype, append(append([]int{}, batch...), m, k))
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.bcast(viewAs(a, as), t.shape), Y: c.ref(t)})
		ar, sa = c.ref(t), m*k
	}
	if !okB {
		t := c.temp(b.dtype, append(append([]int{}, batch...), k, n))
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.bcast(viewAs(b, bs), t.shape), Y: c.ref(t)})
		br, sb = c.ref(t), k*n
	}
	if sb == 0 && sa == m*k && nb > 1 {
		// B is shared by every batch (a Linear layer on [batch, seq, d]):
		// one GEMM with the batches stacked as rows. Y is contiguous
		// [batch..., m, n], so it is that GEMM's [nb*m, n] result. A batch
		// of small M is much slower on every backend (BERT's input
		// projection ran as 128 GEMMs of 8 rows).
		m, nb = nb*m, 1
		sa = m * k
	}
	op := &rt.MatMul{A: ar, B: br, Y: c.ref(y), Batch: nb, M: m, N: n, K: k,
		StrideA: sa, StrideB: sb, StrideY: m * n, Alpha: 1}
	c.emit(op)
	y.act = &op.Act
	return nil
}

// viewAs returns t seen with another shape of the same size (the storage
// and dtype are t's); it is used only to build refs.
func viewAs(t *tensor, shape []int) *tensor {
	return &tensor{root: t.root, dtype: t.dtype, shape: shape, name: t.name}
}

// split3 views shape as [outer, shape[axis], inner].
func split3(shape []int, axis int) (outer, n, inner int) {
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:])
}

func lowerSoftmax(c *nodeCtx, log bool) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if len(x.shape) == 0 {
		return c.shapeErr("Softmax input must have rank >= 1")
	}
	axis, err := c.normAxis(c.attrInt("axis", -1), len(x.shape))
	if err != nil {
		return err
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	o, n, i := split3(x.shape, axis)
	c.emit(&rt.Softmax{X: c.ref(x), Y: c.ref(y), Outer: o, N: n, Inner: i, Log: log})
	return nil
}

func lowerLayerNorm(c *nodeCtx) error {
	x, scale := c.in[0], c.in[1]
	if err := needFloat(c, x, scale); err != nil {
		return err
	}
	if len(x.shape) == 0 {
		return c.shapeErr("LayerNormalization input must have rank >= 1")
	}
	axis, err := c.normAxis(c.attrInt("axis", -1), len(x.shape))
	if err != nil {
		return err
	}
	outer, n := prod(x.shape[:axis]), prod(x.shape[axis:])
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	op := &rt.Normalize{X: c.ref(x), Y: c.ref(y), Outer: outer, N: n, Eps: c.attrFloat("epsilon", 1e-5)}
	norm := x.shape[axis:]
	// Scale and bias of the normalised shape map onto [N] directly;
	// broadcast ones are expanded at plan time when constant, or by a copy.
	affine := func(t *tensor) (rt.Ref, error) {
		if _, err := broadcastShapes(t.shape, norm); err != nil || len(t.shape) > len(norm) {
			return rt.Ref{}, c.shapeErr("scale/bias shape %v does not broadcast to %v", t.shape, norm)
		}
		if prod(t.shape) == n {
			r := c.ref(t)
			r.Shape = []int{n}
			return r, nil
		}
		tmp := c.temp(t.dtype, norm)
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.bcast(t, norm), Y: c.ref(tmp)})
		r := c.ref(tmp)
		r.Shape = []int{n}
		return r, nil
	}
	if op.Scale, err = affine(scale); err != nil {
		return err
	}
	if c.has(2) {
		if err := needFloat(c, x, c.in[2]); err != nil {
			return err
		}
		if op.Bias, err = affine(c.in[2]); err != nil {
			return err
		}
	}
	c.emit(op)
	return layerNormStats(c, x, outer, n, op.Eps)
}

// lowerBatchNorm folds the inference-mode BatchNormalization into one
// multiply-add: y = x*a + b with a = scale/sqrt(var+eps), b = B - mean*a,
// computed at plan time in float64 when the statistics are constant.
func lowerBatchNorm(c *nodeCtx) error {
	x := c.in[0]
	if err := needFloat(c, c.in...); err != nil {
		return err
	}
	if len(c.out) > 1 {
		return c.errf("training-mode BatchNormalization outputs are not supported")
	}
	if len(x.shape) < 2 {
		return c.shapeErr("BatchNormalization input must have rank >= 2, got %v", x.shape)
	}
	ch := x.shape[1]
	for i := 1; i < 5; i++ {
		if prod(c.in[i].shape) != ch || len(c.in[i].shape) != 1 {
			return c.shapeErr("input %d has shape %v, want [%d]", i, c.in[i].shape, ch)
		}
	}
	// training_mode (opset 14+) overrides the plan's mode when given.
	if c.attrInt("training_mode", b2i(c.p.mode.train)) != 0 {
		return lowerBatchNormTrain(c)
	}
	for i := 1; i < 5; i++ {
		if c.in[i].value == nil {
			return lowerBatchNormRuntime(c)
		}
	}
	eps := c.attrFloat("epsilon", 1e-5)
	scale, bias, mean, vr := c.in[1].value.Float64s(), c.in[2].value.Float64s(), c.in[3].value.Float64s(), c.in[4].value.Float64s()
	av, bv := make([]float64, ch), make([]float64, ch)
	for i := range av {
		av[i] = scale[i] / math.Sqrt(vr[i]+eps)
		bv[i] = bias[i] - mean[i]*av[i]
	}
	if x.conv != nil && x.act != nil && x.act.Fn == rt.Copy && x.convW.value != nil &&
		(x.convB == nil || x.convB.value != nil) && c.canFuse(x) {
		return foldBatchNormIntoConv(c, x, av, bv)
	}
	bshape := make([]int, len(x.shape)-1)
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[0] = ch
	at := c.newConst(rt.FromFloat64(x.dtype, av, bshape...))
	bt := c.newConst(rt.FromFloat64(x.dtype, bv, bshape...))
	y, err := c.defineInplace(0, x.dtype, x.shape, x)
	if err != nil {
		return err
	}
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(x), B: c.bcast(at, x.shape), Y: c.ref(y)})
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(y), B: c.bcast(bt, x.shape), Y: c.ref(y)})
	return nil
}

// foldBatchNormIntoConv rewrites the Conv that produced x so that it
// computes BatchNorm(Conv(X)) directly: W'[k] = W[k]*a[k] and
// bias'[k] = bias[k]*a[k] + b[k], with new plan-time constants.
func foldBatchNormIntoConv(c *nodeCtx, x *tensor, a, b []float64) error {
	w := x.convW.value.Float64s()
	per := len(w) / len(a)
	for k := range a {
		for i := k * per; i < (k+1)*per; i++ {
			w[i] *= a[k]
		}
	}
	bias := make([]float64, len(a))
	if x.convB != nil {
		copy(bias, x.convB.value.Float64s())
	}
	for k := range a {
		bias[k] = bias[k]*a[k] + b[k]
	}
	nw := c.newConst(rt.FromFloat64(x.dtype, w, x.convW.shape...))
	nb := c.newConst(rt.FromFloat64(x.dtype, bias, len(a)))
	x.conv.W, x.conv.Bias = c.ref(nw), c.ref(nb)
	if err := c.alias(0, x, x.shape); err != nil {
		return err
	}
	// The fused Conv can still take an activation.
	c.out[0].act, c.out[0].conv, c.out[0].convW, c.out[0].convB = x.act, x.conv, nw, nb
	x.act, x.conv = nil, nil
	return nil
}

func lowerInstanceNorm(c *nodeCtx) error {
	x, scale, bias := c.in[0], c.in[1], c.in[2]
	if err := needFloat(c, x, scale, bias); err != nil {
		return err
	}
	if len(x.shape) < 3 {
		return c.shapeErr("InstanceNormalization input must have rank >= 3, got %v", x.shape)
	}
	ch := x.shape[1]
	if prod(scale.shape) != ch || prod(bias.shape) != ch {
		return c.shapeErr("scale %v and bias %v must have %d elements", scale.shape, bias.shape, ch)
	}
	y, err := c.define(0, x.dtype, x.shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Normalize{X: c.ref(x), Y: c.ref(y), Outer: x.shape[0] * ch, N: prod(x.shape[2:]), Eps: c.attrFloat("epsilon", 1e-5)})
	bshape := append([]int{ch}, make([]int, len(x.shape)-2)...)
	for i := 1; i < len(bshape); i++ {
		bshape[i] = 1
	}
	sv, bv := viewAs(scale, bshape), viewAs(bias, bshape)
	c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(y), B: c.bcast(sv, x.shape), Y: c.ref(y)})
	c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(y), B: c.bcast(bv, x.shape), Y: c.ref(y)})
	return nil
}

// spatial holds resolved kernel geometry for Conv and pooling.
type spatial struct {
	kernel, strides, dil []int
	padsB, padsE         []int // begin and end pads per spatial dim
	out                  []int
}

// resolveSpatial applies ONNX kernel_shape/strides/dilations/pads/auto_pad
// (and ceil_mode for pooling) to the spatial dims in.
func resolveSpatial(c *nodeCtx, in, kernel []int, ceil bool) (*spatial, error) {
	nd := len(in)
	s := &spatial{kernel: kernel, strides: make([]int, nd), dil: make([]int, nd), padsB: make([]int, nd), padsE: make([]int, nd), out: make([]int, nd)}
	fill := func(dst []int, name string, def int) error {
		v, ok := c.attrInts(name)
		if !ok {
			for i := range dst {
				dst[i] = def
			}
			return nil
		}
		if len(v) != nd {
			return c.shapeErr("%s has %d values, want %d", name, len(v), nd)
		}
		for i := range dst {
			if v[i] < 1 || v[i] > 1<<20 {
				return c.errf("%s[%d] = %d is invalid", name, i, v[i])
			}
			dst[i] = int(v[i])
		}
		return nil
	}
	if err := fill(s.strides, "strides", 1); err != nil {
		return nil, err
	}
	if err := fill(s.dil, "dilations", 1); err != nil {
		return nil, err
	}
	autoPad := c.attrString("auto_pad", "NOTSET")
	switch autoPad {
	case "NOTSET":
		if p, ok := c.attrInts("pads"); ok {
			if len(p) != 2*nd {
				return nil, c.shapeErr("pads has %d values, want %d", len(p), 2*nd)
			}
			for i := 0; i < nd; i++ {
				if p[i] < 0 || p[nd+i] < 0 || p[i] > 1<<20 || p[nd+i] > 1<<20 {
					return nil, c.errf("pads %v are invalid", p)
				}
				s.padsB[i], s.padsE[i] = int(p[i]), int(p[nd+i])
			}
		}
	case "VALID":
	case "SAME_UPPER", "SAME_LOWER":
		for i := 0; i < nd; i++ {
			out := (in[i] + s.strides[i] - 1) / s.strides[i]
			ek := (kernel[i]-1)*s.dil[i] + 1
			total := max(0, (out-1)*s.strides[i]+ek-in[i])
			if autoPad == "SAME_UPPER" {
				s.padsB[i], s.padsE[i] = total/2, total-total/2
			} else {
				s.padsB[i], s.padsE[i] = total-total/2, total/2
			}
		}
	default:
		return nil, c.errf("unknown auto_pad %q", autoPad)
	}
	for i := 0; i < nd; i++ {
		ek := (kernel[i]-1)*s.dil[i] + 1
		span := in[i] + s.padsB[i] + s.padsE[i] - ek
		if span < 0 {
			return nil, c.shapeErr("kernel %v (dilations %v) larger than padded input %v", kernel, s.dil, in)
		}
		if ceil {
			o := (span+s.strides[i]-1)/s.strides[i] + 1
			// The last window must start inside the input or left padding.
			if (o-1)*s.strides[i] >= in[i]+s.padsB[i] {
				o--
			}
			s.out[i] = o
		} else {
			s.out[i] = span/s.strides[i] + 1
		}
	}
	return s, nil
}

func lowerConv(c *nodeCtx) error {
	x, w := c.in[0], c.in[1]
	if err := needFloat(c, x, w); err != nil {
		return err
	}
	nd := len(x.shape) - 2
	if nd < 1 || nd > 3 || len(w.shape) != nd+2 {
		return c.shapeErr("Conv supports 1-D, 2-D and 3-D (NCDHW): X %v, W %v", x.shape, w.shape)
	}
	g := int(c.attrInt("group", 1))
	cin, k := x.shape[1], w.shape[0]
	if g < 1 || cin%g != 0 || k%g != 0 || w.shape[1] != cin/g {
		return c.shapeErr("Conv: X has %d channels, W is %v, group %d", cin, w.shape, g)
	}
	kernel := w.shape[2:]
	if ks, ok := c.attrInts("kernel_shape"); ok {
		for i := range ks {
			if i >= len(kernel) || int(ks[i]) != kernel[i] {
				return c.shapeErr("kernel_shape %v disagrees with W %v", ks, w.shape)
			}
		}
	}
	s, err := resolveSpatial(c, x.shape[2:], kernel, false)
	if err != nil {
		return err
	}
	if nd == 3 {
		var b *tensor
		if c.has(2) {
			b = c.in[2]
			if err := needFloat(c, x, b); err != nil {
				return err
			}
			if prod(b.shape) != k || len(b.shape) != 1 {
				return c.shapeErr("Conv bias has shape %v, want [%d]", b.shape, k)
			}
		}
		return lowerConv3D(c, x, w, b, g, s)
	}
	outShape := append([]int{x.shape[0], k}, s.out...)
	y, err := c.define(0, x.dtype, outShape)
	if err != nil {
		return err
	}
	op := &rt.Conv{X: c.ref(x), W: c.ref(w), Y: c.ref(y), N: x.shape[0], C: cin, K: k, Groups: g,
		H: 1, Width: x.shape[2], OH: 1, OW: s.out[0], KH: 1, KW: kernel[0],
		StrideH: 1, StrideW: s.strides[0], PadL: s.padsB[0], DilH: 1, DilW: s.dil[0]}
	if nd == 2 {
		op.H, op.Width, op.OH, op.OW, op.KH, op.KW = x.shape[2], x.shape[3], s.out[0], s.out[1], kernel[0], kernel[1]
		op.StrideH, op.StrideW, op.PadT, op.PadL, op.DilH, op.DilW = s.strides[0], s.strides[1], s.padsB[0], s.padsB[1], s.dil[0], s.dil[1]
	}
	if c.has(2) {
		b := c.in[2]
		if err := needFloat(c, x, b); err != nil {
			return err
		}
		if prod(b.shape) != k || len(b.shape) != 1 {
			return c.shapeErr("Conv bias has shape %v, want [%d]", b.shape, k)
		}
		op.Bias = c.ref(b)
	}
	c.emit(op)
	y.act = &op.Act
	y.conv, y.convW = op, w
	if c.has(2) {
		y.convB = c.in[2]
	}
	return nil
}

func lowerPool(c *nodeCtx, fn rt.PoolFn) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if len(c.out) > 1 {
		return c.unsupported("the Indices output of MaxPool")
	}
	nd := len(x.shape) - 2
	if nd < 1 || nd > 3 {
		return c.unsupported("pooling supports 1-D, 2-D and 3-D (NCDHW) input, got %v", x.shape)
	}
	ks, ok := c.attrInts("kernel_shape")
	if !ok || len(ks) != nd {
		return c.errf("kernel_shape must have %d values", nd)
	}
	kernel := make([]int, nd)
	for i, v := range ks {
		if v < 1 || v > 1<<20 {
			return c.errf("kernel_shape %v is invalid", ks)
		}
		kernel[i] = int(v)
	}
	s, err := resolveSpatial(c, x.shape[2:], kernel, c.attrInt("ceil_mode", 0) != 0)
	if err != nil {
		return err
	}
	if nd == 3 {
		return lowerPool3D(c, x, fn, kernel, s)
	}
	y, err := c.define(0, x.dtype, append([]int{x.shape[0], x.shape[1]}, s.out...))
	if err != nil {
		return err
	}
	op := &rt.Pool{Fn: fn, X: c.ref(x), Y: c.ref(y), NC: x.shape[0] * x.shape[1],
		H: 1, W: x.shape[2], OH: 1, OW: s.out[0], KH: 1, KW: kernel[0], StrideH: 1, StrideW: s.strides[0],
		PadL: s.padsB[0], PadR: s.padsE[0], DilH: 1, DilW: s.dil[0],
		CountIncludePad: c.attrInt("count_include_pad", 0) != 0, P: int(c.attrInt("p", 2))}
	if nd == 2 {
		op.H, op.W, op.OH, op.OW, op.KH, op.KW = x.shape[2], x.shape[3], s.out[0], s.out[1], kernel[0], kernel[1]
		op.StrideH, op.StrideW, op.DilH, op.DilW = s.strides[0], s.strides[1], s.dil[0], s.dil[1]
		op.PadT, op.PadL, op.PadB, op.PadR = s.padsB[0], s.padsB[1], s.padsE[0], s.padsE[1]
	}
	c.emit(op)
	return nil
}

func lowerGlobalPool(c *nodeCtx, fn rt.ReduceFn) error {
	x := c.in[0]
	if err := needFloat(c, x); err != nil {
		return err
	}
	if len(x.shape) < 3 {
		return c.shapeErr("global pooling needs rank >= 3, got %v", x.shape)
	}
	shape := []int{x.shape[0], x.shape[1]}
	for range x.shape[2:] {
		shape = append(shape, 1)
	}
	y, err := c.define(0, x.dtype, shape)
	if err != nil {
		return err
	}
	c.emit(&rt.Reduce{Fn: fn, X: c.ref(x), Y: c.ref(y), Outer: x.shape[0] * x.shape[1], N: prod(x.shape[2:]), Inner: 1})
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
