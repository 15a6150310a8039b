// cudnn_shim.h: the cuDNN 9 legacy-convolution declarations vrun uses, so
// the package builds without cuDNN's headers. libcudnn.so.9 (cudnn64_9.dll)
// is opened at run time and every entry point is called through a function
// pointer looked up by name (dnnNames in cudnn.go, same order as the
// VR_cudnn* enum below). Only cudnn.go includes this header.
//
// The numeric values are those of cuDNN 9's cudnn_graph.h / cudnn_cnn.h
// (unchanged since cuDNN 7 for everything used here):
//   cudnnTensorFormat_t:   CUDNN_TENSOR_NCHW = 0 (NHWC = 1, NCHW_VECT_C = 2)
//   cudnnDataType_t:       CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1, CUDNN_DATA_HALF = 2
//   cudnnConvolutionMode_t: CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1
//     (ONNX / rt.Conv "convolution" does not flip the filter: cross-correlation)
//   cudnnMathType_t:       CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1,
//                          CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2, CUDNN_FMA_MATH = 3
//   cudnnConvolutionFwdAlgo_t: IMPLICIT_GEMM = 0, IMPLICIT_PRECOMP_GEMM = 1, GEMM = 2,
//                          DIRECT = 3, FFT = 4, FFT_TILING = 5, WINOGRAD = 6,
//                          WINOGRAD_NONFUSED = 7, COUNT = 8
//   cudnnStatus_t:         CUDNN_STATUS_SUCCESS = 0 (cuDNN 9 renumbered the other
//                          codes into classes 1xxx-5xxx; they are only ever named
//                          through cudnnGetErrorString, never compared here)
//   cudnnConvolutionFwdAlgoPerf_t: { algo; status; float time; size_t memory;
//                          cudnnDeterminism_t determinism; cudnnMathType_t mathType;
//                          int reserved[3]; } (every enum is int-sized)
// cudnnGetVersion returns CUDNN_MAJOR*10000 + CUDNN_MINOR*100 + CUDNN_PATCHLEVEL
// from cuDNN 9 on (cuDNN 8 used MAJOR*1000).
#ifndef VRUN_CUDNN_SHIM_H
#define VRUN_CUDNN_SHIM_H

#include "cuda_shim.h"

typedef int cudnnStatus_t;
typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
typedef struct cudnnActivationStruct* cudnnActivationDescriptor_t;

typedef struct {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
} vr_cudnnConvolutionFwdAlgoPerf_t;

enum {
  VR_CUDNN_STATUS_SUCCESS = 0,
  VR_CUDNN_TENSOR_NCHW = 0,
  VR_CUDNN_DATA_FLOAT = 0,
  VR_CUDNN_DATA_DOUBLE = 1,
  VR_CUDNN_DATA_HALF = 2,
  VR_CUDNN_CROSS_CORRELATION = 1,
  VR_CUDNN_DEFAULT_MATH = 0,
  VR_CUDNN_TENSOR_OP_MATH = 1,
  VR_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  VR_CUDNN_FMA_MATH = 3,
  VR_CUDNN_FWD_ALGO_COUNT = 8,
  VR_CUDNN_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  VR_CUDNN_ACTIVATION_RELU = 1,
  VR_CUDNN_ACTIVATION_IDENTITY = 5,
  VR_CUDNN_PROPAGATE_NAN = 1,
  VR_DNN_MAX_PERF = 16
};

typedef size_t(VR_API* pfn_cudnnGetVersion)(void);
typedef const char*(VR_API* pfn_cudnnGetErrorString)(cudnnStatus_t);
typedef cudnnStatus_t(VR_API* pfn_cudnnCreate)(cudnnHandle_t*);
typedef cudnnStatus_t(VR_API* pfn_cudnnDestroy)(cudnnHandle_t);
typedef cudnnStatus_t(VR_API* pfn_cudnnSetStream)(cudnnHandle_t, CUstream);
typedef cudnnStatus_t(VR_API* pfn_cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*);
typedef cudnnStatus_t(VR_API* pfn_cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t, int, int, int, int, int, int);
typedef cudnnStatus_t(VR_API* pfn_cudnnDestroyTensorDescriptor)(cudnnTensorDescriptor_t);
typedef cudnnStatus_t(VR_API* pfn_cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*);
// (desc, dataType, format, k, c, h, w): note dataType comes before format.
typedef cudnnStatus_t(VR_API* pfn_cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t, int, int, int, int, int, int);
typedef cudnnStatus_t(VR_API* pfn_cudnnDestroyFilterDescriptor)(cudnnFilterDescriptor_t);
typedef cudnnStatus_t(VR_API* pfn_cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*);
// (desc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType)
typedef cudnnStatus_t(VR_API* pfn_cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int, int, int, int,
                                                                     int, int, int, int);
