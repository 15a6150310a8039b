// ew.cu: elementwise kernels over strided views (Unary, cast, Binary,
// Where, Fill). The iteration space has rank <= MAXR after the Go side has
// dropped size-1 dims and merged contiguous ones; dims are stored innermost
// first. Operand k's element at multi-index i is at
// ptr[k] + sum(i[d] * stride[k][d]) elements (strides may be 0 or negative).
#include "common.cuh"

struct EwArgs {
  i64 n;     // number of elements
  i64 rank;  // dims in use, innermost first
  i64 shape[MAXR];
  u64 ptr[MAXOP];  // base pointers, already offset to element [0,...]
  i64 stride[MAXOP][MAXR];
  i64 dt[MAXOP];  // rt.DType of each operand
  i64 fn;         // UnaryFn / BinaryFn
  double alpha, beta;
  u64 bits;  // Fill: the value's bit pattern, in Y's dtype
};

// offsets computes the element offsets of linear index i for NOP operands.
template <int NOP, typename I>
__device__ __forceinline__ void offsets(const EwArgs& a, I i, i64 (&off)[NOP]) {
#pragma unroll
  for (int k = 0; k < NOP; k++) off[k] = 0;
  const int rank = (int)a.rank;
#pragma unroll
  for (int d = 0; d < MAXR; d++) {
    if (d < rank) {
      I c;
      if (d == rank - 1) {
        c = i;
      } else {
        const I s = (I)a.shape[d];
        c = i % s;
        i /= s;
      }
#pragma unroll
      for (int k = 0; k < NOP; k++) off[k] += (i64)c * a.stride[k][d];
    }
  }
}

// Body is called as body(a, off) for every element.
template <int NOP, typename I, typename Body>
__device__ __forceinline__ void ew_loop_t(const EwArgs& a, Body body) {
  const I n = (I)a.n;
  for (I i = (I)blockIdx.x * NT + threadIdx.x; i < n; i += (I)gridDim.x * NT) {
    i64 off[NOP];
    offsets<NOP, I>(a, i, off);
    body(off);
  }
}

// ew_loop picks 32-bit index arithmetic when the element count allows it.
template <int NOP, typename Body>
__device__ __forceinline__ void ew_loop(const EwArgs& a, Body body) {
  if (a.n <= 0x7fffffffLL)
    ew_loop_t<NOP, unsigned int>(a, body);
  else
    ew_loop_t<NOP, u64>(a, body);
}

// raw moves of one element of size sz bytes.
__device__ __forceinline__ void move1(u64 dst, i64 doff, u64 src, i64 soff, int sz) {
  switch (sz) {
    case 1: ((unsigned char*)dst)[doff] = ((const unsigned char*)src)[soff]; break;
    case 2: ((unsigned short*)dst)[doff] = ((const unsigned short*)src)[soff]; break;
    case 4: ((unsigned int*)dst)[doff] = ((const unsigned int*)src)[soff]; break;
    default: ((u64*)dst)[doff] = ((const u64*)src)[soff]; break;
  }
}

__device__ __forceinline__ int dtsize(i64 dt) {
  switch (dt) {
    case DT_F16: return 2;
    case DT_F32:
    case DT_I32: return 4;
    case DT_F64:
    case DT_I64: return 8;
  }
  return 1;
}

// ew_copy: Y = X with the same dtype (strided copy, transpose, expand...).
extern "C" __global__ void __launch_bounds__(NT) ew_copy(const EwArgs a) {
  const int sz = dtsize(a.dt[0]);
  const u64 x = a.ptr[0], y = a.ptr[1];
  ew_loop<2>(a, [&](const i64(&o)[2]) { move1(y, o[1], x, o[0], sz); });
}

