// reduce.cu: Reduce, Softmax and Normalize over a contiguous X viewed as
// [outer, n, inner]. Sums accumulate in double (memory-bound, so free in
// practice); exp/log run in the compute type (float for f16/f32).
#include "common.cuh"

struct RedArgs {
  u64 x, y;  // already offset to the first element
  i64 outer, n, inner;
  i64 fn;    // rt.ReduceFn
  i64 last;  // SelectLast
  i64 dt;    // X dtype (reduce_int)
  i64 ydt;   // Y dtype (reduce_int)
};

// finish turns an accumulated value into the result of fn.
__device__ __forceinline__ double red_finish(int fn, double s, double m, i64 n) {
  switch (fn) {
    case R_Mean: return s / (double)n;
    case R_L2: return sqrt(s);
    case R_Max:
    case R_Min: return m;
    case R_LogSumExp:
      if (m != m || isinf(m)) return m;
      return m + log(s);
  }
  return s;
}

// reduce_rows: inner == 1, one block per row, no arg reductions.
template <typename T>
__device__ __forceinline__ void reduce_rows_body(const RedArgs& a) {
  typedef typename CT<T>::type C;
  __shared__ double sh[NT / 32];
  const T* x = (const T*)a.x;
  T* y = (T*)a.y;
  const int fn = (int)a.fn;
  const i64 n = a.n;
  for (i64 row = blockIdx.x; row < a.outer; row += gridDim.x) {
    const T* xr = x + row * n;
    double s = 0, m = 0;
    if (fn == R_Max || fn == R_Min || fn == R_LogSumExp) {
      const bool mn = fn == R_Min;
      double v0 = mn ? __longlong_as_double(0x7ff0000000000000LL) : __longlong_as_double((i64)0xfff0000000000000ULL);
      double t = v0;
      for (i64 j = threadIdx.x; j < n; j += NT) {
        double v = (double)tof(xr[j]);
        t = mn ? nmin(t, v) : nmax(t, v);
      }
      m = mn ? block_reduce(t, OpMin(), v0, sh) : block_reduce(t, OpMax(), v0, sh);
      if (fn == R_LogSumExp && !(m != m) && !isinf(m)) {
        const C mc = (C)m;
        double t2 = 0;
        for (i64 j = threadIdx.x; j < n; j += NT) t2 += (double)m_exp(tof(xr[j]) - mc);
        s = block_reduce(t2, OpSum(), 0.0, sh);
      }
    } else if (fn == R_Prod) {
      double t = 1;
      for (i64 j = threadIdx.x; j < n; j += NT) t *= (double)tof(xr[j]);
      s = block_reduce(t, OpProd(), 1.0, sh);
    } else {
      double t = 0;
      for (i64 j = threadIdx.x; j < n; j += NT) {
        double v = (double)tof(xr[j]);
        if (fn == R_SumSquare || fn == R_L2) v *= v;
        else if (fn == R_L1) v = fabs(v);
        t += v;
      }
      s = block_reduce(t, OpSum(), 0.0, sh);
    }
    if (threadIdx.x == 0) stv(&y[row], red_finish(fn, s, m, n));
  }
}

