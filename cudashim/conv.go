//go:build cgo

package cudashim

import (
	"os"

	"github.com/vrun-go/vrun/rt"
)

// dwEnv, set to "0", sends depthwise convolutions back to cuDNN (or the
// implicit-GEMM kernel without it).
const dwEnv = "VRUN_CUDA_DW"

// useDWKernel reports whether depthwise convolutions run on dwconv (nn.cu):
// on the H200 it took MobileNetV2's depthwise layers from cuDNN's kernels
// to about the memory bandwidth (docs/benchmarks.md).
func useDWKernel() bool { return os.Getenv(dwEnv) != "0" }

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
		if !l.dnnConv(o) {
			l.convSK(o, pickSK(o))
		}
		return
	case o.C == o.Groups && useDWKernel():
		l.dwConv(o)
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

// dwConv records a depthwise convolution (one input channel per group) on
// dwconv: one thread per output element.
func (l *lowering) dwConv(o *rt.Conv) {
	n := rt.Extent(o.N, o.K, o.OH, o.OW)
	args := (&argw{}).u(l.ptr(o.X)).u(l.ptr(o.W)).u(l.ptr(o.Bias)).u(l.ptr(o.Y)).
		ints(o.N, o.C, o.H, o.Width, o.K, o.OH, o.OW, o.KH, o.KW, o.StrideH, o.StrideW, o.PadT, o.PadL,
			o.DilH, o.DilW, o.Groups, int(o.Act.Fn)).f(o.Act.Alpha).f(o.Act.Beta).b
	l.kernel(byFloat(o.X.DType, kDWConvH, kDWConvF, kDWConvD), [3]uint32{grid1(n), 1, 1}, args)
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