// ew_cast: Y = X converted between dtypes like the CPU backend: through
// int64 when X is an integer or bool and Y is not a float, else through
// double.
extern "C" __global__ void __launch_bounds__(NT) ew_cast(const EwArgs a) {
  const i64 xd = a.dt[0], yd = a.dt[1];
  const u64 x = a.ptr[0], y = a.ptr[1];
  const bool xf = xd == DT_F32 || xd == DT_F16 || xd == DT_F64;
  const bool yf = yd == DT_F32 || yd == DT_F16 || yd == DT_F64;
  if (!xf && !yf) {
    ew_loop<2>(a, [&](const i64(&o)[2]) { sti(y, yd, o[1], ldi(x, xd, o[0])); });
  } else {
    ew_loop<2>(a, [&](const i64(&o)[2]) { stf<double>(y, yd, o[1], ldf<double>(x, xd, o[0])); });
  }
}

template <typename C>
__device__ __forceinline__ void unary_float(const EwArgs& a) {
  const i64 xd = a.dt[0], yd = a.dt[1];
  const u64 x = a.ptr[0], y = a.ptr[1];
  const int fn = (int)a.fn;
  const double al = a.alpha, be = a.beta;
  ew_loop<2>(a, [&](const i64(&o)[2]) { stf<C>(y, yd, o[1], act<C>(fn, ldf<C>(x, xd, o[0]), al, be)); });
}

// ew_unary_f: float-computed unary function (f16 and f32 data).
extern "C" __global__ void __launch_bounds__(NT) ew_unary_f(const EwArgs a) { unary_float<float>(a); }
// ew_unary_d: double-computed unary function (f64 data).
extern "C" __global__ void __launch_bounds__(NT) ew_unary_d(const EwArgs a) { unary_float<double>(a); }

// ew_unary_i: integer and bool unary functions in int64.
extern "C" __global__ void __launch_bounds__(NT) ew_unary_i(const EwArgs a) {
  const i64 xd = a.dt[0], yd = a.dt[1];
  const u64 x = a.ptr[0], y = a.ptr[1];
  const int fn = (int)a.fn;
  ew_loop<2>(a, [&](const i64(&o)[2]) {
    i64 v = ldi(x, xd, o[0]);
    switch (fn) {
      case U_Neg: v = (i64)(0ULL - (u64)v); break;
      case U_Abs: v = v < 0 ? (i64)(0ULL - (u64)v) : v; break;
      case U_Relu: v = v < 0 ? 0 : v; break;
      case U_Sign: v = v > 0 ? 1 : (v < 0 ? -1 : 0); break;
      case U_Not: v = v == 0 ? 1 : 0; break;
      case U_Square: v = (i64)((u64)v * (u64)v); break;
      default: break;
    }
    sti(y, yd, o[1], v);
  });
}

// fmaxg/fming: the CPU backend's float Max/Min (NaN propagates; signed
// zeros ordered -0 < +0).
template <typename C> __device__ __forceinline__ C fmaxg(C a, C b) {
  if (a > b || a != a) return a;
  if (b != b) return b;
  if (a == b && a == (C)0 && m_signbit(b)) return a;
  return b;
}
template <typename C> __device__ __forceinline__ C fming(C a, C b) {
  if (a < b || a != a) return a;
  if (b != b) return b;
  if (a == b && a == (C)0 && m_signbit(a)) return a;
  return b;
}

template <typename C>
__device__ __forceinline__ C binf(int fn, C a, C b) {
  switch (fn) {
    case B_Add: return a + b;
    case B_Sub: return a - b;
    case B_Mul: return a * b;
    case B_Div: return a / b;
    case B_Pow: return m_pow(a, b);
    case B_Max: return fmaxg(a, b);
    case B_Min: return fming(a, b);
    case B_Mod: {
      C m = m_fmod(a, b);
      if (m != (C)0 && ((m < (C)0) != (b < (C)0))) m += b;
      return m;
    }
    case B_Fmod: return m_fmod(a, b);
    case B_PRelu: return a >= (C)0 ? a : a * b;
    case B_Equal: return a == b ? (C)1 : (C)0;
    case B_Less: return a < b ? (C)1 : (C)0;
    case B_LessEq: return a <= b ? (C)1 : (C)0;
    case B_Greater: return a > b ? (C)1 : (C)0;
    case B_GreaterEq: return a >= b ? (C)1 : (C)0;
    case B_And: return (a != (C)0 && b != (C)0) ? (C)1 : (C)0;
    case B_Or: return (a != (C)0 || b != (C)0) ? (C)1 : (C)0;
    case B_Xor: return ((a != (C)0) != (b != (C)0)) ? (C)1 : (C)0;
  }
  return a;
}

