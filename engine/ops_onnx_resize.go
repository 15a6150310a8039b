package engine

import (
	"math"

	"github.com/vrun-go/vrun/rt"
)

func init() {
	register("Resize", 1, 4, lowerResize)
}

// resizeTaps computes, for one axis of input length in and output length
// out, the input indices and weights of each tap (1 for nearest, 2 for
// linear, 4 for cubic) and which outputs extrapolate (tf_crop_and_resize
// outside the input). Indices are clamped to the input (edge padding), as
// the ONNX reference does.
func resizeTaps(c *nodeCtx, in, out int, scale, roiStart, roiEnd float64, mode string) (idx [][]int64, w [][]float64, extrap []bool, err error) {
	ctm := c.attrString("coordinate_transformation_mode", "half_pixel")
	nearest := c.attrString("nearest_mode", "round_prefer_floor")
	a := c.attrFloat("cubic_coeff_a", -0.75)
	exclude := c.attrInt("exclude_outside", 0) != 0
	n := map[string]int{"nearest": 1, "linear": 2, "cubic": 4}[mode]
	idx, w = make([][]int64, n), make([][]float64, n)
	for k := range idx {
		idx[k], w[k] = make([]int64, out), make([]float64, out)
	}
	extrap = make([]bool, out)
	for o := 0; o < out; o++ {
		xo := float64(o)
		var x float64
		switch ctm {
		case "half_pixel":
			x = (xo+0.5)/scale - 0.5
		case "half_pixel_symmetric":
			adj := float64(out) / (scale * float64(in))
			x = float64(in)/2*(1-adj) + (xo+0.5)/scale - 0.5
		case "pytorch_half_pixel":
			if out > 1 {
				x = (xo+0.5)/scale - 0.5
			}
		case "align_corners":
			if out > 1 {
				// The reference divides by the unrounded output length.
				x = xo * float64(in-1) / (scale*float64(in) - 1)
			}
		case "asymmetric":
			x = xo / scale
		case "tf_crop_and_resize":
			if out > 1 {
				x = roiStart*float64(in-1) + xo*(roiEnd-roiStart)*float64(in-1)/float64(out-1)
			} else {
				x = 0.5 * (roiStart + roiEnd) * float64(in-1)
			}
			extrap[o] = x < 0 || x > float64(in-1)
		default:
			return nil, nil, nil, c.errf("unknown coordinate_transformation_mode %q", ctm)
		}
		f := math.Floor(x)
		r := x - f
		if r == 0 {
			f, r = f-1, 1
		}
		var coef []float64
		switch mode {
		case "nearest":
			up := false
			switch nearest {
			case "round_prefer_floor":
				up = r > 0.5
			case "round_prefer_ceil":
				up = r >= 0.5
			case "floor":
				up = r == 1
			case "ceil":
				up = r > 0
			default:
				return nil, nil, nil, c.errf("unknown nearest_mode %q", nearest)
			}
			p := f
			if up {
				p++
			}
			idx[0][o] = int64(min(max(p, 0), float64(in-1)))
			w[0][o] = 1
			continue
		case "linear":
			coef = []float64{1 - r, r}
		case "cubic":
			s := 1 - r
			coef = []float64{
				((a*(r+1)-5*a)*(r+1)+8*a)*(r+1) - 4*a,
				((a+2)*r-(a+3))*r*r + 1,
				((a+2)*s-(a+3))*s*s + 1,
				((a*(s+1)-5*a)*(s+1)+8*a)*(s+1) - 4*a,
			}
			f--
		}
		sum := 0.0
		for k := range coef {
			p := f + float64(k)
			if exclude && (p < 0 || p >= float64(in)) {
				coef[k] = 0
			}
			sum += coef[k]
			idx[k][o] = int64(min(max(p, 0), float64(in-1)))
		}
		for k := range coef {
			if exclude && sum != 0 {
				coef[k] /= sum
			}
			w[k][o] = coef[k]
		}
	}
	return idx, w, extrap, nil
}

