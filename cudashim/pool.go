//go:build cgo

package cudashim

import (
	"github.com/vrun-go/vrun/rt"
)

func (l *lowering) Pool(o *rt.Pool) {
	n := rt.Extent(o.NC, o.OH, o.OW)
	if n <= 0 {
		return
	}
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.Y)).
		ints(o.NC, o.H, o.W, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL, o.PadB, o.PadR,
			o.DilH, o.DilW).i(b2i(o.CountIncludePad)).ints(o.P, int(o.Fn)).b
	l.kernel(byFloat(o.X.DType, kPoolH, kPoolF, kPoolD), [3]uint32{grid1(n), 1, 1}, args)
}
