//go:build cgo

package cudashim

import (
	"fmt"
	"math"

	"github.com/vrun-go/vrun/rt"
)

// A Conv with its images StrideY apart (rt.Conv.StrideY: the engine
// points a Conv into its stretch of a channel Concat's output at batch >
// 1) runs only through cuDNN, whose output descriptor (and the fused
// call's Z, the residual laid out like Y) takes the image stride
// (cudnn.go). The built-in kernels (the implicit-GEMM kernel, the
// depthwise kernel and the small-grid split-K kernels, whose embedded PTX
// writes dense images) are not given it: a strided Conv that Conv's rule
// would send to one of them is refused, in Supports and at Launch, with
// an *rt.UnsupportedError, and the engine then keeps the Concat's copy.
// There is no cuBLAS convolution path to extend.
//
// Supports is exact: it follows Conv's choice of path (the environment
// variables VRUN_CUDA_SPLITK, VRUN_CUDA_DW and VRUN_CUDA_CUDNN as they
// are when it is called), checks the 16-byte alignment that cuDNN needs
// on the operands' offsets (every Buffer of this device starts 256-byte
// aligned, and the engine's arena places tensors so too), and sets the
// convolution up through cuDNN (descriptors and algorithm, then freed),
// as recording it will. Launch checks the same without the cuDNN set-up,
// and refuses the Conv where recording it through cuDNN then fails.

// stridedReason completes the Reason of a refused strided Conv.
const stridedReason = " (the engine then keeps the Concat's copy)"

// yImageStride is the number of elements between the images of o's Y (and
// Res) as the cuDNN path lays them out: StrideY, or K*OH*OW where Y is
// dense (rt.Conv.DenseY: also a single image with any StrideY).
func yImageStride(o *rt.Conv) int {
	if o.DenseY() {
		return o.K * o.OH * o.OW
	}
	return o.StrideY
}

// convStrideSupported reports whether d runs o, a Conv with its images
// StrideY apart (!o.DenseY()), whose dtypes the reference rules allow:
// nil where Conv records it through cuDNN, else an *rt.UnsupportedError
// saying which path it would take. With probe it also sets o up through
// cuDNN (Supports); without it (Launch) a set-up that fails is reported
// when o is recorded.
func (d *Device) convStrideSupported(o *rt.Conv, probe bool) error {
	dt := o.X.DType
	no := func(format string, a ...any) error {
		return unsupported(o, dt, "Conv with its images StrideY apart "+fmt.Sprintf(format, a...)+stridedReason)
	}
	if e := rt.BatchExtent(o.N, o.StrideY, o.K, o.OH*o.OW); o.StrideY <= 0 || e < 0 || e > math.MaxInt32 {
		return no("(StrideY %d) spanning 2^31 elements or more, or not positive", o.StrideY)
	}
	switch {
	case useSplitK() && (forceSK.on || skSmallGrid(o)):
		return no("on the small-grid split-K kernel, which writes dense images")
	case o.Res.Buf == nil && o.C == o.Groups && useDWKernel():
		return no("on the depthwise kernel, which writes dense images (%s=0 sends it to cuDNN)", dwEnv)
	case !dnnEligible(o):
		return no("outside cuDNN's exact cases (the built-in kernel writes dense images)")
	case !useCudnn():
		return no("without cuDNN (%s=0)", dnnEnv)
	}
	if err := loadCudnn(); err != nil {
		return no("without cuDNN (%v)", err)
	}
	if !dnnCanStride() {
		return no("without cudnnSetTensor4dDescriptorEx in %s", dnnLib.name)
	}
	if o.X.Off%16 != 0 || o.W.Off%16 != 0 || o.Y.Off%16 != 0 {
		return no("with X, W or Y not 16-byte aligned, as cuDNN needs (the built-in kernel writes dense images)")
	}
	if probe {
		if err := d.dnnProbe(o); err != nil {
			return no("that cuDNN does not set up: %v", err)
		}
	}
	return nil
}

// convStrided records o, a Conv with its images StrideY apart, through
// cuDNN, or fails the op with an *rt.UnsupportedError where it cannot.
func (l *lowering) convStrided(o *rt.Conv) {
	if err := l.d.convStrideSupported(o, false); err != nil {
		if l.err == nil {
			l.err = err
		}
		return
	}
	if ok, why := l.dnnTry(o); !ok && l.err == nil {
		l.err = unsupported(o, o.X.DType, "Conv with its images StrideY apart, which cuDNN did not take: "+why+stridedReason)
	}
}
