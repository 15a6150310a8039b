//go:build cgo

package cudashim

import (
	"github.com/vrun-go/vrun/rt"
)

func (l *lowering) Conv(o *rt.Conv) {
	cols := rt.Extent(o.N, o.OH, o.OW)
	if cols == 0 || o.K == 0 {
		return
	}
	switch {
	case useSplitK() && (forceSK.on || skSmallGrid(o)):
		l.convSK(o, pickSK(o))
		return
	case o.Res.Buf != nil: // convResSupported: the small-grid path is on
		if !l.dnnConvRes(o) {
			l.convSK(o, pickSK(o))
		}
		return
	case l.dnnConv(o):
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.W)).u(l.ptr(o.Bias)).u(l.ptr(o.Y)).
		ints(o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
			o.DilH, o.DilW, o.Groups, int(o.Act.Fn)).f(o.Act.Alpha).f(o.Act.Beta).b
	kg := o.K / o.Groups
	grid := [3]uint32{tiles(int(cols), 64), min(tiles(kg, 64), 65535), uint32(min(o.Groups, 65535))}
	l.kernel(byFloat(o.X.DType, kConvH, kConvF, kConvD), grid, args)
}

func (l *lowering) ConvTranspose(o *rt.ConvTranspose) {
	n := rt.Extent(o.N, o.K, o.OH, o.OW)
	if n <= 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.W)).u(l.ptr(o.Bias)).u(l.ptr(o.Y)).
		ints(o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
			o.DilH, o.DilW, o.Groups, 0).f(0).f(0).b
	l.kernel(byFloat(o.X.DType, kConvtH, kConvtF, kConvtD), [3]uint32{grid1(n), 1, 1}, args)
}
