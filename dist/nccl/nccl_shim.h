// nccl_shim.h: the few NCCL declarations vrun uses, so that the package
// builds without NCCL's headers. libnccl.so.2 is opened at run time
// (dlopen) and every entry point is called through a function pointer
// looked up by name. Values follow nccl.h of NCCL 2.x.
#ifndef VRUN_NCCL_SHIM_H
#define VRUN_NCCL_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;  // ncclSuccess 0
typedef struct ncclComm* ncclComm_t;
typedef struct CUstream_st* cudaStream_t;
typedef int ncclDataType_t;  // ncclInt32 2, ncclInt64 4, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8
typedef int ncclRedOp_t;     // ncclSum 0, ncclAvg 4

#define VR_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[VR_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef ncclResult_t (*pfn_ncclGetVersion)(int*);
typedef ncclResult_t (*pfn_ncclGetUniqueId)(ncclUniqueId*);
typedef ncclResult_t (*pfn_ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
typedef ncclResult_t (*pfn_ncclCommInitAll)(ncclComm_t*, int, const int*);
typedef ncclResult_t (*pfn_ncclCommDestroy)(ncclComm_t);
typedef ncclResult_t (*pfn_ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                          cudaStream_t);
typedef ncclResult_t (*pfn_ncclGroupStart)(void);
typedef ncclResult_t (*pfn_ncclGroupEnd)(void);
typedef const char* (*pfn_ncclGetErrorString)(ncclResult_t);

// Indices into vr_nccl, in the order of capi.go's ncclNames.
enum {
  VR_ncclGetVersion,
  VR_ncclGetUniqueId,
  VR_ncclCommInitRank,
  VR_ncclCommInitAll,
  VR_ncclCommDestroy,
  VR_ncclAllReduce,
  VR_ncclGroupStart,
  VR_ncclGroupEnd,
  VR_ncclGetErrorString,
  VR_NCCL_COUNT
};

extern void* vr_nccl[VR_NCCL_COUNT];
#ifdef VR_DEFINE_TABLES
void* vr_nccl[VR_NCCL_COUNT];
#endif

static void* vr_nccl_open(const char* name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static void* vr_nccl_sym(void* h, const char* name) { return dlsym(h, name); }
static void vr_nccl_set(int i, void* p) { vr_nccl[i] = p; }

#define NC(name) ((pfn_##name)vr_nccl[VR_##name])

static ncclResult_t vr_ncclGetVersion(int* v) { return NC(ncclGetVersion)(v); }
static ncclResult_t vr_ncclGetUniqueId(ncclUniqueId* id) { return NC(ncclGetUniqueId)(id); }
static ncclResult_t vr_ncclCommInitRank(ncclComm_t* c, int n, const char* id, int rank) {
  ncclUniqueId u;
  memcpy(u.internal, id, VR_NCCL_UNIQUE_ID_BYTES);
  return NC(ncclCommInitRank)(c, n, u, rank);
}
static ncclResult_t vr_ncclCommInitAll(ncclComm_t* c, int n, const int* devs) { return NC(ncclCommInitAll)(c, n, devs); }
static ncclResult_t vr_ncclCommDestroy(ncclComm_t c) { return NC(ncclCommDestroy)(c); }
static ncclResult_t vr_ncclAllReduce(unsigned long long send, unsigned long long recv, size_t count, ncclDataType_t dt,
                                     ncclRedOp_t op, ncclComm_t c, unsigned long long stream) {
  return NC(ncclAllReduce)((const void*)send, (void*)recv, count, dt, op, c, (cudaStream_t)stream);
}
static ncclResult_t vr_ncclGroupStart(void) { return NC(ncclGroupStart)(); }
static ncclResult_t vr_ncclGroupEnd(void) { return NC(ncclGroupEnd)(); }
static const char* vr_ncclGetErrorString(ncclResult_t r) { return NC(ncclGetErrorString)(r); }

#endif