template <typename C>
__device__ __forceinline__ void binary_float(const EwArgs& a) {
  const i64 ad = a.dt[0], bd = a.dt[1], yd = a.dt[2];
  const u64 A = a.ptr[0], B = a.ptr[1], Y = a.ptr[2];
  const int fn = (int)a.fn;
  ew_loop<3>(a, [&](const i64(&o)[3]) { stf<C>(Y, yd, o[2], binf<C>(fn, ldf<C>(A, ad, o[0]), ldf<C>(B, bd, o[1]))); });
}

// ew_binary_f: float-computed binary function (f16 and f32 data).
extern "C" __global__ void __launch_bounds__(NT) ew_binary_f(const EwArgs a) { binary_float<float>(a); }
// ew_binary_d: double-computed binary function (f64 data).
extern "C" __global__ void __launch_bounds__(NT) ew_binary_d(const EwArgs a) { binary_float<double>(a); }

__device__ __forceinline__ i64 bini(int fn, i64 a, i64 b) {
  switch (fn) {
    case B_Add: return (i64)((u64)a + (u64)b);
    case B_Sub: return (i64)((u64)a - (u64)b);
    case B_Mul: return (i64)((u64)a * (u64)b);
    case B_Div:
      if (b == 0) return 0;
      if (b == -1) return (i64)(0ULL - (u64)a);
      return a / b;
    case B_Max: return a > b ? a : b;
    case B_Min: return a < b ? a : b;
    case B_Mod: {
      if (b == 0 || b == -1) return 0;
      i64 m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m;
    }
    case B_Fmod:
      if (b == 0 || b == -1) return 0;
      return a % b;
    case B_Equal: return a == b;
    case B_Less: return a < b;
    case B_LessEq: return a <= b;
    case B_Greater: return a > b;
    case B_GreaterEq: return a >= b;
    case B_And: return a != 0 && b != 0;
    case B_Or: return a != 0 || b != 0;
    case B_Xor: return (a != 0) != (b != 0);
  }
  return 0;
}

// ew_binary_i: integer and bool binary functions in int64.
extern "C" __global__ void __launch_bounds__(NT) ew_binary_i(const EwArgs a) {
  const i64 ad = a.dt[0], bd = a.dt[1], yd = a.dt[2];
  const u64 A = a.ptr[0], B = a.ptr[1], Y = a.ptr[2];
  const int fn = (int)a.fn;
  ew_loop<3>(a, [&](const i64(&o)[3]) { sti(Y, yd, o[2], bini(fn, ldi(A, ad, o[0]), ldi(B, bd, o[1]))); });
}

// ew_where: Y = Cond ? A : B (Cond is bool; A, B, Y share a dtype).
extern "C" __global__ void __launch_bounds__(NT) ew_where(const EwArgs a) {
  const int sz = dtsize(a.dt[3]);
  const u64 c = a.ptr[0], A = a.ptr[1], B = a.ptr[2], Y = a.ptr[3];
  ew_loop<4>(a, [&](const i64(&o)[4]) {
    if (((const unsigned char*)c)[o[0]] != 0)
      move1(Y, o[3], A, o[1], sz);
    else
      move1(Y, o[3], B, o[2], sz);
  });
}

// ew_fill: Y = bits (the value already encoded in Y's dtype).
extern "C" __global__ void __launch_bounds__(NT) ew_fill(const EwArgs a) {
  const int sz = dtsize(a.dt[0]);
  const u64 y = a.ptr[0], v = a.bits;
  ew_loop<1>(a, [&](const i64(&o)[1]) {
    switch (sz) {
      case 1: ((unsigned char*)y)[o[0]] = (unsigned char)v; break;
      case 2: ((unsigned short*)y)[o[0]] = (unsigned short)v; break;
      case 4: ((unsigned int*)y)[o[0]] = (unsigned int)v; break;
      default: ((u64*)y)[o[0]] = v; break;
    }
  });
}