// reduce_cols: one thread per output (o, i), serial over n; all functions.
template <typename T>
__device__ __forceinline__ void reduce_cols_body(const RedArgs& a) {
  typedef typename CT<T>::type C;
  const T* x = (const T*)a.x;
  const int fn = (int)a.fn;
  const i64 n = a.n, I = a.inner, tot = a.outer * a.inner;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const T* xq = x + (q / I) * n * I + (q % I);
    if (fn == R_ArgMax || fn == R_ArgMin) {
      i64 bi = 0;
      if (n > 0) {
        C best = tof(xq[0]);
        for (i64 j = 1; j < n; j++) {
          C v = tof(xq[j * I]);
          bool better = fn == R_ArgMax ? (v > best || (a.last && v == best)) : (v < best || (a.last && v == best));
          if (better) { best = v; bi = j; }
        }
      }
      ((i64*)a.y)[q] = bi;
      continue;
    }
    double s = 0, m = 0;
    switch (fn) {
      case R_Max:
      case R_Min:
      case R_LogSumExp: {
        const bool mn = fn == R_Min;
        m = mn ? __longlong_as_double(0x7ff0000000000000LL) : __longlong_as_double((i64)0xfff0000000000000ULL);
        for (i64 j = 0; j < n; j++) {
          double v = (double)tof(xq[j * I]);
          if (v != v) { m = v; break; }
          if (mn ? v < m : v > m) m = v;
        }
        if (fn == R_LogSumExp && !(m != m) && !isinf(m)) {
          const C mc = (C)m;
          for (i64 j = 0; j < n; j++) s += (double)m_exp(tof(xq[j * I]) - mc);
        }
        break;
      }
      case R_Prod:
        s = 1;
        for (i64 j = 0; j < n; j++) s *= (double)tof(xq[j * I]);
        break;
      default:
        for (i64 j = 0; j < n; j++) {
          double v = (double)tof(xq[j * I]);
          if (fn == R_SumSquare || fn == R_L2) v *= v;
          else if (fn == R_L1) v = fabs(v);
          s += v;
        }
    }
    stv(&((T*)a.y)[q], red_finish(fn, s, m, n));
  }
}

extern "C" __global__ void __launch_bounds__(NT) reduce_rows_h(const RedArgs a) { reduce_rows_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) reduce_rows_f(const RedArgs a) { reduce_rows_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) reduce_rows_d(const RedArgs a) { reduce_rows_body<double>(a); }
extern "C" __global__ void __launch_bounds__(NT) reduce_cols_h(const RedArgs a) { reduce_cols_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) reduce_cols_f(const RedArgs a) { reduce_cols_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) reduce_cols_d(const RedArgs a) { reduce_cols_body<double>(a); }

// reduce_int: integer and bool reductions (Sum, Prod, Max, Min, ArgMax,
// ArgMin) in int64, one thread per output.
extern "C" __global__ void __launch_bounds__(NT) reduce_int(const RedArgs a) {
  const int fn = (int)a.fn;
  const i64 n = a.n, I = a.inner, tot = a.outer * a.inner;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 base = (q / I) * n * I + (q % I);
    i64 v = 0, bi = 0;
    if (fn == R_Sum) {
      for (i64 j = 0; j < n; j++) v = (i64)((u64)v + (u64)ldi(a.x, a.dt, base + j * I));
    } else if (fn == R_Prod) {
      v = 1;
      for (i64 j = 0; j < n; j++) v = (i64)((u64)v * (u64)ldi(a.x, a.dt, base + j * I));
    } else if (n > 0) {
      const bool mx = fn == R_Max || fn == R_ArgMax;
      i64 best = ldi(a.x, a.dt, base);
      for (i64 j = 1; j < n; j++) {
        i64 e = ldi(a.x, a.dt, base + j * I);
        bool better = mx ? (e > best || (a.last && e == best)) : (e < best || (a.last && e == best));
        if (better) { best = e; bi = j; }
      }
      v = best;
    }
    if (fn == R_ArgMax || fn == R_ArgMin)
      ((i64*)a.y)[q] = bi;
    else
      sti(a.y, a.ydt, q, v);
  }
}

struct SoftmaxArgs {
  u64 x, y;
  i64 outer, n, inner;
  i64 log;
};

// softmax_rows: inner == 1, one block per row.
template <typename T>
__device__ __forceinline__ void softmax_rows_body(const SoftmaxArgs& a) {
  typedef typename CT<T>::type C;
  __shared__ double sh[NT / 32];
  const i64 n = a.n;
  const double ninf = __longlong_as_double((i64)0xfff0000000000000ULL);
  for (i64 row = blockIdx.x; row < a.outer; row += gridDim.x) {
    const T* xr = (const T*)a.x + row * n;
    T* yr = (T*)a.y + row * n;
    double t = ninf;
    for (i64 j = threadIdx.x; j < n; j += NT) t = nmax(t, (double)tof(xr[j]));
    const double m = block_reduce(t, OpMax(), ninf, sh);
    const C mc = (C)m;
    double s = 0;
    for (i64 j = threadIdx.x; j < n; j += NT) s += (double)m_exp(tof(xr[j]) - mc);
    s = block_reduce(s, OpSum(), 0.0, sh);
    if (a.log) {
      const C ls = (C)log(s);
      for (i64 j = threadIdx.x; j < n; j += NT) stv(&yr[j], (tof(xr[j]) - mc) - ls);
    } else {
      const double inv = 1.0 / s;
      for (i64 j = threadIdx.x; j < n; j += NT) stv(&yr[j], (double)m_exp(tof(xr[j]) - mc) * inv);
    }
  }
}

