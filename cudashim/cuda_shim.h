// cuda_shim.h: the few CUDA driver and cuBLAS declarations vrun uses, so
// the package builds without the CUDA toolkit. Libraries are opened at run
// time (dlopen / LoadLibrary) and every entry point is called through a
// function pointer looked up by name.
#ifndef VRUN_CUDA_SHIM_H
#define VRUN_CUDA_SHIM_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#define VR_API __stdcall
#else
#include <dlfcn.h>
#define VR_API
#endif

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef int CUjit_option;

typedef struct cublasContext* cublasHandle_t;
typedef int cublasStatus_t;
typedef int cublasOperation_t;  // CUBLAS_OP_N 0, CUBLAS_OP_T 1
typedef int cudaDataType;       // CUDA_R_32F 0, CUDA_R_64F 1, CUDA_R_16F 2
typedef int cublasComputeType_t;
typedef int cublasGemmAlgo_t;
typedef int cublasMath_t;

enum {
  VR_CUBLAS_OP_N = 0,
  VR_CUBLAS_OP_T = 1,
  VR_CUDA_R_32F = 0,
  VR_CUDA_R_64F = 1,
  VR_CUDA_R_16F = 2,
  VR_CUBLAS_COMPUTE_32F = 68,
  VR_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  VR_CUBLAS_COMPUTE_64F = 70,
  VR_CUBLAS_GEMM_DEFAULT = -1,
  VR_CUBLAS_DEFAULT_MATH = 0,
  VR_CUBLAS_TF32_TENSOR_OP_MATH = 3,
  VR_CU_JIT_ERROR_LOG_BUFFER = 5,
  VR_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  VR_CU_STREAM_NON_BLOCKING = 1,
  VR_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  VR_CU_MEMHOSTALLOC_PORTABLE = 1,
  VR_CU_EVENT_DISABLE_TIMING = 2
};

