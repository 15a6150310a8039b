//go:build cgo

package clshim

/*
#cgo linux LDFLAGS: -ldl
#cgo freebsd LDFLAGS: -ldl
#cgo netbsd LDFLAGS: -ldl

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#define VR_CALL __stdcall
#else
#include <dlfcn.h>
#define VR_CALL
#endif

// The few OpenCL types this package uses, declared here so that building
// needs no OpenCL headers (they match cl.h / cl_platform.h).
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef void* cl_platform_id;
typedef void* cl_device_id;
typedef void* cl_context;
typedef void* cl_command_queue;
typedef void* cl_mem;
typedef void* cl_program;
typedef void* cl_kernel;
typedef void* cl_event;

#define CL_SUCCESS 0

typedef cl_int (VR_CALL *p_clGetPlatformIDs)(cl_uint, cl_platform_id*, cl_uint*);
typedef cl_int (VR_CALL *p_clGetPlatformInfo)(cl_platform_id, cl_uint, size_t, void*, size_t*);
typedef cl_int (VR_CALL *p_clGetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id*, cl_uint*);
typedef cl_int (VR_CALL *p_clGetDeviceInfo)(cl_device_id, cl_uint, size_t, void*, size_t*);
typedef cl_context (VR_CALL *p_clCreateContext)(const intptr_t*, cl_uint, const cl_device_id*, void*, void*, cl_int*);
typedef cl_int (VR_CALL *p_clReleaseContext)(cl_context);
typedef cl_command_queue (VR_CALL *p_clCreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int*);
typedef cl_int (VR_CALL *p_clReleaseCommandQueue)(cl_command_queue);
typedef cl_mem (VR_CALL *p_clCreateBuffer)(cl_context, cl_bitfield, size_t, void*, cl_int*);
typedef cl_int (VR_CALL *p_clReleaseMemObject)(cl_mem);
typedef cl_program (VR_CALL *p_clCreateProgramWithSource)(cl_context, cl_uint, const char**, const size_t*, cl_int*);
typedef cl_program (VR_CALL *p_clCreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id*, const size_t*, const unsigned char**, cl_int*, cl_int*);
typedef cl_int (VR_CALL *p_clBuildProgram)(cl_program, cl_uint, const cl_device_id*, const char*, void*, void*);
typedef cl_int (VR_CALL *p_clGetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void*, size_t*);
typedef cl_int (VR_CALL *p_clGetProgramInfo)(cl_program, cl_uint, size_t, void*, size_t*);
typedef cl_int (VR_CALL *p_clReleaseProgram)(cl_program);
typedef cl_kernel (VR_CALL *p_clCreateKernel)(cl_program, const char*, cl_int*);
typedef cl_int (VR_CALL *p_clSetKernelArg)(cl_kernel, cl_uint, size_t, const void*);
typedef cl_int (VR_CALL *p_clReleaseKernel)(cl_kernel);
typedef cl_int (VR_CALL *p_clEnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t*, const size_t*, const size_t*, cl_uint, const cl_event*, cl_event*);
typedef cl_int (VR_CALL *p_clEnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void*, cl_uint, const cl_event*, cl_event*);
typedef cl_int (VR_CALL *p_clEnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void*, cl_uint, const cl_event*, cl_event*);
typedef cl_int (VR_CALL *p_clEnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event*, cl_event*);
typedef void* (VR_CALL *p_clEnqueueMapBuffer)(cl_command_queue, cl_mem, cl_uint, cl_bitfield, size_t, size_t, cl_uint, const cl_event*, cl_event*, cl_int*);
typedef cl_int (VR_CALL *p_clEnqueueUnmapMemObject)(cl_command_queue, cl_mem, void*, cl_uint, const cl_event*, cl_event*);
typedef cl_int (VR_CALL *p_clFinish)(cl_command_queue);
typedef cl_int (VR_CALL *p_clFlush)(cl_command_queue);
typedef cl_int (VR_CALL *p_clGetEventProfilingInfo)(cl_event, cl_uint, size_t, void*, size_t*);
typedef cl_int (VR_CALL *p_clGetEventInfo)(cl_event, cl_uint, size_t, void*, size_t*);
typedef cl_int (VR_CALL *p_clReleaseEvent)(cl_event);

#define VR_FUNCS(X) \
	X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) \
	X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) \
	X(clCreateBuffer) X(clReleaseMemObject) X(clCreateProgramWithSource) \
	X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramBuildInfo) \
	X(clGetProgramInfo) X(clReleaseProgram) X(clCreateKernel) X(clSetKernelArg) \
	X(clReleaseKernel) X(clEnqueueNDRangeKernel) X(clEnqueueWriteBuffer) \
	X(clEnqueueReadBuffer) X(clFinish) X(clFlush) X(clGetEventProfilingInfo) \
	X(clGetEventInfo) X(clReleaseEvent) X(clEnqueueCopyBuffer) X(clEnqueueMapBuffer) \
	X(clEnqueueUnmapMemObject)

#define VR_DECL(f) static p_##f vr_##f;
VR_FUNCS(VR_DECL)

static void* vr_sym(void* h, const char* name) {
#ifdef _WIN32
	return (void*)GetProcAddress((HMODULE)h, name);
#else
	return dlsym(h, name);
#endif
}

// vr_load opens the ICD loader and resolves every function. It returns
// NULL on success, or the name of what failed: "" when the library cannot
// be opened, the missing symbol otherwise.
static const char* vr_load(const char* lib) {
#ifdef _WIN32
	void* h = (void*)LoadLibraryA(lib);
#else
	void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
#endif
	if (!h) return "";
#define VR_LOAD(f) vr_##f = (p_##f)vr_sym(h, #f); if (!vr_##f) return #f;
	VR_FUNCS(VR_LOAD)
	return NULL;
}

static cl_int vr_get_platforms(cl_uint n, cl_platform_id* p, cl_uint* np) { return vr_clGetPlatformIDs(n, p, np); }
static cl_int vr_platform_info(cl_platform_id p, cl_uint param, size_t n, void* v, size_t* ret) { return vr_clGetPlatformInfo(p, param, n, v, ret); }
static cl_int vr_get_devices(cl_platform_id p, cl_bitfield t, cl_uint n, cl_device_id* d, cl_uint* nd) { return vr_clGetDeviceIDs(p, t, n, d, nd); }
static cl_int vr_device_info(cl_device_id d, cl_uint param, size_t n, void* v, size_t* ret) { return vr_clGetDeviceInfo(d, param, n, v, ret); }
static cl_context vr_create_context(cl_platform_id p, cl_device_id d, cl_int* err) {
	intptr_t props[3] = { 0x1084, (intptr_t)p, 0 }; // CL_CONTEXT_PLATFORM
	return vr_clCreateContext(props, 1, &d, NULL, NULL, err);
}
static cl_int vr_release_context(cl_context c) { return vr_clReleaseContext(c); }
static cl_command_queue vr_create_queue(cl_context c, cl_device_id d, cl_bitfield props, cl_int* err) { return vr_clCreateCommandQueue(c, d, props, err); }
static cl_int vr_release_queue(cl_command_queue q) { return vr_clReleaseCommandQueue(q); }
static cl_mem vr_create_buffer(cl_context c, size_t size, cl_int* err) { return vr_clCreateBuffer(c, 1, size, NULL, err); }
static cl_int vr_release_mem(cl_mem m) { return vr_clReleaseMemObject(m); }
static cl_program vr_program_source(cl_context c, const char* src, size_t n, cl_int* err) { return vr_clCreateProgramWithSource(c, 1, &src, &n, err); }
static cl_program vr_program_binary(cl_context c, cl_device_id d, const unsigned char* bin, size_t n, cl_int* status, cl_int* err) {
	return vr_clCreateProgramWithBinary(c, 1, &d, &n, &bin, status, err);
}
static cl_int vr_build(cl_program p, cl_device_id d, const char* opts) { return vr_clBuildProgram(p, 1, &d, opts, NULL, NULL); }
static cl_int vr_build_info(cl_program p, cl_device_id d, cl_uint param, size_t n, void* v, size_t* ret) { return vr_clGetProgramBuildInfo(p, d, param, n, v, ret); }
// vr_program_binary_of copies the binary of a one-device program into buf
// (when buf is non-NULL) and returns its size in *size.
static cl_int vr_program_binary_of(cl_program p, unsigned char* buf, size_t* size) {
	cl_int e = vr_clGetProgramInfo(p, 0x1165, sizeof(size_t), size, NULL); // CL_PROGRAM_BINARY_SIZES
	if (e != CL_SUCCESS || buf == NULL) return e;
	unsigned char* bins[1] = { buf };
	return vr_clGetProgramInfo(p, 0x1166, sizeof(bins), bins, NULL); // CL_PROGRAM_BINARIES
}
static cl_int vr_release_program(cl_program p) { return vr_clReleaseProgram(p); }
static cl_kernel vr_create_kernel(cl_program p, const char* name, cl_int* err) { return vr_clCreateKernel(p, name, err); }
static cl_int vr_set_arg(cl_kernel k, cl_uint i, size_t n, const void* v) { return vr_clSetKernelArg(k, i, n, v); }
static cl_int vr_set_arg_mem(cl_kernel k, cl_uint i, cl_mem m) { return vr_clSetKernelArg(k, i, sizeof(cl_mem), &m); }
static cl_int vr_release_kernel(cl_kernel k) { return vr_clReleaseKernel(k); }
static cl_int vr_write(cl_command_queue q, cl_mem m, cl_uint blocking, size_t off, size_t n, const void* src) {
	return vr_clEnqueueWriteBuffer(q, m, blocking, off, n, src, 0, NULL, NULL);
}
static cl_int vr_read(cl_command_queue q, cl_mem m, cl_uint blocking, size_t off, size_t n, void* dst) {
	return vr_clEnqueueReadBuffer(q, m, blocking, off, n, dst, 0, NULL, NULL);
}
static cl_int vr_finish(cl_command_queue q) { return vr_clFinish(q); }
// vr_copy copies n bytes between two buffers and waits.
static cl_int vr_copy(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t dof, size_t n) {
	cl_int e = vr_clEnqueueCopyBuffer(q, src, dst, so, dof, n, 0, NULL, NULL);
	if (e != CL_SUCCESS) return e;
	return vr_clFinish(q);
}
// vr_host_buffer creates a buffer in host memory the driver allocates
// (CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR: pinned on GPU drivers) and
// maps it for reading and writing.
static cl_mem vr_host_buffer(cl_context c, cl_command_queue q, size_t size, void** ptr, cl_int* err) {
	cl_mem m = vr_clCreateBuffer(c, 1 | (1 << 4), size, NULL, err);
	if (*err != CL_SUCCESS) return NULL;
	*ptr = vr_clEnqueueMapBuffer(q, m, 1, 1 | 2, 0, size, 0, NULL, NULL, err);
	if (*err != CL_SUCCESS) { vr_clReleaseMemObject(m); return NULL; }
	return m;
}
static cl_int vr_unmap(cl_command_queue q, cl_mem m, void* p) {
	cl_int e = vr_clEnqueueUnmapMemObject(q, m, p, 0, NULL, NULL);
	if (e != CL_SUCCESS) return e;
	return vr_clFinish(q);
}

// vr_cmd is one recorded command of a stream.
typedef struct {
	int kind;            // 0 write, 1 read, 2 kernel, 3 empty launch
	cl_mem mem;
	size_t off, n;       // copies
	void* host;          // copies: pinned Go memory
	cl_kernel kernel;
	cl_uint dims;
	size_t gws[3], lws[3];
} vr_cmd;

// vr_submit enqueues cmds[0:n] in order on q. When events is non-NULL,
// each kernel launch stores its event there (in order). On failure it
// returns the error and sets *failed to the command index.
static cl_int vr_submit(cl_command_queue q, vr_cmd* cmds, int n, cl_event* events, int* failed) {
	int ev = 0;
	for (int i = 0; i < n; i++) {
		vr_cmd* c = &cmds[i];
		cl_int e = CL_SUCCESS;
		switch (c->kind) {
		case 0: e = vr_clEnqueueWriteBuffer(q, c->mem, 0, c->off, c->n, c->host, 0, NULL, NULL); break;
		case 1: e = vr_clEnqueueReadBuffer(q, c->mem, 0, c->off, c->n, c->host, 0, NULL, NULL); break;
		case 2:
			e = vr_clEnqueueNDRangeKernel(q, c->kernel, c->dims, NULL, c->gws, c->lws, 0, NULL, events ? &events[ev] : NULL);
			ev++;
			break;
		case 3: // an empty launch: no kernel, but a Timings slot
			if (events) events[ev] = NULL;
			ev++;
			break;
		}
		if (e != CL_SUCCESS) { *failed = i; return e; }
	}
	return vr_clFlush(q);
}

// vr_event_times reads start and end of n profiled events into t[2*i],
// t[2*i+1] and releases them. It returns the first error.
static cl_int vr_event_times(cl_event* ev, int n, cl_ulong* t) {
	cl_int first = CL_SUCCESS;
	for (int i = 0; i < n; i++) {
		if (!ev[i]) { t[2*i] = t[2*i+1] = 0; continue; }
		cl_int st = 0;
		vr_clGetEventInfo(ev[i], 0x11D3, sizeof st, &st, NULL); // CL_EVENT_COMMAND_EXECUTION_STATUS
		if (st < 0 && first == CL_SUCCESS) first = st;
		if (vr_clGetEventProfilingInfo(ev[i], 0x1282, sizeof(cl_ulong), &t[2*i], NULL) != CL_SUCCESS) t[2*i] = 0;
		if (vr_clGetEventProfilingInfo(ev[i], 0x1283, sizeof(cl_ulong), &t[2*i+1], NULL) != CL_SUCCESS) t[2*i+1] = 0;
		vr_clReleaseEvent(ev[i]);
		ev[i] = NULL;
	}
	return first;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// Handle types.
type (
	clPlatform = C.cl_platform_id
	clDevice   = C.cl_device_id
	clContext  = C.cl_context
	clQueue    = C.cl_command_queue
	clMem      = C.cl_mem
	clProgram  = C.cl_program
	clKernel   = C.cl_kernel
)

// OpenCL constants used by this package (values from cl.h).
const (
	clDeviceTypeCPU = 1 << 1
	clDeviceTypeGPU = 1 << 2
	clDeviceTypeAll = 0xFFFFFFFF

	clPlatformVersion = 0x0901
	clPlatformName    = 0x0902
	clPlatformVendor  = 0x0903

	clDeviceType              = 0x1000
	clDeviceMaxComputeUnits   = 0x1002
	clDeviceMaxWorkGroupSize  = 0x1004
	clDeviceMaxClockFrequency = 0x100C
	clDeviceMaxMemAllocSize   = 0x1010
	clDeviceGlobalMemSize     = 0x101F
	clDeviceLocalMemSize      = 0x1023
	clDeviceHostUnifiedMemory = 0x1035
	clDeviceName              = 0x102B
	clDeviceVendor            = 0x102C
	clDriverVersion           = 0x102D
	clDeviceVersion           = 0x102F
	clDeviceExtensions        = 0x1030
	clDeviceOpenCLCVersion    = 0x103D
	clDeviceUUIDKHR           = 0x106A // cl_khr_device_uuid

	clQueueProfilingEnable = 1 << 1

	clProgramBuildLog = 0x1183
)

// OpenCL error codes this package names.
const (
	clDeviceNotFound              = -1
	clMemObjectAllocationFailure  = -4
	clOutOfResources              = -5
	clOutOfHostMemory             = -6
	clBuildProgramFailure         = -11
	clExecStatusErrorForEvents    = -14
	clInvalidValue                = -30
	clInvalidCommandQueue         = -36
	clInvalidBinary               = -42
	clInvalidBufferSize           = -61
	clPlatformNotFoundKHR         = -1001
	clInvalidWorkGroupSize        = -54
	clInvalidKernelArgs           = -52
	clInvalidProgramExecutable    = -45
	clInvalidMemObject            = -38
	clInvalidKernelName           = -46
	clInvalidArgSize              = -51
	clInvalidGlobalWorkSize       = -63
	clMisalignedSubBufferOffset   = -13
	clCompilerNotAvailable        = -3
	clInvalidBuildOptions         = -43
	clInvalidOperation            = -59
	clInvalidDevice               = -33
	clInvalidContext              = -34
	clInvalidProgram              = -44
	clInvalidKernel               = -48
	clInvalidArgIndex             = -49
	clInvalidArgValue             = -50
	clInvalidWorkDimension        = -53
	clInvalidWorkItemSize         = -55
	clInvalidEventWaitList        = -57
	clDeviceNotAvailable          = -2
	clProfilingInfoNotAvailable   = -7
	clInvalidPlatform             = -32
	clInvalidHostPtr              = -37
	clInvalidGlobalOffset         = -56
	clInvalidEvent                = -58
	clInvalidProperty             = -64
	clMapFailure                  = -12
	clLinkProgramFailure          = -17
	clInvalidCompilerOptions      = -66
	clInvalidLinkerOptions        = -67
	clInvalidDevicePartitionCount = -68
)

var clErrNames = map[int]string{
	0: "CL_SUCCESS", clDeviceNotFound: "CL_DEVICE_NOT_FOUND", clDeviceNotAvailable: "CL_DEVICE_NOT_AVAILABLE",
	clCompilerNotAvailable: "CL_COMPILER_NOT_AVAILABLE", clMemObjectAllocationFailure: "CL_MEM_OBJECT_ALLOCATION_FAILURE",
	clOutOfResources: "CL_OUT_OF_RESOURCES", clOutOfHostMemory: "CL_OUT_OF_HOST_MEMORY",
	clProfilingInfoNotAvailable: "CL_PROFILING_INFO_NOT_AVAILABLE", clBuildProgramFailure: "CL_BUILD_PROGRAM_FAILURE",
	clMapFailure: "CL_MAP_FAILURE", clMisalignedSubBufferOffset: "CL_MISALIGNED_SUB_BUFFER_OFFSET",
	clExecStatusErrorForEvents: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", clLinkProgramFailure: "CL_LINK_PROGRAM_FAILURE",
	clInvalidValue: "CL_INVALID_VALUE", clInvalidPlatform: "CL_INVALID_PLATFORM", clInvalidDevice: "CL_INVALID_DEVICE",
	clInvalidContext: "CL_INVALID_CONTEXT", clInvalidCommandQueue: "CL_INVALID_COMMAND_QUEUE",
	clInvalidHostPtr: "CL_INVALID_HOST_PTR", clInvalidMemObject: "CL_INVALID_MEM_OBJECT",
	clInvalidBinary: "CL_INVALID_BINARY", clInvalidBuildOptions: "CL_INVALID_BUILD_OPTIONS",
	clInvalidProgram: "CL_INVALID_PROGRAM", clInvalidProgramExecutable: "CL_INVALID_PROGRAM_EXECUTABLE",
	clInvalidKernelName: "CL_INVALID_KERNEL_NAME", clInvalidKernel: "CL_INVALID_KERNEL",
	clInvalidArgIndex: "CL_INVALID_ARG_INDEX", clInvalidArgValue: "CL_INVALID_ARG_VALUE",
	clInvalidArgSize: "CL_INVALID_ARG_SIZE", clInvalidKernelArgs: "CL_INVALID_KERNEL_ARGS",
	clInvalidWorkDimension: "CL_INVALID_WORK_DIMENSION", clInvalidWorkGroupSize: "CL_INVALID_WORK_GROUP_SIZE",
	clInvalidWorkItemSize: "CL_INVALID_WORK_ITEM_SIZE", clInvalidGlobalOffset: "CL_INVALID_GLOBAL_OFFSET",
	clInvalidEventWaitList: "CL_INVALID_EVENT_WAIT_LIST", clInvalidEvent: "CL_INVALID_EVENT",
	clInvalidOperation: "CL_INVALID_OPERATION", clInvalidBufferSize: "CL_INVALID_BUFFER_SIZE",
	clInvalidGlobalWorkSize: "CL_INVALID_GLOBAL_WORK_SIZE", clInvalidProperty: "CL_INVALID_PROPERTY",
	clInvalidCompilerOptions: "CL_INVALID_COMPILER_OPTIONS", clInvalidLinkerOptions: "CL_INVALID_LINKER_OPTIONS",
	clInvalidDevicePartitionCount: "CL_INVALID_DEVICE_PARTITION_COUNT", clPlatformNotFoundKHR: "CL_PLATFORM_NOT_FOUND_KHR",
}

// clError is a failed OpenCL call.
type clError struct {
	Call string
	Code int
}

func (e *clError) Error() string {
	n, ok := clErrNames[e.Code]
	if !ok {
		n = fmt.Sprintf("error %d", e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Call, n)
}

func clErr(call string, code C.cl_int) error {
	if code == C.CL_SUCCESS {
		return nil
	}
	return &clError{Call: call, Code: int(code)}
}

// ---- loader ----

var (
	loadOnce sync.Once
	loadErr  error
)

// libraryNames are the ICD loader names tried, in order, on this OS.
func libraryNames() []string {
	switch runtime.GOOS {
	case "windows":
		return []string{"OpenCL.dll"}
	case "darwin":
		return []string{"/System/Library/Frameworks/OpenCL.framework/OpenCL"}
	}
	return []string{"libOpenCL.so.1", "libOpenCL.so"}
}

// load opens the OpenCL ICD loader once and remembers the outcome.
func load() error {
	loadOnce.Do(func() {
		names := libraryNames()
		var why []string
		for _, n := range names {
			cn := C.CString(n)
			r := C.vr_load(cn)
			C.free(unsafe.Pointer(cn))
			if r == nil {
				return
			}
			if s := C.GoString(r); s != "" {
				why = append(why, fmt.Sprintf("%s lacks %s", n, s))
			} else {
				why = append(why, n+" not found")
			}
		}
		loadErr = fmt.Errorf("opencl: no usable OpenCL ICD loader (tried %s; %s): %w",
			strings.Join(names, ", "), strings.Join(why, "; "), rt.ErrUnavailable)
	})
	return loadErr
}

// ---- info queries ----

func platformString(p clPlatform, param C.cl_uint) string {
	var n C.size_t
	if C.vr_platform_info(p, param, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.vr_platform_info(p, param, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00 ")
}

func deviceString(d clDevice, param C.cl_uint) string {
	var n C.size_t
	if C.vr_device_info(d, param, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.vr_device_info(d, param, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00 ")
}

// deviceUUID reads CL_DEVICE_UUID_KHR (cl_khr_device_uuid), or returns
// zeros.
func deviceUUID(d clDevice) [16]byte {
	var u [16]byte
	var n C.size_t
	if C.vr_device_info(d, clDeviceUUIDKHR, 16, unsafe.Pointer(&u[0]), &n) != C.CL_SUCCESS || n != 16 {
		return [16]byte{}
	}
	return u
}

// deviceUint reads a numeric device parameter of 4 or 8 bytes.
func deviceUint(d clDevice, param C.cl_uint) uint64 {
	var v [8]byte
	var n C.size_t
	if C.vr_device_info(d, param, 8, unsafe.Pointer(&v[0]), &n) != C.CL_SUCCESS {
		return 0
	}
	switch n {
	case 4:
		return uint64(*(*uint32)(unsafe.Pointer(&v[0])))
	case 8:
		return *(*uint64)(unsafe.Pointer(&v[0]))
	}
	return 0
}

// enumerate lists every device of every platform, in platform order.
func enumerate() ([]clPlatform, []clDevice, error) {
	var np C.cl_uint
	if e := C.vr_get_platforms(0, nil, &np); e != C.CL_SUCCESS {
		if e == clPlatformNotFoundKHR {
			return nil, nil, nil
		}
		return nil, nil, clErr("clGetPlatformIDs", e)
	}
	if np == 0 {
		return nil, nil, nil
	}
	plats := make([]clPlatform, np)
	if e := C.vr_get_platforms(np, &plats[0], &np); e != C.CL_SUCCESS {
		return nil, nil, clErr("clGetPlatformIDs", e)
	}
	var ps []clPlatform
	var ds []clDevice
	for _, p := range plats[:np] {
		var nd C.cl_uint
		if e := C.vr_get_devices(p, clDeviceTypeAll, 0, nil, &nd); e != C.CL_SUCCESS || nd == 0 {
			continue
		}
		devs := make([]clDevice, nd)
		if e := C.vr_get_devices(p, clDeviceTypeAll, nd, &devs[0], &nd); e != C.CL_SUCCESS {
			continue
		}
		for _, d := range devs[:nd] {
			ps = append(ps, p)
			ds = append(ds, d)
		}
	}
	return ps, ds, nil
}

// ---- Go wrappers ----

func createContext(p clPlatform, d clDevice) (clContext, error) {
	var e C.cl_int
	c := C.vr_create_context(p, d, &e)
	if e != C.CL_SUCCESS {
		return nil, clErr("clCreateContext", e)
	}
	return c, nil
}

func releaseContext(c clContext) { C.vr_release_context(c) }

func createQueue(c clContext, d clDevice, profile bool) (clQueue, error) {
	var props C.cl_bitfield
	if profile {
		props = clQueueProfilingEnable
	}
	var e C.cl_int
	q := C.vr_create_queue(c, d, props, &e)
	if e != C.CL_SUCCESS {
		return nil, clErr("clCreateCommandQueue", e)
	}
	return q, nil
}

func releaseQueue(q clQueue) { C.vr_release_queue(q) }

func createBuffer(c clContext, size int64) (clMem, int) {
	var e C.cl_int
	m := C.vr_create_buffer(c, C.size_t(size), &e)
	return m, int(e)
}

func releaseMem(m clMem) { C.vr_release_mem(m) }

// writeSync copies src into m at off and returns when done.
func writeSync(q clQueue, m clMem, off int64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return clErr("clEnqueueWriteBuffer", C.vr_write(q, m, 1, C.size_t(off), C.size_t(len(src)), unsafe.Pointer(&src[0])))
}

// readSync copies len(dst) bytes of m at off into dst and returns when done.
func readSync(q clQueue, m clMem, off int64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	return clErr("clEnqueueReadBuffer", C.vr_read(q, m, 1, C.size_t(off), C.size_t(len(dst)), unsafe.Pointer(&dst[0])))
}

func finish(q clQueue) error { return clErr("clFinish", C.vr_finish(q)) }

// copySync copies n bytes from src at so to dst at do and returns when
// done.
func copySync(q clQueue, src, dst clMem, so, do, n int64) error {
	return clErr("clEnqueueCopyBuffer", C.vr_copy(q, src, dst, C.size_t(so), C.size_t(do), C.size_t(n)))
}

// hostBuffer creates a driver-allocated host buffer of size bytes and
// maps it.
func hostBuffer(c clContext, q clQueue, size int64) (clMem, unsafe.Pointer, int) {
	var e C.cl_int
	var p unsafe.Pointer
	m := C.vr_host_buffer(c, q, C.size_t(size), &p, &e)
	return m, p, int(e)
}

// unmapRelease unmaps a host buffer and releases it.
func unmapRelease(q clQueue, m clMem, p unsafe.Pointer) {
	C.vr_unmap(q, m, p)
	releaseMem(m)
}

func buildLog(p clProgram, d clDevice) string {
	var n C.size_t
	if C.vr_build_info(p, d, clProgramBuildLog, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.vr_build_info(p, d, clProgramBuildLog, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(string(buf), "\x00"))
}

// buildSource compiles src for d. A compiler error returns the build log.
func buildSource(c clContext, d clDevice, src, opts string) (clProgram, error) {
	cs := C.CString(src)
	defer C.free(unsafe.Pointer(cs))
	var e C.cl_int
	p := C.vr_program_source(c, cs, C.size_t(len(src)), &e)
	if e != C.CL_SUCCESS {
		return nil, clErr("clCreateProgramWithSource", e)
	}
	co := C.CString(opts)
	defer C.free(unsafe.Pointer(co))
	if e := C.vr_build(p, d, co); e != C.CL_SUCCESS {
		log := buildLog(p, d)
		C.vr_release_program(p)
		return nil, fmt.Errorf("%w; build log:\n%s", clErr("clBuildProgram", e), log)
	}
	return p, nil
}

// buildBinary creates and builds a program from a cached binary.
func buildBinary(c clContext, d clDevice, bin []byte, opts string) (clProgram, error) {
	cb := C.CBytes(bin)
	defer C.free(cb)
	var status, e C.cl_int
	p := C.vr_program_binary(c, d, (*C.uchar)(cb), C.size_t(len(bin)), &status, &e)
	if e != C.CL_SUCCESS || status != C.CL_SUCCESS {
		if p != nil {
			C.vr_release_program(p)
		}
		if e == C.CL_SUCCESS {
			e = status
		}
		return nil, clErr("clCreateProgramWithBinary", e)
	}
	co := C.CString(opts)
	defer C.free(unsafe.Pointer(co))
	if e := C.vr_build(p, d, co); e != C.CL_SUCCESS {
		C.vr_release_program(p)
		return nil, clErr("clBuildProgram(binary)", e)
	}
	return p, nil
}

// programBinary returns the device binary of a built program, or nil.
func programBinary(p clProgram) []byte {
	var n C.size_t
	if C.vr_program_binary_of(p, nil, &n) != C.CL_SUCCESS || n == 0 {
		return nil
	}
	buf := C.malloc(n)
	defer C.free(buf)
	if C.vr_program_binary_of(p, (*C.uchar)(buf), &n) != C.CL_SUCCESS {
		return nil
	}
	return C.GoBytes(buf, C.int(n))
}

func releaseProgram(p clProgram) { C.vr_release_program(p) }

func createKernel(p clProgram, name string) (clKernel, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var e C.cl_int
	k := C.vr_create_kernel(p, cn, &e)
	if e != C.CL_SUCCESS {
		return nil, clErr("clCreateKernel("+name+")", e)
	}
	return k, nil
}

func releaseKernel(k clKernel) { C.vr_release_kernel(k) }

func setArgBytes(k clKernel, i int, b []byte) error {
	return clErr("clSetKernelArg", C.vr_set_arg(k, C.cl_uint(i), C.size_t(len(b)), unsafe.Pointer(&b[0])))
}

func setArgMem(k clKernel, i int, m clMem) error {
	return clErr("clSetKernelArg", C.vr_set_arg_mem(k, C.cl_uint(i), m))
}

// cmdList is a stream's recorded commands in C memory.
type cmdList struct {
	p   *C.vr_cmd
	n   int
	cap int
	ev  *C.cl_event // one per kernel launch when profiling
	nev int
}

const (
	cmdWrite  = 0
	cmdRead   = 1
	cmdKernel = 2
)

func (l *cmdList) at(i int) *C.vr_cmd {
	return (*C.vr_cmd)(unsafe.Add(unsafe.Pointer(l.p), uintptr(i)*unsafe.Sizeof(C.vr_cmd{})))
}

func (l *cmdList) grow() {
	if l.n < l.cap {
		return
	}
	nc := max(16, 2*l.cap)
	np := C.realloc(unsafe.Pointer(l.p), C.size_t(uintptr(nc)*unsafe.Sizeof(C.vr_cmd{})))
	if np == nil {
		panic("opencl: out of host memory for commands")
	}
	l.p = (*C.vr_cmd)(np)
	l.cap = nc
}

// addCopy records a write or read; host must stay pinned while recorded.
func (l *cmdList) addCopy(kind int, m clMem, off int64, host []byte) {
	l.grow()
	c := l.at(l.n)
	*c = C.vr_cmd{}
	c.kind = C.int(kind)
	c.mem = m
	c.off = C.size_t(off)
	c.n = C.size_t(len(host))
	if len(host) > 0 {
		c.host = unsafe.Pointer(&host[0])
	}
	l.n++
}

// addKernel records a launch (k nil records nothing to run, for an empty
// op, but keeps a Timings slot).
func (l *cmdList) addKernel(k clKernel, dims int, gws, lws [3]int) {
	l.grow()
	c := l.at(l.n)
	*c = C.vr_cmd{}
	c.kind = cmdKernel
	c.kernel = k
	c.dims = C.cl_uint(dims)
	for i := 0; i < 3; i++ {
		c.gws[i] = C.size_t(gws[i])
		c.lws[i] = C.size_t(lws[i])
	}
	if k == nil {
		c.kind = 3 // no-op
	}
	l.n++
}

// kernels returns every kernel object of the list.
func (l *cmdList) kernels() []clKernel {
	var ks []clKernel
	for i := 0; i < l.n; i++ {
		if c := l.at(i); c.kind == cmdKernel && c.kernel != nil {
			ks = append(ks, c.kernel)
		}
	}
	return ks
}

// launches is the number of kernel commands (including empty ones).
func (l *cmdList) launches() int {
	n := 0
	for i := 0; i < l.n; i++ {
		if k := l.at(i).kind; k == cmdKernel || k == 3 {
			n++
		}
	}
	return n
}

func (l *cmdList) reset() { l.n = 0 }

func (l *cmdList) free() {
	C.free(unsafe.Pointer(l.p))
	C.free(unsafe.Pointer(l.ev))
	*l = cmdList{}
}

// submit enqueues every command; with profile, events are recorded for
// the kernel launches. It returns the failing command index with an error.
func (l *cmdList) submit(q clQueue, profile bool) (int, error) {
	var ev *C.cl_event
	if profile {
		n := l.launches()
		if n > l.nev {
			C.free(unsafe.Pointer(l.ev))
			l.ev = (*C.cl_event)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.cl_event(nil)))))
			l.nev = n
		} else if n > 0 {
			for i := 0; i < n; i++ {
				*(*C.cl_event)(unsafe.Add(unsafe.Pointer(l.ev), uintptr(i)*unsafe.Sizeof(C.cl_event(nil)))) = nil
			}
		}
		ev = l.ev
	}
	var failed C.int
	if e := C.vr_submit(q, l.p, C.int(l.n), ev, &failed); e != C.CL_SUCCESS {
		return int(failed), clErr("enqueue", e)
	}
	return -1, nil
}

// times reads the profiled durations (ns) of the launches and releases
// the events; it returns the first failed execution status.
func (l *cmdList) times() ([]int64, error) {
	n := l.launches()
	if n == 0 || l.ev == nil {
		return make([]int64, n), nil
	}
	t := make([]C.cl_ulong, 2*n)
	e := C.vr_event_times(l.ev, C.int(n), &t[0])
	out := make([]int64, n)
	for i := range out {
		if t[2*i+1] > t[2*i] {
			out[i] = int64(t[2*i+1] - t[2*i])
		}
	}
	return out, clErr("kernel execution", e)
}
