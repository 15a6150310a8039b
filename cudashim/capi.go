//go:build cgo

package cudashim

/*
#cgo linux LDFLAGS: -ldl
#cgo freebsd LDFLAGS: -ldl
#define VR_DEFINE_TABLES
#include "cuda_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// cuNames and blasNames are the entry points looked up in the driver and
// in cuBLAS, in the order of the VR_cu* and VR_cublas* enums of
// cuda_shim.h.
var cuNames = []string{
	"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
	"cuDeviceTotalMem_v2", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
	"cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuMemAlloc_v2", "cuMemFree_v2",
	"cuMemGetInfo_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoHAsync_v2", "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize",
	"cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
	"cuGraphExecDestroy", "cuGraphDestroy", "cuModuleLoadDataEx", "cuModuleGetFunction",
	"cuModuleUnload", "cuLaunchKernel", "cuEventCreate", "cuEventDestroy_v2", "cuEventRecord",
	"cuEventElapsedTime", "cuGetErrorName", "cuGetErrorString", "cuMemcpyDtoDAsync_v2",
	"cuStreamWaitEvent",
}

var blasNames = []string{
	"cublasCreate_v2", "cublasDestroy_v2", "cublasGetVersion_v2", "cublasSetStream_v2",
	"cublasSetWorkspace_v2", "cublasSetMathMode", "cublasSgemmStridedBatched",
	"cublasDgemmStridedBatched", "cublasGemmStridedBatchedEx",
}

// optionalBlas are cuBLAS entry points that may be missing (older
// releases); the backend works without them.
var optionalBlas = map[string]bool{"cublasSetWorkspace_v2": true}

func init() {
	if len(cuNames) != int(C.VR_CU_COUNT) || len(blasNames) != int(C.VR_BL_COUNT) {
		panic("cudashim: symbol tables out of sync with cuda_shim.h")
	}
}

func driverLibNames() []string {
	if runtime.GOOS == "windows" {
		return []string{"nvcuda.dll"}
	}
	return []string{"libcuda.so.1", "libcuda.so"}
}

func blasLibNames() []string {
	if runtime.GOOS == "windows" {
		return []string{"cublas64_13.dll", "cublas64_12.dll", "cublas64_11.dll"}
	}
	return []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
}

func dlopen(name string) unsafe.Pointer {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.vr_open(cn)
}

func dlsym(h unsafe.Pointer, name string) unsafe.Pointer {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.vr_sym(h, cn)
}

// loadDriver opens the CUDA driver library and resolves every entry point.
func loadDriver() (string, error) {
	names := driverLibNames()
	var h unsafe.Pointer
	var lib string
	for _, n := range names {
		if h = dlopen(n); h != nil {
			lib = n
			break
		}
	}
	if h == nil {
		return "", fmt.Errorf("cuda: no CUDA driver found (could not load %s): %w", strings.Join(names, " or "), rt.ErrUnavailable)
	}
	for i, n := range cuNames {
		p := dlsym(h, n)
		if p == nil {
			return "", fmt.Errorf("cuda: %s lacks %s (driver too old): %w", lib, n, rt.ErrUnavailable)
		}
		C.vr_set_cu(C.int(i), p)
	}
	return lib, nil
}

// loadBlas opens cuBLAS (newest first) and resolves its entry points.
func loadBlas() (string, error) {
	names := blasLibNames()
	var errs []string
	for _, n := range names {
		h := dlopen(n)
		if h == nil {
			continue
		}
		ok := true
		ptrs := make([]unsafe.Pointer, len(blasNames))
		for i, s := range blasNames {
			ptrs[i] = dlsym(h, s)
			if ptrs[i] == nil && !optionalBlas[s] {
				errs = append(errs, fmt.Sprintf("%s lacks %s", n, s))
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for i, p := range ptrs {
			C.vr_set_bl(C.int(i), p)
		}
		return n, nil
	}
	msg := "could not load " + strings.Join(names, ", ")
	if len(errs) > 0 {
		msg += " (" + strings.Join(errs, "; ") + ")"
	}
	return "", fmt.Errorf("cuda: cuBLAS unavailable: %s; set VRUN_CUDA_CUBLAS=0 to run without it: %w", msg, rt.ErrUnavailable)
}

// CUDA driver result codes the backend branches on.
const (
	cuSuccess          = 0
	cuErrOutOfMemory   = 2
	cuErrNotInit       = 3
	cuErrDeinit        = 4
	cuErrNoDevice      = 100
	cuErrECC           = 214
	cuErrIllegalAddr   = 700
	cuErrLaunchTimeout = 702
	cuErrHWStack       = 714
	cuErrIllegalInstr  = 715
	cuErrMisaligned    = 716
	cuErrAddrSpace     = 717
	cuErrInvalidPC     = 718
	cuErrLaunchFailed  = 719
	cuErrCtxDestroyed  = 709
)

// cuError is a failed driver call.
type cuError struct {
	what string // the call: "cuMemAlloc_v2"
	code int
	name string // "CUDA_ERROR_ILLEGAL_ADDRESS"
	desc string
}

func (e *cuError) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.what, e.name, e.code)
	if e.desc != "" {
		s += ": " + e.desc
	}
	return s
}

// Unwrap maps the error class onto the rt sentinels.
func (e *cuError) Unwrap() error {
	switch {
	case e.code == cuErrOutOfMemory:
		return rt.ErrOutOfMemory
	case deviceLostCode(e.code):
		return rt.ErrDeviceLost
	case e.code == cuErrNoDevice || e.code == cuErrNotInit || e.code == cuErrDeinit:
		return rt.ErrUnavailable
	}
	return nil
}

// deviceLostCode reports whether code leaves the context unusable.
func deviceLostCode(code int) bool {
	switch code {
	case cuErrECC, cuErrIllegalAddr, cuErrLaunchTimeout, cuErrHWStack, cuErrIllegalInstr,
		cuErrMisaligned, cuErrAddrSpace, cuErrInvalidPC, cuErrLaunchFailed, cuErrCtxDestroyed:
		return true
	}
	return false
}

// check turns a CUresult into an error naming the call.
func check(r C.CUresult, what string) error {
	if r == cuSuccess {
		return nil
	}
	var name, desc *C.char
	C.vr_error_text(r, &name, &desc)
	e := &cuError{what: what, code: int(r), name: "CUDA_ERROR_" + fmt.Sprint(int(r))}
	if name != nil {
		e.name = C.GoString(name)
	}
	if desc != nil {
		e.desc = C.GoString(desc)
	}
	return e
}

// blasError is a failed cuBLAS call.
type blasError struct {
	what   string
	status int
}

var blasStatusNames = map[int]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func (e *blasError) Error() string {
	n := blasStatusNames[e.status]
	if n == "" {
		n = fmt.Sprintf("status %d", e.status)
	}
	return fmt.Sprintf("cuda: %s: %s", e.what, n)
}

func (e *blasError) Unwrap() error {
	if e.status == 3 {
		return rt.ErrOutOfMemory
	}
	return nil
}

func checkBlas(s C.cublasStatus_t, what string) error {
	if s == 0 {
		return nil
	}
	return &blasError{what: what, status: int(s)}
}

// ---- thin Go wrappers ----

func cuInit() error { return check(C.vr_cuInit(), "cuInit") }

func cuDriverVersion() int {
	var v C.int
	if C.vr_cuDriverGetVersion(&v) != cuSuccess {
		return 0
	}
	return int(v)
}

func cuDeviceCount() (int, error) {
	var n C.int
	if err := check(C.vr_cuDeviceGetCount(&n), "cuDeviceGetCount"); err != nil {
		return 0, err
	}
	return int(n), nil
}

func cuDevice(i int) (C.CUdevice, error) {
	var d C.CUdevice
	return d, check(C.vr_cuDeviceGet(&d, C.int(i)), "cuDeviceGet")
}

func cuDeviceName(d C.CUdevice) string {
	var buf [256]C.char
	if C.vr_cuDeviceGetName(&buf[0], C.int(len(buf)), d) != cuSuccess {
		return "unknown NVIDIA GPU"
	}
	return C.GoString(&buf[0])
}

func cuDeviceTotalMem(d C.CUdevice) int64 {
	var n C.size_t
	if C.vr_cuDeviceTotalMem(&n, d) != cuSuccess {
		return 0
	}
	return int64(n)
}

// CUdevice_attribute values.
const (
	attrMaxSharedPerBlock = 8
	attrClockRate         = 13
	attrMultiprocessors   = 16
	attrIntegrated        = 18
	attrCCMajor           = 75
	attrCCMinor           = 76
	attrMaxSharedOptin    = 97
)

func cuAttr(d C.CUdevice, a int) int {
	var v C.int
	if C.vr_cuDeviceGetAttribute(&v, C.int(a), d) != cuSuccess {
		return 0
	}
	return int(v)
}

func cuCtxSetCurrent(c C.CUcontext) error {
	return check(C.vr_cuCtxSetCurrent(c), "cuCtxSetCurrent")
}

func cuMemInfo() (free, total int64) {
	var f, t C.size_t
	if C.vr_cuMemGetInfo(&f, &t) != cuSuccess {
		return 0, 0
	}
	return int64(f), int64(t)
}

// ptxOverride is the environment variable naming a PTX file that replaces
// the embedded one (kernel development).
const ptxOverride = "VRUN_CUDA_PTX"

// kernelPTX returns the PTX to load and where it came from.
func kernelPTX() (string, string, error) {
	if p := os.Getenv(ptxOverride); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("cuda: %s: %w", ptxOverride, err)
		}
		return string(b), p, nil
	}
	if PTXIsPlaceholder() {
		return "", "", fmt.Errorf("cudashim: embedded PTX is a placeholder; run cudashim/kernels/build.sh on a machine with nvcc: %w", rt.ErrUnavailable)
	}
	return embeddedPTX, "embedded", nil
}

// indexedPTXOverride is the environment variable naming a PTX file that
// replaces the embedded indexed.ptx (kernel development).
const indexedPTXOverride = "VRUN_CUDA_INDEXED_PTX"

// indexedPTX returns the PTX of the indexed module and where it came from,
// or "" while the embedded indexed.ptx is the placeholder.
func indexedPTX() (string, string, error) {
	if p := os.Getenv(indexedPTXOverride); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("cuda: %s: %w", indexedPTXOverride, err)
		}
		return string(b), p, nil
	}
	if IndexedPTXIsPlaceholder() {
		return "", "placeholder", nil
	}
	return embeddedIndexedPTX, "embedded", nil
}

// optimPTXOverride is the environment variable naming a PTX file that
// replaces the embedded optim.ptx (kernel development).
const optimPTXOverride = "VRUN_CUDA_OPTIM_PTX"

// optimPTX returns the PTX of the optim module and where it came from, or
// "" while the embedded optim.ptx is the placeholder.
func optimPTX() (string, string, error) {
	if p := os.Getenv(optimPTXOverride); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", fmt.Errorf("cuda: %s: %w", optimPTXOverride, err)
		}
		return string(b), p, nil
	}
	if OptimPTXIsPlaceholder() {
		return "", "placeholder", nil
	}
	return embeddedOptimPTX, "embedded", nil
}

// moduleLoad JIT-compiles ptx in the current context.
func moduleLoad(ptx string) (C.CUmodule, error) {
	cs := C.CString(ptx)
	defer C.free(unsafe.Pointer(cs))
	var log [8192]C.char
	var m C.CUmodule
	err := check(C.vr_module_load(&m, cs, &log[0], C.size_t(len(log))), "cuModuleLoadDataEx")
	if err != nil {
		if s := strings.TrimSpace(C.GoString(&log[0])); s != "" {
			err = fmt.Errorf("%w\nJIT log:\n%s", err, s)
		}
		return nil, err
	}
	return m, nil
}

// moduleLoadFatbin loads a fatbin in the current context: the driver picks
// the cubin for the current GPU, with no JIT, or fails (typically
// CUDA_ERROR_NO_BINARY_FOR_GPU) when none fits.
func moduleLoadFatbin(fb []byte) (C.CUmodule, error) {
	if len(fb) == 0 {
		return nil, errors.New("cuda: empty fatbin")
	}
	img := C.CBytes(fb)
	defer C.free(img)
	var log [8192]C.char
	var m C.CUmodule
	err := check(C.vr_module_load(&m, (*C.char)(img), &log[0], C.size_t(len(log))), "cuModuleLoadDataEx")
	if err != nil {
		if s := strings.TrimSpace(C.GoString(&log[0])); s != "" {
			err = fmt.Errorf("%w\nlog:\n%s", err, s)
		}
		return nil, err
	}
	return m, nil
}

func moduleFunction(m C.CUmodule, name string) (C.CUfunction, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var f C.CUfunction
	if err := check(C.vr_cuModuleGetFunction(&f, m, cn), "cuModuleGetFunction("+name+")"); err != nil {
		return nil, err
	}
	return f, nil
}

var errNoCublasWorkspace = errors.New("cublasSetWorkspace unavailable")
