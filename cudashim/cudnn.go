//go:build cgo

package cudashim

/*
#define VR_DEFINE_DNN_TABLE
#include "cudnn_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// Conv through cuDNN 9's legacy convolution API (cudnnConvolutionForward),
// when libcudnn.so.9 (cudnn64_9.dll) can be loaded and the op's semantics
// are exactly cuDNN's; every other Conv runs on the built-in
// implicit-GEMM kernel. VRUN_CUDA_CUDNN=0 disables cuDNN (the library is
// then not even opened); the variable is read when a Conv is recorded.
//
// At record time (Stream.Launch) a Conv gets its tensor, filter and
// convolution descriptors and an algorithm from the v7 heuristics, through
// a per-device query handle; the descriptors belong to the recorded
// command and are destroyed by Stream.Reset and Stream.Close. Before a
// Submit captures the graph, the stream creates its own cuDNN handle bound
// to its CUstream (cudnnSetStream) and grows its workspace to the largest
// need of its recorded Convs, so nothing is allocated while capturing and
// the cuDNN kernels land in the stream's CUDA graph.
//
// Bias, residual and activation: a Conv with a bias runs as one
// cudnnConvolutionBiasActivationForward, which takes a 16-byte aligned
// residual (rt.Conv.Res) as its Z (alpha2 = 1) and a ReLU; any other
// activation runs as the call's identity (where cuDNN picked
// IMPLICIT_PRECOMP_GEMM, the only algorithm that allows it) followed by
// the elementwise kernel. Otherwise a bias is first broadcast-copied into
// Y and cudnnConvolutionForward runs with beta = 1 (one rounding for
// conv+bias, as in MatMul); the residual Add and the activation then run
// as elementwise kernels. VRUN_CUDA_CUDNN_FUSE=0 turns the fused call
// off, and VRUN_CUDA_CUDNN_FUSE=1 limits it to a bias with a ReLU or no
// activation and no residual (on the H100, 2026-12-06: mobilenet_v2 0.52
// ms against 0.45 with the default, resnet50 1.11 against 1.02).

const dnnEnv = "VRUN_CUDA_CUDNN"

// useCudnn reports whether cuDNN is wanted (VRUN_CUDA_CUDNN=0 turns it off).
func useCudnn() bool { return os.Getenv(dnnEnv) != "0" }

// dnnNames are the cuDNN entry points, in the order of the VR_cudnn* enum
// of cudnn_shim.h.
var dnnNames = []string{
	"cudnnGetVersion", "cudnnGetErrorString", "cudnnCreate", "cudnnDestroy", "cudnnSetStream",
	"cudnnCreateTensorDescriptor", "cudnnSetTensor4dDescriptor", "cudnnDestroyTensorDescriptor",
	"cudnnCreateFilterDescriptor", "cudnnSetFilter4dDescriptor", "cudnnDestroyFilterDescriptor",
	"cudnnCreateConvolutionDescriptor", "cudnnSetConvolution2dDescriptor", "cudnnSetConvolutionGroupCount",
	"cudnnSetConvolutionMathType", "cudnnDestroyConvolutionDescriptor", "cudnnGetConvolution2dForwardOutputDim",
	"cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionForwardWorkspaceSize",
	"cudnnConvolutionForward",
}

// dnnOptNames follow dnnNames in the VR_cudnn* enum: entry points vrun
// uses when present (the fused conv + bias + activation).
var dnnOptNames = []string{
	"cudnnCreateActivationDescriptor", "cudnnSetActivationDescriptor", "cudnnDestroyActivationDescriptor",
	"cudnnConvolutionBiasActivationForward",
}

func init() {
	if len(dnnNames)+len(dnnOptNames) != int(C.VR_DNN_COUNT) {
		panic("cudashim: cuDNN symbol table out of sync with cudnn_shim.h")
	}
}

func dnnLibNames() []string {
	if runtime.GOOS == "windows" {
		return []string{"cudnn64_9.dll"}
	}
	return []string{"libcudnn.so.9"}
}

// dnnLib is the outcome of loading cuDNN, computed once (unless
// VRUN_CUDA_CUDNN=0, which never loads it).
var dnnLib struct {
	once    sync.Once
	name    string
	version int // cudnnGetVersion: major*10000 + minor*100 + patch
	err     error
}

// loadCudnn opens cuDNN and resolves its entry points. The error text is
// what DeviceInfo.Details shows after "cudnn".
func loadCudnn() error {
	dnnLib.once.Do(func() {
		names := dnnLibNames()
		var h unsafe.Pointer
		var name string
		for _, n := range names {
			if h = dlopen(n); h != nil {
				name = n
				break
			}
		}
		if h == nil {
			dnnLib.err = fmt.Errorf("not found (%s)", strings.Join(names, ", "))
			return
		}
		ptrs := make([]unsafe.Pointer, len(dnnNames))
		for i, s := range dnnNames {
			if ptrs[i] = dlsym(h, s); ptrs[i] == nil {
				dnnLib.err = fmt.Errorf("unusable (%s lacks %s)", name, s)
				return
			}
		}
		for i, p := range ptrs {
			C.vr_set_dnn(C.int(i), p)
		}
		for i, s := range dnnOptNames {
			C.vr_set_dnn(C.int(len(dnnNames)+i), dlsym(h, s))
		}
		v := int(C.vr_cudnnGetVersion())
		if v < 90000 {
			dnnLib.err = fmt.Errorf("unusable (%s reports version %d, want 9.x)", name, v)
			return
		}
		dnnLib.name, dnnLib.version = name, v
	})
	return dnnLib.err
}

// dnnDetail is DeviceInfo.Details' "cudnn" entry.
func dnnDetail() string {
	if !useCudnn() {
		return "disabled (" + dnnEnv + "=0)"
	}
	if err := loadCudnn(); err != nil {
		return err.Error()
	}
	v := dnnLib.version
	return fmt.Sprintf("%d.%d.%d (%s)", v/10000, v%10000/100, v%100, dnnLib.name)
}

// convDetail is DeviceInfo.Details' "conv" entry.
func convDetail() string {
	if useCudnn() && loadCudnn() == nil {
		return "cuDNN where exact (2-D, symmetric pads, f32/f64/f16), else the built-in implicit-GEMM kernel"
	}
	return "built-in implicit-GEMM kernel"
}

// dnnError is a failed cuDNN call, named by cudnnGetErrorString.
type dnnError struct {
	what   string
	status int
	name   string
}

func (e *dnnError) Error() string { return fmt.Sprintf("cuda: %s: %s (%d)", e.what, e.name, e.status) }

// Unwrap maps cuDNN's allocation failures (CUDNN_STATUS_ALLOC_FAILED,
// ..._HOST_ALLOCATION_FAILED, ..._DEVICE_ALLOCATION_FAILED) onto
// rt.ErrOutOfMemory.
func (e *dnnError) Unwrap() error {
	if strings.Contains(e.name, "ALLOC") {
		return rt.ErrOutOfMemory
	}
	return nil
}

func checkDnn(s C.cudnnStatus_t, what string) error {
	if s == C.VR_CUDNN_STATUS_SUCCESS {
		return nil
	}
	name := ""
	if p := C.vr_cudnnGetErrorString(s); p != nil {
		name = C.GoString(p)
	}
	if name == "" {
		name = fmt.Sprintf("CUDNN_STATUS_%d", int(s))
	}
	return &dnnError{what: what, status: int(s), name: name}
}

// dnnDevice is a device's cuDNN state.
type dnnDevice struct {
	mu     sync.Mutex
	handle C.cudnnHandle_t // heuristics queries at record time (under mu)
	err    error           // creating handle failed: cuDNN is not used on this device
	last   string          // why cuDNN last refused an eligible Conv (under mu)

	used    atomic.Int64 // Convs recorded through cuDNN
	fused   atomic.Int64 // of those, with the bias and activation in the cuDNN call
	refused atomic.Int64 // eligible Convs cuDNN refused at setup (the built-in kernel ran)
}

// dnnRelease destroys the device's query handle; the context is current.
func (d *Device) dnnRelease() {
	d.dnn.mu.Lock()
	defer d.dnn.mu.Unlock()
	if d.dnn.handle != nil {
		C.vr_cudnnDestroy(d.dnn.handle)
		d.dnn.handle = nil
	}
}

// dnnConv is a cuDNN convolution recorded as a launch.
type dnnConv struct {
	c       C.vr_dnn_conv
	x, w, y uint64
	beta    float64
	bias    uint64 // with c's bias and activation descriptors: the fused call
	z       uint64 // the fused call's residual, or 0
}

// dnnAlgoMask is the set of forward algorithms vrun lets cuDNN pick:
// IMPLICIT_GEMM (0), IMPLICIT_PRECOMP_GEMM (1), GEMM (2), DIRECT (3) and
// the fused WINOGRAD (6). FFT (4), FFT_TILING (5) and WINOGRAD_NONFUSED
// (7) are left out: their transforms add rounding error well beyond a
// direct dot product's, which the CPU-matching tolerances do not allow.
const dnnAlgoMask = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<6

// dnnWorkspaceLimit bounds one Conv's workspace; algorithms needing more
// are skipped.
const dnnWorkspaceLimit = 256 << 20

// dnnOutDim is cuDNN's output size for symmetric padding, or -1 when the
// padded input is shorter than the dilated kernel.
func dnnOutDim(in, k, pad, stride, dil int) int {
	span := in + 2*pad - dil*(k-1) - 1
	if span < 0 {
		return -1
	}
	return span/stride + 1
}

// dnnEligible reports whether cuDNN computes exactly what rt.Conv asks.
// cuDNN pads both sides of each axis by the same amount (PadT, PadL). The
// op's bottom/right pads are implied by OH/OW, and every output element
// depends only on PadT/PadL (its window starts at oh*StrideH - PadT;
// positions outside the input are zero), so cuDNN is exact exactly when
// its symmetric-pad output size equals OH and OW. That holds when the
// implied pads are equal, and also when they differ only by slack that a
// stride > 1 never reaches (e.g. pads 1 top / 0 bottom, 3x3 kernel,
// stride 2, even H: the same OH as 1/1, the last window ending inside the
// input); any other asymmetric pad runs on the built-in kernel.
func dnnEligible(o *rt.Conv) bool {
	switch o.X.DType {
	case rt.F32, rt.F64, rt.F16:
	default:
		return false
	}
	if o.N <= 0 || o.C <= 0 || o.H <= 0 || o.Width <= 0 || o.K <= 0 || o.KH <= 0 || o.KW <= 0 ||
		o.OH <= 0 || o.OW <= 0 || o.Groups <= 0 || o.C%o.Groups != 0 || o.K%o.Groups != 0 {
		return false
	}
	if o.StrideH <= 0 || o.StrideW <= 0 || o.DilH <= 0 || o.DilW <= 0 || o.PadT < 0 || o.PadL < 0 {
		return false
	}
	if !fitsInt32(o.N, o.C, o.H, o.Width, o.K, o.KH, o.KW, o.OH, o.OW, o.PadT, o.PadL) {
		return false
	}
	return dnnOutDim(o.H, o.KH, o.PadT, o.StrideH, o.DilH) == o.OH &&
		dnnOutDim(o.Width, o.KW, o.PadL, o.StrideW, o.DilW) == o.OW
}

// addr returns the device address of r without recording the buffer.
func (l *lowering) addr(r rt.Ref) (uint64, bool) {
	b, err := l.d.bufferOf(r.Buf)
	if err != nil {
		return 0, false
	}
	p, err := b.devptr()
	if err != nil {
		return 0, false
	}
	return p + uint64(r.Off), true
}

// dnnConv records o through cuDNN and reports true, or reports false
// (having recorded nothing) when o must run on the built-in kernel.
func (l *lowering) dnnConv(o *rt.Conv) bool {
	d := l.d
	if l.err != nil || !dnnEligible(o) || !useCudnn() || loadCudnn() != nil {
		return false
	}
	x, okx := l.addr(o.X)
	w, okw := l.addr(o.W)
	y, oky := l.addr(o.Y)
	// cuDNN's vectorized kernels assume 16-byte aligned tensors.
	if !okx || !okw || !oky || (x|w|y)%16 != 0 {
		return false
	}
	c := &dnnConv{x: x, w: w, y: y}
	if err := d.dnnSetup(o, &c.c); err != nil {
		d.dnn.refused.Add(1)
		d.dnn.mu.Lock()
		d.dnn.last = err.Error()
		d.dnn.mu.Unlock()
		return false
	}
	l.ptr(o.X)
	l.ptr(o.W)
	l.ptr(o.Y)
	dt := o.X.DType
	yv := o.Y
	yv.Shape, yv.Strides = []int{o.N, o.K, o.OH * o.OW}, nil
	act := o.Act.Fn != rt.Copy
	if fused, resDone, actDone := l.dnnFuse(o, c); fused {
		l.out = append(l.out, launch{kernel: -1, dnn: c})
		if !resDone {
			l.dnnRes(o)
		}
		act = act && !actDone
	} else {
		if o.Bias.Buf != nil {
			bv := o.Bias
			bv.Shape, bv.Strides = yv.Shape, []int{0, 1, 0}
			l.ew(o, kEwCopy, yv.Shape, []rt.Ref{bv, yv}, 0, 0, 0, 0)
			c.beta = 1
		}
		l.out = append(l.out, launch{kernel: -1, dnn: c})
		l.dnnRes(o)
	}
	if act {
		l.ew(o, unaryKernel(dt), yv.Shape, []rt.Ref{yv, yv}, int64(o.Act.Fn), o.Act.Alpha, o.Act.Beta, 0)
	}
	if l.err != nil { // the op fails to record: nothing will free c
		C.vr_dnn_conv_free(&c.c)
		return true
	}
	d.dnn.used.Add(1)
	return true
}

// dnnCanFuse reports whether the loaded cuDNN has the fused conv + bias +
// activation entry point.
func dnnCanFuse() bool {
	return loadCudnn() == nil && C.vr_dnn[C.VR_cudnnConvolutionBiasActivationForward] != nil
}

// dnnRes records Y += Res, in place, when o has a residual (that the
// convolution call did not add).
func (l *lowering) dnnRes(o *rt.Conv) {
	if o.Res.Buf == nil {
		return
	}
	n := int(rt.Extent(o.N, o.K, o.OH, o.OW))
	yv, rv := o.Y, o.Res
	yv.Shape, yv.Strides = []int{n}, nil
	rv.Shape, rv.Strides = []int{n}, nil
	k := kEwBinaryF
	if o.X.DType == rt.F64 {
		k = kEwBinaryD
	}
	l.ew(o, k, yv.Shape, []rt.Ref{yv, rv, yv}, int64(rt.Add), 0, 0, 0)
}

// dnnFuseEnv is the environment variable that turns the fused cuDNN call
// off ("0") or limits it to a bias with a ReLU or no activation and no
// residual ("1").
const dnnFuseEnv = "VRUN_CUDA_CUDNN_FUSE"

// dnnFuse prepares c to add o's bias in the convolution call, with o's
// residual (resDone) and its activation (actDone) where the call can take
// them, and reports whether it did (fused): with a bias, the entry points
// present and the bias 16-byte aligned. The call adds a 16-byte aligned
// residual as its Z, and applies a ReLU, or the identity where cuDNN
// picked IMPLICIT_PRECOMP_GEMM (the only algorithm that allows it); a
// ReLU is left to the caller when the residual is (it comes after the
// Add). With VRUN_CUDA_CUDNN_FUSE=1 the call takes a residual never and
// an activation only without one, and a Conv with another activation and
// no residual stays unfused.
func (l *lowering) dnnFuse(o *rt.Conv, c *dnnConv) (fused, resDone, actDone bool) {
	env := os.Getenv(dnnFuseEnv)
	if o.Bias.Buf == nil || env == "0" {
		return false, false, false
	}
	basic := env == "1"
	hasRes := o.Res.Buf != nil
	if basic && !hasRes && o.Act.Fn != rt.Relu && o.Act.Fn != rt.Copy {
		return false, false, false
	}
	var z uint64
	if hasRes && !basic {
		if r, ok := l.addr(o.Res); ok && r%16 == 0 {
			z = r
		}
	}
	resDone = !hasRes || z != 0
	mode := C.int(C.VR_CUDNN_ACTIVATION_IDENTITY)
	if resDone && o.Act.Fn == rt.Relu {
		mode = C.VR_CUDNN_ACTIVATION_RELU
	}
	b, ok := l.addr(o.Bias)
	if !ok || b%16 != 0 || C.vr_dnn_conv_fuse(&c.c, C.int(o.K), mode) != 0 {
		return false, false, false
	}
	l.ptr(o.Bias)
	c.bias = b
	if z != 0 {
		l.ptr(o.Res)
		c.z = z
	}
	l.d.dnn.fused.Add(1)
	return true, resDone, resDone && (o.Act.Fn == rt.Relu || o.Act.Fn == rt.Copy)
}

// dnnSetup creates c's descriptors and picks its algorithm with the
// device's query handle (created on first use).
func (d *Device) dnnSetup(o *rt.Conv, c *C.vr_dnn_conv) error {
	d.dnn.mu.Lock()
	defer d.dnn.mu.Unlock()
	if d.dnn.err != nil {
		return d.dnn.err
	}
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	if d.dnn.handle == nil {
		if err := checkDnn(C.vr_cudnnCreate(&d.dnn.handle), "cudnnCreate"); err != nil {
			d.dnn.handle = nil
			d.dnn.err = err
			return err
		}
	}
	// Data and compute types: f32 and f64 compute in their own precision;
	// f16 data computes in f32 (cuDNN's PSEUDO_HALF_CONFIG), like the CPU.
	// Math: f16 may use tensor cores (f16 products are exact in f32); f32
	// is restricted to FMA kernels (no TF32) unless VRUN_CUDA_TF32=1; f64
	// keeps the default (FP64 tensor cores are full precision).
	var dtype, compute, mathType C.int
	noTensorOps := 0
	switch o.X.DType {
	case rt.F32:
		dtype, compute, mathType = C.VR_CUDNN_DATA_FLOAT, C.VR_CUDNN_DATA_FLOAT, C.VR_CUDNN_FMA_MATH
		if d.tf32 {
			mathType = C.VR_CUDNN_TENSOR_OP_MATH
		} else {
			noTensorOps = 1
		}
	case rt.F16:
		dtype, compute, mathType = C.VR_CUDNN_DATA_HALF, C.VR_CUDNN_DATA_FLOAT, C.VR_CUDNN_TENSOR_OP_MATH
	case rt.F64:
		dtype, compute, mathType = C.VR_CUDNN_DATA_DOUBLE, C.VR_CUDNN_DATA_DOUBLE, C.VR_CUDNN_DEFAULT_MATH
	default:
		return fmt.Errorf("cudnn: dtype %s", o.X.DType)
	}
	var step *C.char
	ci := func(v int) C.int { return C.int(v) }
	st := C.vr_dnn_conv_setup(d.dnn.handle, c, dtype, compute, mathType,
		ci(o.N), ci(o.C), ci(o.H), ci(o.Width), ci(o.K), ci(o.KH), ci(o.KW), ci(o.OH), ci(o.OW),
		ci(o.PadT), ci(o.PadL), ci(o.StrideH), ci(o.StrideW), ci(o.DilH), ci(o.DilW), ci(o.Groups),
		C.uint(dnnAlgoMask), C.int(noTensorOps), C.size_t(dnnWorkspaceLimit), &step)
	what := "cudnn setup"
	if step != nil {
		what = C.GoString(step)
	}
	if st != C.VR_CUDNN_STATUS_SUCCESS {
		return checkDnn(st, what)
	}
	if step != nil {
		return errors.New("cudnn: " + what)
	}
	return nil
}

// dnnStream is a stream's cuDNN state: its handle, bound to the stream's
// CUstream, and its workspace.
type dnnStream struct {
	handle C.cudnnHandle_t
	ws     C.CUdeviceptr
	wsSize int64
}

// dnnPrepare creates the stream's cuDNN handle and grows its workspace
// for the recorded Convs. It runs before any capture, with the context
// current and no Submit pending (the old workspace is unused).
func (s *Stream) dnnPrepare() error {
	need := int64(-1)
	for i := range s.cmds {
		for _, l := range s.cmds[i].launches {
			if l.dnn != nil {
				need = max(need, int64(l.dnn.c.ws))
			}
		}
	}
	if need < 0 {
		return nil
	}
	if s.dnn.handle == nil {
		if err := checkDnn(C.vr_cudnnCreate(&s.dnn.handle), "cudnnCreate"); err != nil {
			s.dnn.handle = nil
			return err
		}
	}
	if err := checkDnn(C.vr_cudnnSetStream(s.dnn.handle, s.cs), "cudnnSetStream"); err != nil {
		return err
	}
	if need > s.dnn.wsSize {
		if s.dnn.ws != 0 {
			C.vr_cuMemFree(s.dnn.ws)
			s.dnn.ws, s.dnn.wsSize = 0, 0
		}
		n := (need + 1<<20 - 1) &^ (1<<20 - 1)
		var p C.CUdeviceptr
		if err := check(C.vr_cuMemAlloc(&p, C.size_t(n)), "cuMemAlloc_v2 (cuDNN workspace)"); err != nil {
			if errors.Is(err, rt.ErrOutOfMemory) {
				return &rt.OOMError{Backend: BackendName, Request: n, Heap: "device memory of " + s.dev.info.Spec(),
					Detail: "cuDNN convolution workspace: " + err.Error()}
			}
			return err
		}
		s.dnn.ws, s.dnn.wsSize = p, n
	}
	return nil
}

// issueDnn enqueues one cuDNN convolution on the stream (captured or not).
func (s *Stream) issueDnn(c *dnnConv) error {
	var ws C.CUdeviceptr
	if c.c.ws > 0 {
		ws = s.dnn.ws
	}
	if c.c.act != nil {
		return checkDnn(C.vr_dnn_conv_run_fused(s.dnn.handle, &c.c, C.CUdeviceptr(c.x), C.CUdeviceptr(c.w),
			C.CUdeviceptr(c.bias), C.CUdeviceptr(c.z), C.CUdeviceptr(c.y), ws, c.c.ws), "cudnnConvolutionBiasActivationForward")
	}
	return checkDnn(C.vr_dnn_conv_run(s.dnn.handle, &c.c, C.CUdeviceptr(c.x), C.CUdeviceptr(c.w), C.CUdeviceptr(c.y),
		ws, c.c.ws, C.double(c.beta)), "cudnnConvolutionForward")
}

// dnnDropCmds destroys the descriptors of the recorded Convs (host
// objects: no context needed). Call it before discarding s.cmds.
func (s *Stream) dnnDropCmds() {
	for i := range s.cmds {
		for _, l := range s.cmds[i].launches {
			if l.dnn != nil {
				C.vr_dnn_conv_free(&l.dnn.c)
			}
		}
	}
}

// dnnClose destroys the stream's handle and workspace; the context is
// current and the stream idle.
func (s *Stream) dnnClose() {
	if s.dnn.handle != nil {
		C.vr_cudnnDestroy(s.dnn.handle)
		s.dnn.handle = nil
	}
	if s.dnn.ws != 0 {
		C.vr_cuMemFree(s.dnn.ws)
		s.dnn.ws, s.dnn.wsSize = 0, 0
	}
}
