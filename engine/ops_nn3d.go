package engine

import (
	"github.com/vrun-go/vrun/rt"
)

// 3-D convolution and pooling (NCDHW) are lowered onto the 2-D primitives,
// so every backend runs them without a kernel of its own and training
// differentiates them through the primitives' rules:
//
//   - Conv: a strided gather of the input's depth windows into
//     T [N, OD, G, KD, Cg, H, W] (zeros where a window reaches into the
//     depth padding), one 2-D Conv of T seen as [N*OD, G*KD*Cg, H, W] with
//     the weight permuted to [K, KD*Cg, KH, KW] (group-major, then kd, then
//     c, as T), and a transposing copy of [N, OD, K, OH, OW] into Y.
//   - ConvTranspose: one 2-D ConvTranspose of the depth slices
//     [N*D, C, H, W] with the weight permuted to [C, KD*Kg, KH, KW], whose
//     KD outputs per slice are added into strided depth views of Y (which
//     starts as zero or the bias).
//   - MaxPool, AveragePool, LpPool: separable. A 2-D pool over (H, W) of
//     [N*C*D, H, W], then a pool along depth with kernel (KD, 1) of
//     [N*C, D, OH*OW]. The window of a 3-D pool is the product of its
//     per-axis windows, so the maximum is the maximum of maxima, Lp the Lp
//     of Lps, and the average the average of averages: the number of
//     positions counted (in the input, or in the padded input with
//     count_include_pad) is the product of the per-axis counts.

// depthRange returns the first and one-past-last index i in [0, n) for
// which i*step + base lies in [0, size).
func depthRange(n, step, base, size int) (lo, hi int) {
	if base < 0 {
		lo = (-base + step - 1) / step
	}
	if size-1-base < 0 {
		return 0, 0
	}
	hi = min(n, (size-1-base)/step+1)
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// permuteConst returns the host tensor v (contiguous, shape shape) with its
// axes permuted: out dim i is in dim perm[i].
func permuteConst(v *rt.Tensor, shape, perm []int) *rt.Tensor {
	es := v.DType.Size()
	n := len(shape)
	st := rt.ContiguousStrides(shape)
	oshape := make([]int, n)
	ost := make([]int, n)
	for i, p := range perm {
		oshape[i], ost[i] = shape[p], st[p]
	}
	out := &rt.Tensor{DType: v.DType, Shape: oshape, Data: make([]byte, len(v.Data))}
	idx := make([]int, n)
	for o := 0; o < int(rt.NumElements(oshape)); o++ {
		src := 0
		for i := range idx {
			src += idx[i] * ost[i]
		}
		copy(out.Data[o*es:(o+1)*es], v.Data[src*es:(src+1)*es])
		for i := n - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < oshape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}

// permuted returns t (contiguous, shape shape) with its axes permuted as a
// tensor of shape out: a plan-time constant when t's value is known, else a
// scratch tensor written by a copy (so gradients flow back to t).
func (c *nodeCtx) permuted(t *tensor, shape, perm, out []int) *tensor {
	if t.value != nil {
		v := permuteConst(&rt.Tensor{DType: t.dtype, Shape: shape, Data: t.value.Data}, shape, perm)
		v.Shape = out
		return c.newConst(v)
	}
	st := rt.ContiguousStrides(shape)
	vshape, vst := make([]int, len(perm)), make([]int, len(perm))
	for i, p := range perm {
		vshape[i], vst[i] = shape[p], st[p]
	}
	tmp := c.temp(t.dtype, out)
	c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(t, vshape, vst, 0), Y: c.view(tmp, vshape, nil, 0)})
	return tmp
}

