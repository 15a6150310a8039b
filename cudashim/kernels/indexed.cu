// indexed.cu: the index-driven primitives GatherElements, ScatterElements
// and TopK. build.sh compiles this file on its own to indexed.ptx, a second
// PTX module with its own hash (indexed.ptx.sha256), so that adding these
// kernels does not invalidate kernels.ptx. Semantics follow the CPU
// backend (cpu/indexed.go) exactly.
#include "common.cuh"

// Idx and Upd are strided views of shape [outer, n, inner]: element
// (o, j, i) lives at o*s0 + j*s1 + i*s2 elements from the view's pointer
// (strides may be zero or negative; rt.CheckOp bounds the span).

// status and tag: the stream's index status words and the op's tag (its
// launch index + 1, or 0 when out-of-range indices are allowed), for
// flag_index (common.cuh).

struct GatherElArgs {
  u64 x, idx, y;
  i64 outer, axis, n, inner;
  i64 is0, is1, is2;
  i64 esz, idx64;
  u64 status;
  i64 tag;
};

struct ScatterElArgs {
  u64 y, idx, upd;
  i64 outer, axis, n, inner;
  i64 is0, is1, is2, us0, us1, us2;
  i64 dt, esz, idx64, fn;
  u64 status;
  i64 tag;
};

struct TopKArgs {
  u64 x, vals, ind;
  i64 outer, n, inner, k;
  i64 dt, largest;
};

// Scatter functions: the numeric values of rt.ScatterFn.
enum { S_Set = 0, S_Add = 1, S_Mul = 2, S_Max = 3, S_Min = 4 };

__device__ __forceinline__ i64 ld_index(u64 p, i64 idx64, i64 off) {
  return idx64 ? ((const i64*)p)[off] : (i64)((const int*)p)[off];
}

// copy_elem copies one element of esz bytes bitwise.
__device__ __forceinline__ void copy_elem(u64 dst, i64 doff, u64 src, i64 soff, i64 esz) {
  switch (esz) {
    case 1: ((unsigned char*)dst)[doff] = ((const unsigned char*)src)[soff]; break;
    case 2: ((unsigned short*)dst)[doff] = ((const unsigned short*)src)[soff]; break;
    case 4: ((unsigned int*)dst)[doff] = ((const unsigned int*)src)[soff]; break;
    default: ((u64*)dst)[doff] = ((const u64*)src)[soff]; break;
  }
}

// gather_elements: Y[o, j, i] = X[o, Idx[o, j, i], i], Y contiguous
// [outer, n, inner]. Negative indices count from the end; indices still
// out of range give zero (and are flagged in the status words). Elements
// are copied bitwise.
extern "C" __global__ void __launch_bounds__(NT) gather_elements(const GatherElArgs a) {
  const i64 tot = a.outer * a.n * a.inner;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 i = q % a.inner, t = q / a.inner, j = t % a.n, o = t / a.n;
    const i64 raw = ld_index(a.idx, a.idx64, o * a.is0 + j * a.is1 + i * a.is2);
    i64 k = raw;
    if (k < 0) k += a.axis;
    if (k < 0 || k >= a.axis) {
      flag_index(a.status, a.tag, raw, a.axis);
      switch (a.esz) {
        case 1: ((unsigned char*)a.y)[q] = 0; break;
        case 2: ((unsigned short*)a.y)[q] = 0; break;
        case 4: ((unsigned int*)a.y)[q] = 0; break;
        default: ((u64*)a.y)[q] = 0; break;
      }
    } else {
      copy_elem(a.y, q, a.x, (o * a.axis + k) * a.inner + i, a.esz);
    }
  }
}

// go_max and go_min are Go's math.Max and math.Min, which the CPU backend
// uses: an infinity of the right sign wins over NaN, NaN wins over
// numbers, and +0 is larger than -0.
__device__ __forceinline__ double go_max(double x, double y) {
  if (isinf(x) && x > 0) return x;
  if (isinf(y) && y > 0) return y;
  if (x != x) return x;
  if (y != y) return y;
  if (x == 0 && x == y) return signbit(x) ? y : x;
  return x > y ? x : y;
}

__device__ __forceinline__ double go_min(double x, double y) {
  if (isinf(x) && x < 0) return x;
  if (isinf(y) && y < 0) return y;
  if (x != x) return x;
  if (y != y) return y;
  if (x == 0 && x == y) return signbit(x) ? x : y;
  return x < y ? x : y;
}