typedef cudnnStatus_t(VR_API* pfn_cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
typedef cudnnStatus_t(VR_API* pfn_cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, int);
typedef cudnnStatus_t(VR_API* pfn_cudnnDestroyConvolutionDescriptor)(cudnnConvolutionDescriptor_t);
typedef cudnnStatus_t(VR_API* pfn_cudnnGetConvolution2dForwardOutputDim)(cudnnConvolutionDescriptor_t,
                                                                           cudnnTensorDescriptor_t,
                                                                           cudnnFilterDescriptor_t, int*, int*,
                                                                           int*, int*);
typedef cudnnStatus_t(VR_API* pfn_cudnnGetConvolutionForwardAlgorithm_v7)(
    cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
    cudnnTensorDescriptor_t, int, int*, vr_cudnnConvolutionFwdAlgoPerf_t*);
typedef cudnnStatus_t(VR_API* pfn_cudnnGetConvolutionForwardWorkspaceSize)(cudnnHandle_t, cudnnTensorDescriptor_t,
                                                                             cudnnFilterDescriptor_t,
                                                                             cudnnConvolutionDescriptor_t,
                                                                             cudnnTensorDescriptor_t, int, size_t*);
typedef cudnnStatus_t(VR_API* pfn_cudnnConvolutionForward)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t,
                                                             const void*, cudnnFilterDescriptor_t, const void*,
                                                             cudnnConvolutionDescriptor_t, int, void*, size_t,
                                                             const void*, cudnnTensorDescriptor_t, void*);
// Optional entry points (conv + bias + activation in one call); vrun
// runs without them.
typedef cudnnStatus_t(VR_API* pfn_cudnnCreateActivationDescriptor)(cudnnActivationDescriptor_t*);
// (desc, mode, reluNanOpt, coef)
typedef cudnnStatus_t(VR_API* pfn_cudnnSetActivationDescriptor)(cudnnActivationDescriptor_t, int, int, double);
typedef cudnnStatus_t(VR_API* pfn_cudnnDestroyActivationDescriptor)(cudnnActivationDescriptor_t);
// (handle, alpha1, xDesc, x, wDesc, w, convDesc, algo, workSpace, wsSize, alpha2, zDesc, z, biasDesc, bias,
// activationDesc, yDesc, y)
typedef cudnnStatus_t(VR_API* pfn_cudnnConvolutionBiasActivationForward)(
    cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,
    cudnnConvolutionDescriptor_t, int, void*, size_t, const void*, cudnnTensorDescriptor_t, const void*,
    cudnnTensorDescriptor_t, const void*, cudnnActivationDescriptor_t, cudnnTensorDescriptor_t, void*);

enum {
  VR_cudnnGetVersion, VR_cudnnGetErrorString, VR_cudnnCreate, VR_cudnnDestroy, VR_cudnnSetStream,
  VR_cudnnCreateTensorDescriptor, VR_cudnnSetTensor4dDescriptor, VR_cudnnDestroyTensorDescriptor,
  VR_cudnnCreateFilterDescriptor, VR_cudnnSetFilter4dDescriptor, VR_cudnnDestroyFilterDescriptor,
  VR_cudnnCreateConvolutionDescriptor, VR_cudnnSetConvolution2dDescriptor, VR_cudnnSetConvolutionGroupCount,
  VR_cudnnSetConvolutionMathType, VR_cudnnDestroyConvolutionDescriptor, VR_cudnnGetConvolution2dForwardOutputDim,
  VR_cudnnGetConvolutionForwardAlgorithm_v7, VR_cudnnGetConvolutionForwardWorkspaceSize,
  VR_cudnnConvolutionForward,
  VR_cudnnCreateActivationDescriptor, VR_cudnnSetActivationDescriptor, VR_cudnnDestroyActivationDescriptor,
  VR_cudnnConvolutionBiasActivationForward,
  VR_DNN_COUNT
};