// lowerConv3D lowers Conv over X [N, C, D, H, W] and W [K, C/G, KD, KH, KW]
// (see the comment at the top of the file).
func lowerConv3D(c *nodeCtx, x, w, b *tensor, g int, s *spatial) error {
	n, ch, d, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]
	k, cg, kd, kh, kw := w.shape[0], w.shape[1], w.shape[2], w.shape[3], w.shape[4]
	od, oh, ow := s.out[0], s.out[1], s.out[2]
	hw := h * wd
	y, err := c.define(0, x.dtype, []int{n, k, od, oh, ow})
	if err != nil {
		return err
	}
	// T[n, od, g, kd, c, h*w] = X[n, g*Cg+c, od*sD - pD + kd*dD, h*w].
	t := c.temp(x.dtype, []int{n * od, g * kd * cg, h, wd})
	ts := []int{od * g * kd * cg * hw, g * kd * cg * hw, kd * cg * hw, hw, 1} // [n, od, g, c, hw] at fixed kd
	xs := []int{ch * d * hw, s.strides[0] * hw, cg * d * hw, d * hw, 1}
	for j := 0; j < kd; j++ {
		base := j*s.dil[0] - s.padsB[0]
		lo, hi := depthRange(od, s.strides[0], base, d)
		for _, r := range [][2]int{{0, lo}, {hi, od}} {
			if r[1] > r[0] {
				c.emit(&rt.Fill{Y: c.view(t, []int{n, r[1] - r[0], g, cg, hw}, ts, r[0]*ts[1]+j*cg*hw)})
			}
		}
		if hi > lo {
			sh := []int{n, hi - lo, g, cg, hw}
			c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, sh, xs, (lo*s.strides[0]+base)*hw),
				Y: c.view(t, sh, ts, lo*ts[1]+j*cg*hw)})
		}
	}
	// W2[k, kd, c, kh, kw] = W[k, c, kd, kh, kw].
	w2 := c.permuted(w, []int{k, cg, kd, kh * kw}, []int{0, 2, 1, 3}, []int{k, kd * cg, kh, kw})
	y2 := y
	if od != 1 {
		y2 = c.temp(x.dtype, []int{n * od, k, oh, ow})
	}
	op := &rt.Conv{X: c.ref(t), W: c.ref(w2), Y: c.view(y2, []int{n * od, k, oh, ow}, nil, 0),
		N: n * od, C: g * kd * cg, H: h, Width: wd, K: k, OH: oh, OW: ow, KH: kh, KW: kw,
		StrideH: s.strides[1], StrideW: s.strides[2], PadT: s.padsB[1], PadL: s.padsB[2],
		DilH: s.dil[1], DilW: s.dil[2], Groups: g}
	if b != nil {
		op.Bias = c.ref(b)
	}
	c.emit(op)
	if y2 != y {
		ohw := oh * ow
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(y2, []int{n, k, od, ohw}, []int{od * k * ohw, ohw, k * ohw, 1}, 0),
			Y: c.view(y, []int{n, k, od, ohw}, nil, 0)})
	}
	// The activation is elementwise and the copy a permutation: an
	// activation node can fuse into the 2-D Conv, and a BatchNormalization
	// can fold into its (permuted, per-output-channel) weight and bias.
	y.act = &op.Act
	y.conv, y.convW, y.convB = op, w2, b
	return nil
}

