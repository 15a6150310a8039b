// common.cuh: types, argument structs and math helpers shared by the vrun
// CUDA kernels. Every kernel takes exactly one argument, a struct passed by
// value whose fields are all 8 bytes wide (i64, u64, double), so the Go side
// (cudashim/args.go) packs it as a flat array of 64-bit words with no
// padding. Keep the field order here and in args.go identical.
#pragma once
#include <cuda_fp16.h>

typedef long long i64;
typedef unsigned long long u64;

// dtype codes: the numeric values of rt.DType.
enum { DT_F32 = 1, DT_F16 = 2, DT_F64 = 3, DT_I32 = 4, DT_I64 = 5, DT_U8 = 6, DT_BOOL = 7, DT_I8 = 8 };

// Unary functions: the numeric values of rt.UnaryFn (checked by a Go test
// that parses this file).
enum {
  U_Copy = 0, U_Neg = 1, U_Abs = 2, U_Relu = 3, U_LeakyRelu = 4, U_Elu = 5, U_Selu = 6,
  U_Celu = 7, U_Sigmoid = 8, U_HardSigmoid = 9, U_HardSwish = 10, U_Tanh = 11, U_Gelu = 12,
  U_GeluTanh = 13, U_Silu = 14, U_Mish = 15, U_Softplus = 16, U_Softsign = 17, U_Exp = 18,
  U_Log = 19, U_Sqrt = 20, U_Rsqrt = 21, U_Reciprocal = 22, U_Floor = 23, U_Ceil = 24,
  U_Round = 25, U_Sign = 26, U_Sin = 27, U_Cos = 28, U_Erf = 29, U_Clip = 30, U_Affine = 31,
  U_Not = 32, U_Square = 33
};

// Binary functions: the numeric values of rt.BinaryFn.
enum {
  B_Add = 0, B_Sub = 1, B_Mul = 2, B_Div = 3, B_Pow = 4, B_Max = 5, B_Min = 6, B_Mod = 7,
  B_Fmod = 8, B_PRelu = 9, B_Equal = 10, B_Less = 11, B_LessEq = 12, B_Greater = 13,
  B_GreaterEq = 14, B_And = 15, B_Or = 16, B_Xor = 17
};

// Reduce functions: the numeric values of rt.ReduceFn.
enum {
  R_Sum = 0, R_Mean = 1, R_Max = 2, R_Min = 3, R_Prod = 4, R_SumSquare = 5, R_L1 = 6,
  R_L2 = 7, R_LogSumExp = 8, R_ArgMax = 9, R_ArgMin = 10
};

// flag_index records an index k outside [-axis, axis) of a checked Gather,
// GatherElements or ScatterElements in the stream's status words (status,
// rt.IndexStatusWords 32-bit words): the op whose tag (its launch index +
// 1) claims word 0 first records the index (low and high words) and the
// axis size. tag 0: the op allows out-of-range indices (or the stream has
// no status words).
__device__ __forceinline__ void flag_index(u64 status, i64 tag, i64 k, i64 axis) {
  if (tag != 0 && status != 0) {
    unsigned int* s = (unsigned int*)status;
    if (atomicCAS(s, 0u, (unsigned int)tag) == 0u) {
      s[1] = (unsigned int)(u64)k;
      s[2] = (unsigned int)((u64)k >> 32);
      s[3] = (unsigned int)axis;
    }
  }
}

#define MAXR 8   // max rank of an elementwise iteration space after coalescing
#define MAXOP 4  // max operands of an elementwise kernel
#define NT 256   // threads per block of every kernel

// ---- elementary conversions ----

// Compute type: float for f16 and f32 storage, double for f64.
template <typename T> struct CT { typedef float type; };
template <> struct CT<double> { typedef double type; };

__device__ __forceinline__ float tof(float v) { return v; }
__device__ __forceinline__ float tof(__half v) { return __half2float(v); }
__device__ __forceinline__ double tof(double v) { return v; }

