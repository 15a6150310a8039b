package cpu

import (
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// Residual convolutions (rt.Conv with Res): Y = Act(Bias + conv + Res),
// the shortcut Add of a ResNet or MobileNetV2 block folded into the Conv
// in front of it. The wide direct kernels add the residual to each chunk
// of output rows as they finish it, while it is in cache (dconvPlan.chunk);
// every other path computes the convolution with its bias and then adds
// the residual and applies the activation in one pass over Y (convRes).

// convOpRes runs o, which has a residual.
func convOpRes(o *rt.Conv) {
	P := o.OH * o.OW
	n := o.N * o.K * P
	if n == 0 {
		return
	}
	res, y := data(o.Res), data(o.Y)
	if overlapBytes(res[o.Res.Off:], y[o.Y.Off:], n*o.Y.DType.Size()) {
		// Keep the residual: the convolution writes Y first.
		cp := make([]byte, n*o.Y.DType.Size())
		copy(cp, res[o.Res.Off:])
		c := *o
		c.Res = rt.Ref{Buf: nil}
		convRes(&c, cp)
		return
	}
	if dcwResApplies(o) {
		directConv(o, lin[float32](o.X, o.N*o.C*o.H*o.Width), lin[float32](o.W, o.K*o.C/o.Groups*o.KH*o.KW),
			lin[float32](o.Bias, o.K), lin[float32](o.Y, n))
		return
	}
	convRes(o, res[o.Res.Off:])
}

// convRes computes o without its residual and activation, then adds the
// residual (res: its bytes, from Res's offset) and applies the activation
// in one pass.
func convRes(o *rt.Conv, res []byte) {
	c := *o
	c.Res, c.Act = rt.Ref{}, rt.Activation{Fn: rt.Copy}
	byFloat(c.X.DType, &c, convT[float64], convT[float32])
	P := o.OH * o.OW
	planes := o.N * o.K
	grain := max(1, 16384/max(1, P))
	if o.Y.DType == rt.F32 {
		y, r := lin[float32](o.Y, planes*P), elems[float32](res)[:planes*P]
		parallelFor(planes, grain, func(lo, hi int) {
			addAct(o.Act, y[lo*P:hi*P], r[lo*P:hi*P])
		})
		return
	}
	y, r := lin[float64](o.Y, planes*P), elems[float64](res)[:planes*P]
	parallelFor(planes, grain, func(lo, hi int) {
		addAct(o.Act, y[lo*P:hi*P], r[lo*P:hi*P])
	})
}

// addAct sets y = act(y + r).
func addAct[T floatT](act rt.Activation, y, r []T) {
	if y32, ok := asF32(y); !ok || !binaryF32(rt.Add, formVV, y32, y32, any(r).([]float32)) {
		for i := range y {
			y[i] += r[i]
		}
	}
	actApply(act.Fn, act.Alpha, act.Beta, y)
}

// overlapBytes reports whether the first n bytes of a and of b overlap.
func overlapBytes(a, b []byte, n int) bool {
	if n <= 0 || len(a) < n || len(b) < n {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(n) && pb < pa+uintptr(n)
}

// dcwResApplies reports whether o runs on the wide direct kernels, which
// add the residual chunk by chunk (convT's choice for f32, less the other
// kernels that would take o).
func dcwResApplies(o *rt.Conv) bool {
	if o.X.DType != rt.F32 || dw3Applies(o) || useWino(o) != nil || useOcw(o) || !useDirectConv(o) {
		return false
	}
	return dcwMaxKB(2) > 0 && (o.C/o.Groups > 1 || dcwAll)
}