// scatter_elements: one thread per column (o, i) of Y [outer, axis,
// inner] applies the updates j = 0..n-1 in order, like the CPU backend's
// sequential loop: duplicates resolve deterministically (the last Set
// wins). Floats combine in double and are stored like the CPU backend
// (f16 through f32); integers combine in 64 bits with wrap-around and are
// truncated on store; bool stores v != 0.
extern "C" __global__ void __launch_bounds__(NT) scatter_elements(const ScatterElArgs a) {
  const i64 cols = a.outer * a.inner;
  const bool isf = a.dt == DT_F32 || a.dt == DT_F16 || a.dt == DT_F64;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < cols; q += (i64)gridDim.x * NT) {
    const i64 i = q % a.inner, o = q / a.inner;
    const i64 ib = o * a.is0 + i * a.is2, ub = o * a.us0 + i * a.us2;
    const i64 yb = o * a.axis * a.inner + i;
    for (i64 j = 0; j < a.n; j++) {
      const i64 raw = ld_index(a.idx, a.idx64, ib + j * a.is1);
      i64 k = raw;
      if (k < 0) k += a.axis;
      if (k < 0 || k >= a.axis) {
        flag_index(a.status, a.tag, raw, a.axis);
        continue;
      }
      const i64 ye = yb + k * a.inner, ue = ub + j * a.us1;
      if (a.fn == S_Set) {
        copy_elem(a.y, ye, a.upd, ue, a.esz);
      } else if (isf) {
        const double y = ldf<double>(a.y, a.dt, ye), u = ldf<double>(a.upd, a.dt, ue);
        double v = u;
        switch (a.fn) {
          case S_Add: v = y + u; break;
          case S_Mul: v = y * u; break;
          case S_Max: v = go_max(y, u); break;
          case S_Min: v = go_min(y, u); break;
        }
        stf<double>(a.y, a.dt, ye, v);
      } else {
        const i64 y = ldi(a.y, a.dt, ye), u = ldi(a.upd, a.dt, ue);
        i64 v = u;
        switch (a.fn) {
          case S_Add: v = (i64)((u64)y + (u64)u); break;
          case S_Mul: v = (i64)((u64)y * (u64)u); break;
          case S_Max: v = y > u ? y : u; break;
          case S_Min: v = y < u ? y : u; break;
        }
        sti(a.y, a.dt, ye, v);
      }
    }
  }
}

// TopK keys: the comparison value of an element (exact for every dtype)
// and whether it is NaN.
template <typename T> struct TopKey {
  typedef i64 K;
  static __device__ __forceinline__ K get(T v) { return (K)v; }
  static __device__ __forceinline__ bool nan(K) { return false; }
};
template <> struct TopKey<float> {
  typedef float K;
  static __device__ __forceinline__ K get(float v) { return v; }
  static __device__ __forceinline__ bool nan(K v) { return v != v; }
};
template <> struct TopKey<__half> {
  typedef float K;
  static __device__ __forceinline__ K get(__half v) { return __half2float(v); }
  static __device__ __forceinline__ bool nan(K v) { return v != v; }
};
template <> struct TopKey<double> {
  typedef double K;
  static __device__ __forceinline__ K get(double v) { return v; }
  static __device__ __forceinline__ bool nan(K v) { return v != v; }
};

// topk_gt reports a > b where NaN is larger than every number (and equal
// to NaN).
template <typename KT>
__device__ __forceinline__ bool topk_gt(typename KT::K a, typename KT::K b) {
  if (KT::nan(a)) return !KT::nan(b);
  if (KT::nan(b)) return false;
  return a > b;
}

// topk_body: one thread per element (o, j, i) of X [outer, n, inner]
// computes the element's rank in its column, the number of elements that
// come before it (larger, or smaller when !largest; equal ones with a
// lower index). Ranks are a permutation of 0..n-1; the element of rank
// r < k is output r. The scan stops once the rank reaches k.
template <typename T>
__device__ __forceinline__ void topk_body(const TopKArgs& a) {
  typedef TopKey<T> KT;
  typedef typename KT::K K;
  const T* X = (const T*)a.x;
  T* V = (T*)a.vals;
  i64* I = (i64*)a.ind;
  const i64 tot = a.outer * a.n * a.inner;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 i = q % a.inner, t = q / a.inner, j = t % a.n, o = t / a.n;
    const i64 base = o * a.n * a.inner + i;
    const T xv = X[base + j * a.inner];
    const K v = KT::get(xv);
    i64 r = 0;
    for (i64 m = 0; m < a.n && r < a.k; m++) {
      const K w = KT::get(X[base + m * a.inner]);
      const bool vw = topk_gt<KT>(v, w), wv = topk_gt<KT>(w, v);
      if (a.largest ? wv : vw) r++;
      else if (m < j && !vw && !wv) r++;
    }
    if (r < a.k) {
      const i64 d = (o * a.k + r) * a.inner + i;
      V[d] = xv;
      I[d] = j;
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) topk(const TopKArgs a) {
  switch (a.dt) {
    case DT_F32: topk_body<float>(a); break;
    case DT_F16: topk_body<__half>(a); break;
    case DT_F64: topk_body<double>(a); break;
    case DT_I32: topk_body<int>(a); break;
    case DT_I64: topk_body<i64>(a); break;
    case DT_U8:
    case DT_BOOL: topk_body<unsigned char>(a); break;
    case DT_I8: topk_body<signed char>(a); break;
  }
}