// lowerResize resizes one axis at a time: each output slice along the axis
// is a weighted sum of 1, 2 or 4 input slices picked by Gather with
// plan-time index constants (nearest, linear, cubic), scaled by constant
// weights.
func lowerResize(c *nodeCtx) error {
	rz, err := parseResize(c)
	if err != nil {
		return err
	}
	x := c.in[0]
	y, err := c.define(0, x.dtype, rz.out)
	if err != nil || prod(rz.out) == 0 {
		return err
	}
	steps, err := rz.steps(c)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		c.copyInto(c.ref(y), c.ref(x))
		return nil
	}
	cur := x
	shape := append([]int{}, x.shape...)
	for si, st := range steps {
		shape[st.axis] = rz.out[st.axis]
		next := y
		if si < len(steps)-1 {
			next = c.temp(x.dtype, shape)
		}
		rz.emitStep(c, st, cur, next, shape)
		cur = next
	}
	return nil
}

// resize is a parsed and checked Resize node.
type resize struct {
	mode       string    // nearest, linear or cubic
	out        []int     // output shape
	scales     []float64 // per axis
	roiS, roiE []float64 // per axis, for tf_crop_and_resize
}

// resizeStep resizes one axis: tap k of output o reads input idx[k][o]
// with weight w[k][o]; ext[o] marks outputs that extrapolate.
type resizeStep struct {
	axis int
	idx  [][]int64
	w    [][]float64
	ext  []bool
}

// parseResize reads the mode, the axes, the output size (from scales or
// sizes, with keep_aspect_ratio_policy) and the roi.
func parseResize(c *nodeCtx) (*resize, error) {
	x := c.in[0]
	r := len(x.shape)
	rz := &resize{mode: c.attrString("mode", "nearest"), out: append([]int{}, x.shape...), scales: make([]float64, r)}
	if rz.mode != "nearest" && rz.mode != "linear" && rz.mode != "cubic" {
		return nil, c.errf("unknown mode %q", rz.mode)
	}
	if rz.mode != "nearest" {
		if err := needFloat(c, x); err != nil {
			return nil, err
		}
	}
	axes := allAxes(r)
	if av, ok := c.attrInts("axes"); ok {
		var err error
		if axes, err = c.normAxes(av, r); err != nil {
			return nil, err
		}
	}
	for i := range rz.scales {
		rz.scales[i] = 1
	}
	if err := rz.outputSize(c, axes); err != nil {
		return nil, err
	}
	if c.attrInt("antialias", 0) != 0 && rz.mode != "nearest" {
		for _, a := range axes {
			if rz.scales[a] < 1 {
				return nil, c.unsupported("antialiased %s downsampling", rz.mode)
			}
		}
	}
	var err error
	rz.roiS, rz.roiE, err = resizeROI(c, axes)
	return rz, err
}

// outputSize sets the output shape and the scales of the resized axes from
// the scales input, or else the sizes input.
func (rz *resize) outputSize(c *nodeCtx, axes []int) error {
	x := c.in[0]
	var sv []float64
	if c.has(2) {
		if err := c.needConst(2); err != nil {
			return err
		}
		sv = c.in[2].value.Float64s()
	}
	switch {
	case len(sv) > 0:
		if len(sv) != len(axes) {
			return c.shapeErr("%d scales for %d axes", len(sv), len(axes))
		}
		for i, a := range axes {
			if sv[i] <= 0 {
				return c.errf("scale %v is invalid", sv[i])
			}
			rz.scales[a] = sv[i]
			rz.out[a] = int(math.Floor(float64(x.shape[a]) * sv[i]))
		}
	case c.has(3):
		zv, err := c.constInts(3)
		if err != nil {
			return err
		}
		if len(zv) != len(axes) {
			return c.shapeErr("%d sizes for %d axes", len(zv), len(axes))
		}
		policy := c.attrString("keep_aspect_ratio_policy", "stretch")
		common := 0.0
		for i, a := range axes {
			s := float64(zv[i]) / float64(x.shape[a])
			switch {
			case i == 0:
				common = s
			case policy == "not_larger":
				common = math.Min(common, s)
			case policy == "not_smaller":
				common = math.Max(common, s)
			}
		}
		for i, a := range axes {
			if zv[i] < 0 {
				return c.shapeErr("sizes %v are invalid", zv)
			}
			rz.scales[a], rz.out[a] = float64(zv[i])/float64(x.shape[a]), int(zv[i])
			if policy != "stretch" {
				rz.scales[a] = common
				rz.out[a] = int(math.Round(float64(x.shape[a]) * common))
			}
		}
	default:
		return c.errf("Resize needs scales or sizes")
	}
	return nil
}