// Function pointer types.
typedef CUresult(VR_API* pfn_cuInit)(unsigned int);
typedef CUresult(VR_API* pfn_cuDriverGetVersion)(int*);
typedef CUresult(VR_API* pfn_cuDeviceGetCount)(int*);
typedef CUresult(VR_API* pfn_cuDeviceGet)(CUdevice*, int);
typedef CUresult(VR_API* pfn_cuDeviceGetName)(char*, int, CUdevice);
typedef CUresult(VR_API* pfn_cuDeviceTotalMem_v2)(size_t*, CUdevice);
typedef CUresult(VR_API* pfn_cuDeviceGetAttribute)(int*, int, CUdevice);
typedef CUresult(VR_API* pfn_cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
typedef CUresult(VR_API* pfn_cuDevicePrimaryCtxRelease_v2)(CUdevice);
typedef CUresult(VR_API* pfn_cuCtxSetCurrent)(CUcontext);
typedef CUresult(VR_API* pfn_cuMemAlloc_v2)(CUdeviceptr*, size_t);
typedef CUresult(VR_API* pfn_cuMemFree_v2)(CUdeviceptr);
typedef CUresult(VR_API* pfn_cuMemGetInfo_v2)(size_t*, size_t*);
typedef CUresult(VR_API* pfn_cuMemHostAlloc)(void**, size_t, unsigned int);
typedef CUresult(VR_API* pfn_cuMemFreeHost)(void*);
typedef CUresult(VR_API* pfn_cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void*, size_t, CUstream);
typedef CUresult(VR_API* pfn_cuMemcpyDtoHAsync_v2)(void*, CUdeviceptr, size_t, CUstream);
typedef CUresult(VR_API* pfn_cuMemcpyDtoDAsync_v2)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult(VR_API* pfn_cuStreamCreate)(CUstream*, unsigned int);
typedef CUresult(VR_API* pfn_cuStreamDestroy_v2)(CUstream);
typedef CUresult(VR_API* pfn_cuStreamSynchronize)(CUstream);
typedef CUresult(VR_API* pfn_cuStreamBeginCapture_v2)(CUstream, int);
typedef CUresult(VR_API* pfn_cuStreamEndCapture)(CUstream, CUgraph*);
typedef CUresult(VR_API* pfn_cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
typedef CUresult(VR_API* pfn_cuGraphLaunch)(CUgraphExec, CUstream);
typedef CUresult(VR_API* pfn_cuGraphExecDestroy)(CUgraphExec);
typedef CUresult(VR_API* pfn_cuGraphDestroy)(CUgraph);
typedef CUresult(VR_API* pfn_cuModuleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**);
typedef CUresult(VR_API* pfn_cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
typedef CUresult(VR_API* pfn_cuModuleUnload)(CUmodule);
typedef CUresult(VR_API* pfn_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                             unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
typedef CUresult(VR_API* pfn_cuEventCreate)(CUevent*, unsigned int);
typedef CUresult(VR_API* pfn_cuEventDestroy_v2)(CUevent);
typedef CUresult(VR_API* pfn_cuEventRecord)(CUevent, CUstream);
typedef CUresult(VR_API* pfn_cuEventElapsedTime)(float*, CUevent, CUevent);
typedef CUresult(VR_API* pfn_cuGetErrorName)(CUresult, const char**);
typedef CUresult(VR_API* pfn_cuGetErrorString)(CUresult, const char**);
typedef CUresult(VR_API* pfn_cuStreamWaitEvent)(CUstream, CUevent, unsigned int);

typedef cublasStatus_t(VR_API* pfn_cublasCreate_v2)(cublasHandle_t*);
typedef cublasStatus_t(VR_API* pfn_cublasDestroy_v2)(cublasHandle_t);
typedef cublasStatus_t(VR_API* pfn_cublasGetVersion_v2)(cublasHandle_t, int*);
typedef cublasStatus_t(VR_API* pfn_cublasSetStream_v2)(cublasHandle_t, CUstream);
typedef cublasStatus_t(VR_API* pfn_cublasSetWorkspace_v2)(cublasHandle_t, void*, size_t);
typedef cublasStatus_t(VR_API* pfn_cublasSetMathMode)(cublasHandle_t, cublasMath_t);
typedef cublasStatus_t(VR_API* pfn_cublasSgemmStridedBatched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                                              int, int, int, const float*, const float*, int,
                                                              long long, const float*, int, long long,
                                                              const float*, float*, int, long long, int);
typedef cublasStatus_t(VR_API* pfn_cublasDgemmStridedBatched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                                              int, int, int, const double*, const double*, int,
                                                              long long, const double*, int, long long,
                                                              const double*, double*, int, long long, int);
typedef cublasStatus_t(VR_API* pfn_cublasGemmStridedBatchedEx)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*, cudaDataType,
    int, long long, const void*, cudaDataType, int, long long, const void*, void*, cudaDataType, int, long long,
    int, cublasComputeType_t, cublasGemmAlgo_t);

// The symbol tables, indexed by the VR_CU_* and VR_BL_* values below; Go
// fills them by name (cuNames and blasNames in capi.go, same order).
enum {
  VR_cuInit, VR_cuDriverGetVersion, VR_cuDeviceGetCount, VR_cuDeviceGet, VR_cuDeviceGetName,
  VR_cuDeviceTotalMem_v2, VR_cuDeviceGetAttribute, VR_cuDevicePrimaryCtxRetain,
  VR_cuDevicePrimaryCtxRelease_v2, VR_cuCtxSetCurrent, VR_cuMemAlloc_v2, VR_cuMemFree_v2,
  VR_cuMemGetInfo_v2, VR_cuMemHostAlloc, VR_cuMemFreeHost, VR_cuMemcpyHtoDAsync_v2,
  VR_cuMemcpyDtoHAsync_v2, VR_cuStreamCreate, VR_cuStreamDestroy_v2, VR_cuStreamSynchronize,
  VR_cuStreamBeginCapture_v2, VR_cuStreamEndCapture, VR_cuGraphInstantiateWithFlags, VR_cuGraphLaunch,
  VR_cuGraphExecDestroy, VR_cuGraphDestroy, VR_cuModuleLoadDataEx, VR_cuModuleGetFunction,
  VR_cuModuleUnload, VR_cuLaunchKernel, VR_cuEventCreate, VR_cuEventDestroy_v2, VR_cuEventRecord,
  VR_cuEventElapsedTime, VR_cuGetErrorName, VR_cuGetErrorString, VR_cuMemcpyDtoDAsync_v2,
  VR_cuStreamWaitEvent,
  VR_CU_COUNT
};
enum {
  VR_cublasCreate_v2, VR_cublasDestroy_v2, VR_cublasGetVersion_v2, VR_cublasSetStream_v2,
  VR_cublasSetWorkspace_v2, VR_cublasSetMathMode, VR_cublasSgemmStridedBatched,
  VR_cublasDgemmStridedBatched, VR_cublasGemmStridedBatchedEx,
  VR_BL_COUNT
};

// The tables are defined once, in capi.go's preamble (VR_DEFINE_TABLES);
// every cgo file's preamble is its own C translation unit.
extern void* vr_cu[VR_CU_COUNT];
extern void* vr_bl[VR_BL_COUNT];
#ifdef VR_DEFINE_TABLES
void* vr_cu[VR_CU_COUNT];
void* vr_bl[VR_BL_COUNT];
#endif

static void* vr_open(const char* name) {
#ifdef _WIN32
  return (void*)LoadLibraryA(name);
#else
  return dlopen(name, RTLD_NOW | RTLD_LOCAL);
#endif
}

static void* vr_sym(void* h, const char* name) {
#ifdef _WIN32
  return (void*)GetProcAddress((HMODULE)h, name);
#else
  return dlsym(h, name);
#endif
}

static void vr_set_cu(int i, void* p) { vr_cu[i] = p; }
static void vr_set_bl(int i, void* p) { vr_bl[i] = p; }

#define CU(name) ((pfn_##name)vr_cu[VR_##name])
#define BL(name) ((pfn_##name)vr_bl[VR_##name])

// ---- driver wrappers ----
static CUresult vr_cuInit(void) { return CU(cuInit)(0); }
static CUresult vr_cuDriverGetVersion(int* v) { return CU(cuDriverGetVersion)(v); }
static CUresult vr_cuDeviceGetCount(int* n) { return CU(cuDeviceGetCount)(n); }
static CUresult vr_cuDeviceGet(CUdevice* d, int i) { return CU(cuDeviceGet)(d, i); }
static CUresult vr_cuDeviceGetName(char* s, int n, CUdevice d) { return CU(cuDeviceGetName)(s, n, d); }
static CUresult vr_cuDeviceTotalMem(size_t* b, CUdevice d) { return CU(cuDeviceTotalMem_v2)(b, d); }
static CUresult vr_cuDeviceGetAttribute(int* v, int a, CUdevice d) { return CU(cuDeviceGetAttribute)(v, a, d); }
static CUresult vr_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { return CU(cuDevicePrimaryCtxRetain)(c, d); }
static CUresult vr_cuDevicePrimaryCtxRelease(CUdevice d) { return CU(cuDevicePrimaryCtxRelease_v2)(d); }
static CUresult vr_cuCtxSetCurrent(CUcontext c) { return CU(cuCtxSetCurrent)(c); }
static CUresult vr_cuMemAlloc(CUdeviceptr* p, size_t n) { return CU(cuMemAlloc_v2)(p, n); }
static CUresult vr_cuMemFree(CUdeviceptr p) { return CU(cuMemFree_v2)(p); }
static CUresult vr_cuMemGetInfo(size_t* f, size_t* t) { return CU(cuMemGetInfo_v2)(f, t); }
static CUresult vr_cuMemHostAlloc(void** p, size_t n) { return CU(cuMemHostAlloc)(p, n, VR_CU_MEMHOSTALLOC_PORTABLE); }
static CUresult vr_cuMemFreeHost(void* p) { return CU(cuMemFreeHost)(p); }
static CUresult vr_cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  return CU(cuMemcpyHtoDAsync_v2)(d, s, n, st);
}
static CUresult vr_cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream st) {
  return CU(cuMemcpyDtoHAsync_v2)(d, s, n, st);
}
static CUresult vr_cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return CU(cuMemcpyDtoDAsync_v2)(d, s, n, st);
}
static CUresult vr_cuStreamCreate(CUstream* s) { return CU(cuStreamCreate)(s, VR_CU_STREAM_NON_BLOCKING); }
static CUresult vr_cuStreamDestroy(CUstream s) { return CU(cuStreamDestroy_v2)(s); }
static CUresult vr_cuStreamSynchronize(CUstream s) { return CU(cuStreamSynchronize)(s); }
static CUresult vr_cuStreamBeginCapture(CUstream s) {
  return CU(cuStreamBeginCapture_v2)(s, VR_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}
static CUresult vr_cuStreamEndCapture(CUstream s, CUgraph* g) { return CU(cuStreamEndCapture)(s, g); }
static CUresult vr_cuGraphInstantiate(CUgraphExec* e, CUgraph g) { return CU(cuGraphInstantiateWithFlags)(e, g, 0); }
static CUresult vr_cuGraphLaunch(CUgraphExec e, CUstream s) { return CU(cuGraphLaunch)(e, s); }
static CUresult vr_cuGraphExecDestroy(CUgraphExec e) { return CU(cuGraphExecDestroy)(e); }
static CUresult vr_cuGraphDestroy(CUgraph g) { return CU(cuGraphDestroy)(g); }
static CUresult vr_cuModuleGetFunction(CUfunction* f, CUmodule m, const char* n) {
  return CU(cuModuleGetFunction)(f, m, n);
}
static CUresult vr_cuModuleUnload(CUmodule m) { return CU(cuModuleUnload)(m); }
static CUresult vr_cuEventCreate(CUevent* e) { return CU(cuEventCreate)(e, 0); }
// vr_cuEventCreateSync creates an event for ordering only (no timing).
static CUresult vr_cuEventCreateSync(CUevent* e) { return CU(cuEventCreate)(e, VR_CU_EVENT_DISABLE_TIMING); }
static CUresult vr_cuStreamWaitEvent(CUstream s, CUevent e) { return CU(cuStreamWaitEvent)(s, e, 0); }
static CUresult vr_cuEventDestroy(CUevent e) { return CU(cuEventDestroy_v2)(e); }
static CUresult vr_cuEventRecord(CUevent e, CUstream s) { return CU(cuEventRecord)(e, s); }
static CUresult vr_cuEventElapsedTime(float* ms, CUevent a, CUevent b) { return CU(cuEventElapsedTime)(ms, a, b); }

// vr_error_text returns "NAME: description" for r (static strings, or
// NULL pointers when the driver does not know r).
static void vr_error_text(CUresult r, const char** name, const char** desc) {
  *name = NULL;
  *desc = NULL;
  if (vr_cu[VR_cuGetErrorName]) CU(cuGetErrorName)(r, name);
  if (vr_cu[VR_cuGetErrorString]) CU(cuGetErrorString)(r, desc);
}

// vr_module_load loads a module image (PTX, which the driver JIT-compiles,
// or a fatbin), capturing the error log in log.
static CUresult vr_module_load(CUmodule* m, const char* ptx, char* log, size_t logsize) {
  CUjit_option opts[2] = {VR_CU_JIT_ERROR_LOG_BUFFER, VR_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[2] = {(void*)log, (void*)(size_t)logsize};
  return CU(cuModuleLoadDataEx)(m, ptx, 2, opts, vals);
}

// vr_launch launches f with its single by-value struct argument args.
static CUresult vr_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                          CUstream s, void* args) {
  void* params[1] = {args};
  return CU(cuLaunchKernel)(f, gx, gy, gz, bx, 1, 1, 0, s, params, NULL);
}

// ---- cuBLAS wrappers ----
static int vr_cublas_has_workspace(void) { return vr_bl[VR_cublasSetWorkspace_v2] != NULL; }
static cublasStatus_t vr_cublasCreate(cublasHandle_t* h) { return BL(cublasCreate_v2)(h); }
static cublasStatus_t vr_cublasDestroy(cublasHandle_t h) { return BL(cublasDestroy_v2)(h); }
static cublasStatus_t vr_cublasGetVersion(cublasHandle_t h, int* v) { return BL(cublasGetVersion_v2)(h, v); }
static cublasStatus_t vr_cublasSetStream(cublasHandle_t h, CUstream s) { return BL(cublasSetStream_v2)(h, s); }
static cublasStatus_t vr_cublasSetWorkspace(cublasHandle_t h, CUdeviceptr p, size_t n) {
  return BL(cublasSetWorkspace_v2)(h, (void*)(size_t)p, n);
}
static cublasStatus_t vr_cublasSetMathMode(cublasHandle_t h, int tf32) {
  return BL(cublasSetMathMode)(h, tf32 ? VR_CUBLAS_TF32_TENSOR_OP_MATH : VR_CUBLAS_DEFAULT_MATH);
}

// vr_gemm runs one row-major-as-column-major strided batched GEMM:
// dt 1 f32, 2 f16 (f32 compute), 3 f64 (rt.DType values).
static cublasStatus_t vr_gemm(cublasHandle_t h, int dt, int ta, int tb, int m, int n, int k, double alpha,
                              CUdeviceptr A, int lda, long long sa, CUdeviceptr B, int ldb, long long sb,
                              double beta, CUdeviceptr C, int ldc, long long sc, int batch) {
  const void* pa = (const void*)(size_t)A;
  const void* pb = (const void*)(size_t)B;
  void* pc = (void*)(size_t)C;
  cublasOperation_t oa = ta ? VR_CUBLAS_OP_T : VR_CUBLAS_OP_N, ob = tb ? VR_CUBLAS_OP_T : VR_CUBLAS_OP_N;
  if (dt == 3) {
    return BL(cublasDgemmStridedBatched)(h, oa, ob, m, n, k, &alpha, (const double*)pa, lda, sa,
                                         (const double*)pb, ldb, sb, &beta, (double*)pc, ldc, sc, batch);
  }
  float fa = (float)alpha, fb = (float)beta;
  if (dt == 1) {
    return BL(cublasSgemmStridedBatched)(h, oa, ob, m, n, k, &fa, (const float*)pa, lda, sa, (const float*)pb,
                                         ldb, sb, &fb, (float*)pc, ldc, sc, batch);
  }
  return BL(cublasGemmStridedBatchedEx)(h, oa, ob, m, n, k, &fa, pa, VR_CUDA_R_16F, lda, sa, pb, VR_CUDA_R_16F,
                                        ldb, sb, &fb, pc, VR_CUDA_R_16F, ldc, sc, batch, VR_CUBLAS_COMPUTE_32F,
                                        VR_CUBLAS_GEMM_DEFAULT);
}

#endif