// lowerConvTranspose3D lowers ConvTranspose over X [N, C, D, H, W] and
// W [C, K/G, KD, KH, KW] into Y with spatial dims out (see the comment at
// the top of the file). padB are the begin pads of the equivalent Conv.
func lowerConvTranspose3D(c *nodeCtx, x, w, b *tensor, g int, strides, dil, padB, out []int) error {
	n, ch, d, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]
	kg, kd, kh, kw := w.shape[1], w.shape[2], w.shape[3], w.shape[4]
	k := kg * g
	od, oh, ow := out[0], out[1], out[2]
	ohw := oh * ow
	y, err := c.define(0, x.dtype, []int{n, k, od, oh, ow})
	if err != nil {
		return err
	}
	// The depth slices [N, D, C, H, W].
	xt := x
	if d != 1 {
		hw := h * wd
		xt = c.temp(x.dtype, []int{n, d, ch, hw})
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(x, []int{n, d, ch, hw}, []int{ch * d * hw, hw, d * hw, 1}, 0), Y: c.ref(xt)})
	}
	// W2[c, kd, j, kh, kw] = W[c, j, kd, kh, kw]: output channel
	// g*KD*Kg + kd*Kg + j of the 2-D ConvTranspose.
	w2 := c.permuted(w, []int{ch, kg, kd, kh * kw}, []int{0, 2, 1, 3}, []int{ch, kd * kg, kh, kw})
	z := c.temp(x.dtype, []int{n * d, g * kd * kg, oh, ow})
	c.emit(&rt.ConvTranspose{X: c.view(xt, []int{n * d, ch, h, wd}, nil, 0), W: c.ref(w2), Y: c.ref(z),
		N: n * d, C: ch, H: h, Width: wd, K: g * kd * kg, OH: oh, OW: ow, KH: kh, KW: kw,
		StrideH: strides[1], StrideW: strides[2], PadT: padB[1], PadL: padB[2], DilH: dil[1], DilW: dil[2], Groups: g})
	// Y starts as the bias (or zero); each kd adds its slices at
	// od = id*sD - pD + kd*dD.
	if b != nil {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.view(b, []int{n, k, od * ohw}, []int{0, 1, 0}, 0), Y: c.view(y, []int{n, k, od * ohw}, nil, 0)})
	} else {
		c.emit(&rt.Fill{Y: c.ref(y)})
	}
	ys := []int{k * od * ohw, strides[0] * ohw, kg * od * ohw, od * ohw, 1} // [n, id, g, j, ohw]
	zs := []int{d * g * kd * kg * ohw, g * kd * kg * ohw, kd * kg * ohw, ohw, 1}
	for j := 0; j < kd; j++ {
		base := j*dil[0] - padB[0]
		lo, hi := depthRange(d, strides[0], base, od)
		if hi <= lo {
			continue
		}
		sh := []int{n, hi - lo, g, kg, ohw}
		yv := c.view(y, sh, ys, (lo*strides[0]+base)*ohw)
		c.emit(&rt.Binary{Fn: rt.Add, A: yv, B: c.view(z, sh, zs, lo*zs[1]+j*kg*ohw), Y: yv})
	}
	return nil
}

// lowerPool3D lowers pooling over X [N, C, D, H, W] (see the comment at
// the top of the file).
func lowerPool3D(c *nodeCtx, x *tensor, fn rt.PoolFn, kernel []int, s *spatial) error {
	n, ch, d, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]
	od, oh, ow := s.out[0], s.out[1], s.out[2]
	y, err := c.define(0, x.dtype, []int{n, ch, od, oh, ow})
	if err != nil {
		return err
	}
	cip, p := c.attrInt("count_include_pad", 0) != 0, int(c.attrInt("p", 2))
	// A stage whose window is one position with no padding is the identity.
	identity := func(i int) bool {
		return kernel[i] == 1 && s.strides[i] == 1 && s.padsB[i] == 0 && s.padsE[i] == 0
	}
	hwID := identity(1) && identity(2) && fn != rt.LpPool
	dID := identity(0) && fn != rt.LpPool
	if hwID && dID {
		c.emit(&rt.Unary{Fn: rt.Copy, X: c.ref(x), Y: c.ref(y)})
		return nil
	}
	src := x
	if !hwID || dID {
		dst := y
		if !dID {
			dst = c.temp(x.dtype, []int{n * ch * d, oh, ow})
		}
		c.emit(&rt.Pool{Fn: fn, X: c.view(x, []int{n * ch * d, h, wd}, nil, 0), Y: c.view(dst, []int{n * ch * d, oh, ow}, nil, 0),
			NC: n * ch * d, H: h, W: wd, OH: oh, OW: ow, KH: kernel[1], KW: kernel[2],
			StrideH: s.strides[1], StrideW: s.strides[2], PadT: s.padsB[1], PadL: s.padsB[2], PadB: s.padsE[1], PadR: s.padsE[2],
			DilH: s.dil[1], DilW: s.dil[2], CountIncludePad: cip, P: p})
		src = dst
	}
	if !dID {
		ohw := oh * ow
		c.emit(&rt.Pool{Fn: fn, X: c.view(src, []int{n * ch, d, ohw}, nil, 0), Y: c.view(y, []int{n * ch, od, ohw}, nil, 0),
			NC: n * ch, H: d, W: ohw, OH: od, OW: ohw, KH: kernel[0], KW: 1,
			StrideH: s.strides[0], StrideW: 1, PadT: s.padsB[0], PadB: s.padsE[0],
			DilH: s.dil[0], DilW: 1, CountIncludePad: cip, P: p})
	}
	return nil
}