// resizeROI returns the region of interest of tf_crop_and_resize per axis
// (zeros for the other modes).
func resizeROI(c *nodeCtx, axes []int) (roiS, roiE []float64, err error) {
	r := len(c.in[0].shape)
	roiS, roiE = make([]float64, r), make([]float64, r)
	if c.attrString("coordinate_transformation_mode", "") != "tf_crop_and_resize" || !c.has(1) {
		return roiS, roiE, nil
	}
	if err := c.needConst(1); err != nil {
		return nil, nil, err
	}
	rv := c.in[1].value.Float64s()
	switch len(rv) {
	case 2 * r:
		copy(roiS, rv[:r])
		copy(roiE, rv[r:])
	case 2 * len(axes):
		for i, a := range axes {
			roiS[a], roiE[a] = rv[i], rv[len(axes)+i]
		}
	default:
		return nil, nil, c.shapeErr("roi %v for rank %d", rv, r)
	}
	return roiS, roiE, nil
}

// steps computes the taps of every axis, last axis first, leaving out the
// axes whose resize is the identity.
func (rz *resize) steps(c *nodeCtx) ([]resizeStep, error) {
	x := c.in[0]
	var steps []resizeStep
	for d := len(x.shape) - 1; d >= 0; d-- {
		idx, w, ext, err := resizeTaps(c, x.shape[d], rz.out[d], rz.scales[d], rz.roiS[d], rz.roiE[d], rz.mode)
		if err != nil {
			return nil, err
		}
		trivial := rz.out[d] == x.shape[d]
		for o := 0; o < rz.out[d] && trivial; o++ {
			for k := range idx {
				if ext[o] || (w[k][o] != 0 && (idx[k][o] != int64(o) || w[k][o] != 1)) {
					trivial = false
				}
			}
		}
		if !trivial {
			steps = append(steps, resizeStep{d, idx, w, ext})
		}
	}
	return steps, nil
}

// emitStep resizes cur along st.axis into next (of shape shape): one
// Gather per tap, weighted and summed, then the extrapolation value where
// the taps fall outside the input.
func (rz *resize) emitStep(c *nodeCtx, st resizeStep, cur, next *tensor, shape []int) {
	x := c.in[0]
	d := st.axis
	o, a, in := split3(cur.shape, d)
	wshape := make([]int, len(shape))
	for i := range wshape {
		wshape[i] = 1
	}
	wshape[d] = rz.out[d]
	for k := range st.idx {
		dst := next
		if k > 0 {
			dst = c.temp(x.dtype, shape)
		}
		c.emit(&rt.Gather{X: c.ref(cur), Idx: c.ref(c.i64Const(st.idx[k], rz.out[d])), Y: c.ref(dst), Outer: o, Axis: a, Inner: in,
			AllowOutOfRange: true})
		if rz.mode != "nearest" {
			wt := c.newConst(rt.FromFloat64(x.dtype, st.w[k], wshape...))
			c.emit(&rt.Binary{Fn: rt.Mul, A: c.ref(dst), B: c.bcast(wt, shape), Y: c.ref(dst)})
		}
		if k > 0 {
			c.emit(&rt.Binary{Fn: rt.Add, A: c.ref(next), B: c.ref(dst), Y: c.ref(next)})
		}
	}
	any := false
	mv := make([]float64, rz.out[d])
	for i, e := range st.ext {
		if e {
			any, mv[i] = true, 1
		}
	}
	if any {
		m := c.newConst(rt.FromFloat64(rt.Bool, mv, wshape...))
		ev := c.scalar(x.dtype, c.attrFloat("extrapolation_value", 0))
		c.emit(&rt.Where{Cond: c.bcast(m, shape), A: c.bcast(ev, shape), B: c.ref(next), Y: c.ref(next)})
	}
}