extern void* vr_dnn[VR_DNN_COUNT];
#ifdef VR_DEFINE_DNN_TABLE
void* vr_dnn[VR_DNN_COUNT];
#endif

static void vr_set_dnn(int i, void* p) { vr_dnn[i] = p; }

#define DNN(name) ((pfn_##name)vr_dnn[VR_##name])

static size_t vr_cudnnGetVersion(void) { return DNN(cudnnGetVersion)(); }
static const char* vr_cudnnGetErrorString(cudnnStatus_t s) { return DNN(cudnnGetErrorString)(s); }
static cudnnStatus_t vr_cudnnCreate(cudnnHandle_t* h) { return DNN(cudnnCreate)(h); }
static cudnnStatus_t vr_cudnnDestroy(cudnnHandle_t h) { return DNN(cudnnDestroy)(h); }
static cudnnStatus_t vr_cudnnSetStream(cudnnHandle_t h, CUstream s) { return DNN(cudnnSetStream)(h, s); }

// vr_dnn_conv is one convolution's descriptors and chosen algorithm.
typedef struct {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int dtype;  // cudnnDataType_t of X, W and Y
  int algo;
  size_t ws;  // workspace bytes for algo
  // Set by vr_dnn_conv_fuse: the bias (1, K, 1, 1) and activation
  // descriptors of cudnnConvolutionBiasActivationForward.
  cudnnTensorDescriptor_t b;
  cudnnActivationDescriptor_t act;
} vr_dnn_conv;

static void vr_dnn_conv_unfuse(vr_dnn_conv* c) {
  if (c->b) DNN(cudnnDestroyTensorDescriptor)(c->b);
  if (c->act) DNN(cudnnDestroyActivationDescriptor)(c->act);
  c->b = NULL;
  c->act = NULL;
}

static void vr_dnn_conv_free(vr_dnn_conv* c) {
  vr_dnn_conv_unfuse(c);
  if (c->x) DNN(cudnnDestroyTensorDescriptor)(c->x);
  if (c->y) DNN(cudnnDestroyTensorDescriptor)(c->y);
  if (c->w) DNN(cudnnDestroyFilterDescriptor)(c->w);
  if (c->conv) DNN(cudnnDestroyConvolutionDescriptor)(c->conv);
  c->x = c->y = NULL;
  c->w = NULL;
  c->conv = NULL;
}

// Values of *step that are not cuDNN calls (the status is then 0).
#define VR_DNN_STEP_DIMS "output dims differ from the op's"
#define VR_DNN_STEP_ALGO "no suitable forward algorithm"