// softmax_cols: one thread per (o, i), serial over n.
template <typename T>
__device__ __forceinline__ void softmax_cols_body(const SoftmaxArgs& a) {
  typedef typename CT<T>::type C;
  const i64 n = a.n, I = a.inner, tot = a.outer * a.inner;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 base = (q / I) * n * I + (q % I);
    const T* x = (const T*)a.x + base;
    T* y = (T*)a.y + base;
    double m = __longlong_as_double((i64)0xfff0000000000000ULL);
    for (i64 j = 0; j < n; j++) {
      double v = (double)tof(x[j * I]);
      if (v > m || v != v) m = v;
      if (m != m) break;
    }
    const C mc = (C)m;
    double s = 0;
    for (i64 j = 0; j < n; j++) s += (double)m_exp(tof(x[j * I]) - mc);
    if (a.log) {
      const C ls = (C)log(s);
      for (i64 j = 0; j < n; j++) stv(&y[j * I], (tof(x[j * I]) - mc) - ls);
    } else {
      const double inv = 1.0 / s;
      for (i64 j = 0; j < n; j++) stv(&y[j * I], (double)m_exp(tof(x[j * I]) - mc) * inv);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) softmax_rows_h(const SoftmaxArgs a) { softmax_rows_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) softmax_rows_f(const SoftmaxArgs a) { softmax_rows_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) softmax_rows_d(const SoftmaxArgs a) { softmax_rows_body<double>(a); }
extern "C" __global__ void __launch_bounds__(NT) softmax_cols_h(const SoftmaxArgs a) { softmax_cols_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) softmax_cols_f(const SoftmaxArgs a) { softmax_cols_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) softmax_cols_d(const SoftmaxArgs a) { softmax_cols_body<double>(a); }

struct NormArgs {
  u64 x, y, scale, bias;  // scale and bias are 0 when absent
  i64 outer, n;
  double eps;
};

// normalize: one block per row; two-pass mean and population variance in
// double.
template <typename T>
__device__ __forceinline__ void normalize_body(const NormArgs& a) {
  __shared__ double sh[NT / 32];
  const i64 n = a.n;
  const T* sc = (const T*)a.scale;
  const T* bi = (const T*)a.bias;
  for (i64 row = blockIdx.x; row < a.outer; row += gridDim.x) {
    const T* xr = (const T*)a.x + row * n;
    T* yr = (T*)a.y + row * n;
    double s = 0;
    for (i64 j = threadIdx.x; j < n; j += NT) s += (double)tof(xr[j]);
    const double mean = block_reduce(s, OpSum(), 0.0, sh) / (double)n;
    double v = 0;
    for (i64 j = threadIdx.x; j < n; j += NT) {
      double d = (double)tof(xr[j]) - mean;
      v += d * d;
    }
    const double inv = 1.0 / sqrt(block_reduce(v, OpSum(), 0.0, sh) / (double)n + a.eps);
    for (i64 j = threadIdx.x; j < n; j += NT) {
      double z = ((double)tof(xr[j]) - mean) * inv;
      if (sc) z *= (double)tof(sc[j]);
      if (bi) z += (double)tof(bi[j]);
      stv(&yr[j], z);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) normalize_h(const NormArgs a) { normalize_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) normalize_f(const NormArgs a) { normalize_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) normalize_d(const NormArgs a) { normalize_body<double>(a); }