__device__ __forceinline__ void stv(float* p, float v) { *p = v; }
__device__ __forceinline__ void stv(float* p, double v) { *p = (float)v; }
__device__ __forceinline__ void stv(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void stv(__half* p, double v) { *p = __float2half_rn((float)v); }
__device__ __forceinline__ void stv(double* p, float v) { *p = (double)v; }
__device__ __forceinline__ void stv(double* p, double v) { *p = v; }

// f2i converts to an integer like the CPU backend: truncation, NaN -> 0,
// saturation at the int64 range.
__device__ __forceinline__ i64 f2i(double v) {
  if (v != v) return 0;
  if (v >= 9.223372036854775807e18) return 0x7fffffffffffffffLL;
  if (v <= -9.223372036854775808e18) return (i64)0x8000000000000000ULL;
  return (i64)v;
}

// ldf loads element off of a buffer of dtype dt as compute type C.
template <typename C>
__device__ __forceinline__ C ldf(u64 p, i64 dt, i64 off) {
  switch (dt) {
    case DT_F32: return (C)((const float*)p)[off];
    case DT_F16: return (C)__half2float(((const __half*)p)[off]);
    case DT_F64: return (C)((const double*)p)[off];
    case DT_I32: return (C)((const int*)p)[off];
    case DT_I64: return (C)((const i64*)p)[off];
    case DT_U8:
    case DT_BOOL: return (C)((const unsigned char*)p)[off];
    case DT_I8: return (C)((const signed char*)p)[off];
  }
  return (C)0;
}

// ldi loads element off as int64 (floats truncate like f2i).
__device__ __forceinline__ i64 ldi(u64 p, i64 dt, i64 off) {
  switch (dt) {
    case DT_F32: return f2i((double)((const float*)p)[off]);
    case DT_F16: return f2i((double)__half2float(((const __half*)p)[off]));
    case DT_F64: return f2i(((const double*)p)[off]);
    case DT_I32: return ((const int*)p)[off];
    case DT_I64: return ((const i64*)p)[off];
    case DT_U8:
    case DT_BOOL: return ((const unsigned char*)p)[off];
    case DT_I8: return ((const signed char*)p)[off];
  }
  return 0;
}

// stf stores a compute-type value into dtype dt (ints: f2i then wrap;
// bool: v != 0).
template <typename C>
__device__ __forceinline__ void stf(u64 p, i64 dt, i64 off, C v) {
  switch (dt) {
    case DT_F32: ((float*)p)[off] = (float)v; break;
    case DT_F16: ((__half*)p)[off] = __float2half_rn((float)v); break;
    case DT_F64: ((double*)p)[off] = (double)v; break;
    case DT_I32: ((int*)p)[off] = (int)(unsigned int)(u64)f2i((double)v); break;
    case DT_I64: ((i64*)p)[off] = f2i((double)v); break;
    case DT_U8: ((unsigned char*)p)[off] = (unsigned char)(u64)f2i((double)v); break;
    case DT_I8: ((signed char*)p)[off] = (signed char)(unsigned char)(u64)f2i((double)v); break;
    case DT_BOOL: ((unsigned char*)p)[off] = (v != (C)0) ? 1 : 0; break;
  }
}

// sti stores an int64 into dtype dt (wrapping for narrower ints).
__device__ __forceinline__ void sti(u64 p, i64 dt, i64 off, i64 v) {
  switch (dt) {
    case DT_F32: ((float*)p)[off] = (float)v; break;
    case DT_F16: ((__half*)p)[off] = __float2half_rn((float)v); break;
    case DT_F64: ((double*)p)[off] = (double)v; break;
    case DT_I32: ((int*)p)[off] = (int)(unsigned int)(u64)v; break;
    case DT_I64: ((i64*)p)[off] = v; break;
    case DT_U8: ((unsigned char*)p)[off] = (unsigned char)(u64)v; break;
    case DT_I8: ((signed char*)p)[off] = (signed char)(unsigned char)(u64)v; break;
    case DT_BOOL: ((unsigned char*)p)[off] = v != 0 ? 1 : 0; break;
  }
}

// ---- math with float and double overloads ----

#define MF1(name, ff, df)                                             \
  __device__ __forceinline__ float name(float x) { return ff(x); }   \
  __device__ __forceinline__ double name(double x) { return df(x); }
MF1(m_exp, expf, exp)
MF1(m_expm1, expm1f, expm1)
MF1(m_log, logf, log)
MF1(m_log1p, log1pf, log1p)
MF1(m_sqrt, sqrtf, sqrt)
MF1(m_tanh, tanhf, tanh)
MF1(m_erf, erff, erf)
MF1(m_floor, floorf, floor)
MF1(m_ceil, ceilf, ceil)
MF1(m_rint, rintf, rint)
MF1(m_sin, sinf, sin)
MF1(m_cos, cosf, cos)
MF1(m_fabs, fabsf, fabs)
#undef MF1
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ bool m_signbit(float a) { return signbit(a); }
__device__ __forceinline__ bool m_signbit(double a) { return signbit(a); }
__device__ __forceinline__ bool m_isinf(float a) { return isinf(a); }
__device__ __forceinline__ bool m_isinf(double a) { return isinf(a); }

// NaN-propagating max and min (Go's math.Max / math.Min semantics for the
// NaN case).
template <typename C> __device__ __forceinline__ C nmax(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename C> __device__ __forceinline__ C nmin(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

template <typename C> __device__ __forceinline__ C sigm(C x) {
  if (x >= (C)0) return (C)1 / ((C)1 + m_exp(-x));
  C e = m_exp(x);
  return e / ((C)1 + e);
}
template <typename C> __device__ __forceinline__ C softplus(C x) {
  if (x > (C)0) return x + m_log1p(m_exp(-x));
  return m_log1p(m_exp(x));
}

// act applies unary function fn (rt.UnaryFn.Apply semantics) in compute
// type C. It is the Unary kernel for floats and the MatMul/Conv epilogue.
template <typename C>
__device__ __forceinline__ C act(int fn, C x, double alpha, double beta) {
  const C a = (C)alpha, b = (C)beta;
  switch (fn) {
    case U_Copy: return x;
    case U_Neg: return -x;
    case U_Abs: return m_fabs(x);
    case U_Relu: return x < (C)0 ? (C)0 : x;
    case U_LeakyRelu: return x >= (C)0 ? x : a * x;
    case U_Elu: return x >= (C)0 ? x : a * m_expm1(x);
    case U_Selu: return x > (C)0 ? b * x : b * a * m_expm1(x);
    case U_Celu: return nmax((C)0, x) + nmin((C)0, a * m_expm1(x / a));
    case U_Sigmoid: return sigm(x);
    case U_HardSigmoid: return nmax((C)0, nmin((C)1, a * x + b));
    case U_HardSwish: return x * nmax((C)0, nmin((C)1, x / (C)6 + (C)0.5));
    case U_Tanh: return m_tanh(x);
    case U_Gelu: return (C)0.5 * x * ((C)1 + m_erf(x * (C)0.70710678118654752440));
    case U_GeluTanh:
      return (C)0.5 * x * ((C)1 + m_tanh((C)0.79788456080286535588 * (x + (C)0.044715 * x * x * x)));
    case U_Silu: return x * sigm(x);
    case U_Mish: return x * m_tanh(softplus(x));
    case U_Softplus: return softplus(x);
    case U_Softsign: return x / ((C)1 + m_fabs(x));
    case U_Exp: return m_exp(x);
    case U_Log: return m_log(x);
    case U_Sqrt: return m_sqrt(x);
    case U_Rsqrt: return (C)1 / m_sqrt(x);
    case U_Reciprocal: return (C)1 / x;
    case U_Floor: return m_floor(x);
    case U_Ceil: return m_ceil(x);
    case U_Round: return m_rint(x);
    case U_Sign: return x > (C)0 ? (C)1 : (x < (C)0 ? (C)-1 : x);
    case U_Sin: return m_sin(x);
    case U_Cos: return m_cos(x);
    case U_Erf: return m_erf(x);
    case U_Clip: return nmin(nmax(x, (C)alpha), (C)beta);
    case U_Affine: return a * x + b;
    case U_Not: return x == (C)0 ? (C)1 : (C)0;
    case U_Square: return x * x;
  }
  return x;
}

// act_call is act out of line: the GEMM and Conv epilogues call it for
// each of their 16 outputs, and inlining the whole function table 16 times
// would bloat the PTX several-fold.
template <typename C>
__device__ __noinline__ C act_call(int fn, C x, double alpha, double beta) {
  return act<C>(fn, x, alpha, beta);
}

// ---- block reductions (blockDim.x == NT) ----

struct OpSum { template <typename A> __device__ A operator()(A a, A b) const { return a + b; } };
struct OpProd { template <typename A> __device__ A operator()(A a, A b) const { return a * b; } };
struct OpMax { template <typename A> __device__ A operator()(A a, A b) const { return nmax(a, b); } };
struct OpMin { template <typename A> __device__ A operator()(A a, A b) const { return nmin(a, b); } };

// block_reduce combines v over the block; every thread gets the result.
// sh must hold NT/32 elements.
template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v, Op op, A ident, A* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();  // sh may still be read from a previous call
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (NT / 32) ? sh[lane] : ident;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}