// vr_dnn_conv_setup creates and sets the descriptors of an NCHW
// convolution with symmetric pads (padh, padw), checks that cuDNN's output
// dims are (n, k, oh, ow), and picks the first algorithm of the v7
// heuristics (best first) that succeeds, is in allowMask (bit per
// cudnnConvolutionFwdAlgo_t), has a workspace of at most wsLimit bytes and,
// when noTensorOps, does not use tensor-core math. On failure it frees
// what it created and sets *step to the failing call; a cuDNN failure
// returns its status, a vrun-side refusal returns 0 with *step set.
static cudnnStatus_t vr_dnn_conv_setup(cudnnHandle_t h, vr_dnn_conv* c, int dtype, int computeType, int mathType,
                                       int n, int ch, int hh, int ww, int k, int kh, int kw, int oh, int ow,
                                       int padh, int padw, int sh, int sw, int dh, int dw, int groups,
                                       unsigned allowMask, int noTensorOps, size_t wsLimit, const char** step) {
  cudnnStatus_t s;
  memset(c, 0, sizeof(*c));
  c->dtype = dtype;
  *step = NULL;
#define VR_TRY(call, name) \
  if ((s = (call)) != VR_CUDNN_STATUS_SUCCESS) { \
    *step = name; \
    goto fail; \
  }
  VR_TRY(DNN(cudnnCreateTensorDescriptor)(&c->x), "cudnnCreateTensorDescriptor");
  VR_TRY(DNN(cudnnCreateTensorDescriptor)(&c->y), "cudnnCreateTensorDescriptor");
  VR_TRY(DNN(cudnnCreateFilterDescriptor)(&c->w), "cudnnCreateFilterDescriptor");
  VR_TRY(DNN(cudnnCreateConvolutionDescriptor)(&c->conv), "cudnnCreateConvolutionDescriptor");
  VR_TRY(DNN(cudnnSetTensor4dDescriptor)(c->x, VR_CUDNN_TENSOR_NCHW, dtype, n, ch, hh, ww),
         "cudnnSetTensor4dDescriptor(X)");
  VR_TRY(DNN(cudnnSetTensor4dDescriptor)(c->y, VR_CUDNN_TENSOR_NCHW, dtype, n, k, oh, ow),
         "cudnnSetTensor4dDescriptor(Y)");
  VR_TRY(DNN(cudnnSetFilter4dDescriptor)(c->w, dtype, VR_CUDNN_TENSOR_NCHW, k, ch / groups, kh, kw),
         "cudnnSetFilter4dDescriptor");
  VR_TRY(DNN(cudnnSetConvolution2dDescriptor)(c->conv, padh, padw, sh, sw, dh, dw, VR_CUDNN_CROSS_CORRELATION,
                                              computeType),
         "cudnnSetConvolution2dDescriptor");
  VR_TRY(DNN(cudnnSetConvolutionGroupCount)(c->conv, groups), "cudnnSetConvolutionGroupCount");
  VR_TRY(DNN(cudnnSetConvolutionMathType)(c->conv, mathType), "cudnnSetConvolutionMathType");
  {
    int on, ok, ooh, oow;
    VR_TRY(DNN(cudnnGetConvolution2dForwardOutputDim)(c->conv, c->x, c->w, &on, &ok, &ooh, &oow),
           "cudnnGetConvolution2dForwardOutputDim");
    if (on != n || ok != k || ooh != oh || oow != ow) {
      s = VR_CUDNN_STATUS_SUCCESS;
      *step = VR_DNN_STEP_DIMS;
      goto fail;
    }
  }
  {
    vr_cudnnConvolutionFwdAlgoPerf_t perf[VR_DNN_MAX_PERF];
    int got = 0, i;
    memset(perf, 0, sizeof(perf));
    VR_TRY(DNN(cudnnGetConvolutionForwardAlgorithm_v7)(h, c->x, c->w, c->conv, c->y, VR_DNN_MAX_PERF, &got, perf),
           "cudnnGetConvolutionForwardAlgorithm_v7");
    for (i = 0; i < got && i < VR_DNN_MAX_PERF; i++) {
      size_t ws = 0;
      const vr_cudnnConvolutionFwdAlgoPerf_t* p = &perf[i];
      if (p->status != VR_CUDNN_STATUS_SUCCESS || p->algo < 0 || p->algo >= VR_CUDNN_FWD_ALGO_COUNT) continue;
      if (!(allowMask & (1u << p->algo))) continue;
      if (noTensorOps &&
          (p->mathType == VR_CUDNN_TENSOR_OP_MATH || p->mathType == VR_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        continue;
      if (DNN(cudnnGetConvolutionForwardWorkspaceSize)(h, c->x, c->w, c->conv, c->y, p->algo, &ws) !=
          VR_CUDNN_STATUS_SUCCESS)
        continue;
      if (ws > wsLimit) continue;
      c->algo = p->algo;
      c->ws = ws;
      return VR_CUDNN_STATUS_SUCCESS;
    }
    s = VR_CUDNN_STATUS_SUCCESS;
    *step = VR_DNN_STEP_ALGO;
  }
#undef VR_TRY
fail:
  vr_dnn_conv_free(c);
  return s;
}

// vr_dnn_conv_fuse prepares c for cudnnConvolutionBiasActivationForward
// with a bias of k channels and activation mode (RELU, or IDENTITY, which
// cuDNN allows only with IMPLICIT_PRECOMP_GEMM). It returns 0 when it
// did, and else leaves c unfused: -1 when the entry points are missing or
// the mode is not allowed with c's algorithm, a cuDNN status otherwise.
static int vr_dnn_conv_fuse(vr_dnn_conv* c, int k, int mode) {
  cudnnStatus_t s;
  if (!vr_dnn[VR_cudnnCreateActivationDescriptor] || !vr_dnn[VR_cudnnSetActivationDescriptor] ||
      !vr_dnn[VR_cudnnDestroyActivationDescriptor] || !vr_dnn[VR_cudnnConvolutionBiasActivationForward])
    return -1;
  if (mode == VR_CUDNN_ACTIVATION_IDENTITY && c->algo != VR_CUDNN_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return -1;
  if ((s = DNN(cudnnCreateTensorDescriptor)(&c->b)) != VR_CUDNN_STATUS_SUCCESS) {
    c->b = NULL;
    return (int)s;
  }
  if ((s = DNN(cudnnSetTensor4dDescriptor)(c->b, VR_CUDNN_TENSOR_NCHW, c->dtype, 1, k, 1, 1)) !=
      VR_CUDNN_STATUS_SUCCESS)
    goto fail;
  if ((s = DNN(cudnnCreateActivationDescriptor)(&c->act)) != VR_CUDNN_STATUS_SUCCESS) {
    c->act = NULL;
    goto fail;
  }
  if ((s = DNN(cudnnSetActivationDescriptor)(c->act, mode, VR_CUDNN_PROPAGATE_NAN, 0.0)) != VR_CUDNN_STATUS_SUCCESS)
    goto fail;
  return 0;
fail:
  vr_dnn_conv_unfuse(c);
  return (int)s;
}

// vr_dnn_conv_run_fused enqueues Y = act(conv(X, W) + Z + Bias) on the
// handle's stream (c prepared by vr_dnn_conv_fuse; alpha1 1, alpha2 1),
// or Y = act(conv(X, W) + Bias) when z is 0 (alpha2 0).
static cudnnStatus_t vr_dnn_conv_run_fused(cudnnHandle_t h, const vr_dnn_conv* c, CUdeviceptr x, CUdeviceptr w,
                                           CUdeviceptr b, CUdeviceptr z, CUdeviceptr y, CUdeviceptr ws,
                                           size_t wsSize) {
  double d1 = 1.0, d0 = 0.0;
  float f1 = 1.0f, f0 = 0.0f;
  const void* p1 = (const void*)&f1;
  const void* p0 = (const void*)&f0;
  if (c->dtype == VR_CUDNN_DATA_DOUBLE) {
    p1 = (const void*)&d1;
    p0 = (const void*)&d0;
  }
  return DNN(cudnnConvolutionBiasActivationForward)(
      h, p1, c->x, (const void*)(size_t)x, c->w, (const void*)(size_t)w, c->conv, c->algo, (void*)(size_t)ws, wsSize,
      z ? p1 : p0, c->y, (const void*)(size_t)(z ? z : y), c->b, (const void*)(size_t)b, c->act, c->y,
      (void*)(size_t)y);
}

// vr_dnn_conv_run enqueues Y = conv(X, W) + beta*Y on the handle's stream
// (alpha 1; alpha and beta are double for double data, float otherwise).
static cudnnStatus_t vr_dnn_conv_run(cudnnHandle_t h, const vr_dnn_conv* c, CUdeviceptr x, CUdeviceptr w,
                                     CUdeviceptr y, CUdeviceptr ws, size_t wsSize, double beta) {
  double da = 1.0, db = beta;
  float fa = 1.0f, fb = (float)beta;
  const void* pa = (const void*)&fa;
  const void* pb = (const void*)&fb;
  if (c->dtype == VR_CUDNN_DATA_DOUBLE) {
    pa = (const void*)&da;
    pb = (const void*)&db;
  }
  return DNN(cudnnConvolutionForward)(h, pa, c->x, (const void*)(size_t)x, c->w, (const void*)(size_t)w, c->conv,
                                      c->algo, (void*)(size_t)ws, wsSize, pb, c->y, (void*)(size_t)y);
}

#endif
