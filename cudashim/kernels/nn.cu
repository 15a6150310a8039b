// nn.cu: the tiled GEMM (cuBLAS fallback) and implicit-GEMM convolution
// sharing one 64x64x16 shared-memory tile loop, plus direct kernels for
// ConvTranspose, Pool and Gather.
#include "common.cuh"

#define TBM 64
#define TBN 64
#define TBK 16

// tile_mma accumulates the TBM x TBN tile at (m0, n0) of op(A) @ op(B) into
// acc, with ld.a(m, k) and ld.b(k, n) returning compute-type elements.
// Thread t owns rows (t/16) + 16*i and columns (t%16) + 16*j, i, j < 4.
template <typename C, typename L>
__device__ __forceinline__ void tile_mma(const L& ld, i64 M, i64 N, i64 K, i64 m0, i64 n0, C (&acc)[4][4]) {
  __shared__ C As[TBK][TBM + 1];
  __shared__ C Bs[TBK][TBN + 1];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = (C)0;
  for (i64 k0 = 0; k0 < K; k0 += TBK) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const int idx = tid + NT * l;
      const int am = idx >> 4, ak = idx & 15;
      const i64 gm = m0 + am, gka = k0 + ak;
      As[ak][am] = (gm < M && gka < K) ? ld.a(gm, gka) : (C)0;
      const int bk = idx >> 6, bn = idx & 63;
      const i64 gn = n0 + bn, gkb = k0 + bk;
      Bs[bk][bn] = (gn < N && gkb < K) ? ld.b(gkb, gn) : (C)0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TBK; kk++) {
      C av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) av[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; j++) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
}

struct GemmArgs {
  u64 a, b, y, bias;  // bias is 0 when absent
  i64 batch, m, n, k;
  i64 lda, ldb;  // row strides of A and B as stored
  i64 ta, tb;    // TransA, TransB
  i64 sa, sb, sy;  // batch strides in elements
  i64 brs, bcs;    // bias row and column strides
  i64 actfn;
  double alpha, beta, act_alpha, act_beta;
};

template <typename T, typename C>
struct GemmLoad {
  const T* A;
  const T* B;
  i64 lda, ldb;
  bool ta, tb;
  __device__ __forceinline__ C a(i64 m, i64 k) const { return (C)tof(ta ? A[k * lda + m] : A[m * lda + k]); }
  __device__ __forceinline__ C b(i64 k, i64 n) const { return (C)tof(tb ? B[n * ldb + k] : B[k * ldb + n]); }
};

// gemm: Y[b] = act(alpha * op(A[b]) @ op(B[b]) + beta * Bias). Grid:
// x = N tiles, y and z stride over M tiles and batches.
template <typename T>
__device__ __forceinline__ void gemm_body(const GemmArgs& p) {
  typedef typename CT<T>::type C;
  const i64 mt = (p.m + TBM - 1) / TBM;
  const i64 n0 = (i64)blockIdx.x * TBN;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const T* bias = (const T*)p.bias;
  for (i64 bt = blockIdx.z; bt < p.batch; bt += gridDim.z) {
    for (i64 t = blockIdx.y; t < mt; t += gridDim.y) {
      const i64 m0 = t * TBM;
      GemmLoad<T, C> ld{(const T*)p.a + bt * p.sa, (const T*)p.b + bt * p.sb, p.lda, p.ldb, p.ta != 0, p.tb != 0};
      C acc[4][4];
      tile_mma<C>(ld, p.m, p.n, p.k, m0, n0, acc);
      T* y = (T*)p.y + bt * p.sy;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const i64 m = m0 + ty + 16 * i;
        if (m >= p.m) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const i64 n = n0 + tx + 16 * j;
          if (n >= p.n) continue;
          C v = (C)p.alpha * acc[i][j];
          if (bias) v += (C)p.beta * (C)tof(bias[m * p.brs + n * p.bcs]);
          if (p.actfn != U_Copy) v = act_call<C>((int)p.actfn, v, p.act_alpha, p.act_beta);
          stv(&y[m * p.n + n], v);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) gemm_h(const GemmArgs p) { gemm_body<__half>(p); }
extern "C" __global__ void __launch_bounds__(NT) gemm_f(const GemmArgs p) { gemm_body<float>(p); }
extern "C" __global__ void __launch_bounds__(NT) gemm_d(const GemmArgs p) { gemm_body<double>(p); }

struct ConvArgs {
  u64 x, w, bias, y;  // bias is 0 when absent
  i64 n, c, h, w_;
  i64 k, oh, ow;
  i64 kh, kw;
  i64 sh, sw, pt, pl, dh, dw;
  i64 groups;
  i64 actfn;
  double act_alpha, act_beta;
};

// Conv as an implicit GEMM per group g: Y_g[Kg, N*OH*OW] = W_g[Kg, R] @
// im2col(X_g)[R, N*OH*OW], R = Cg*KH*KW. 32-bit index arithmetic (the Go
// side checks every extent fits).
template <typename T, typename C>
struct ConvLoad {
  const T* X;
  const T* W;
  int C_, H, Wd, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw, Cg, g, P, R, Kg;
  __device__ __forceinline__ C a(i64 m, i64 r) const { return (C)tof(W[((i64)g * Kg + m) * R + r]); }
  __device__ __forceinline__ C b(i64 r, i64 q) const {
    const int qi = (int)q, ri = (int)r;
    const int n = qi / P, p = qi - n * P;
    const int oh = p / OW, ow = p - oh * OW;
    const int KK = KH * KW;
    const int c = ri / KK, rem = ri - c * KK;
    const int kh = rem / KW, kw = rem - kh * KW;
    const int ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
    if (ih < 0 || ih >= H || iw < 0 || iw >= Wd) return (C)0;
    return (C)tof(X[(((i64)n * C_ + (i64)g * Cg + c) * H + ih) * Wd + iw]);
  }
};

template <typename T>
__device__ __forceinline__ void conv_body(const ConvArgs& p) {
  typedef typename CT<T>::type C;
  const int G = (int)p.groups, Cg = (int)(p.c / p.groups), Kg = (int)(p.k / p.groups);
  const int P = (int)(p.oh * p.ow), R = Cg * (int)(p.kh * p.kw);
  const i64 NC = p.n * P;
  const i64 mt = (Kg + TBM - 1) / TBM;
  const i64 n0 = (i64)blockIdx.x * TBN;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const T* bias = (const T*)p.bias;
  T* y = (T*)p.y;
  for (int g = blockIdx.z; g < G; g += gridDim.z) {
    ConvLoad<T, C> ld{(const T*)p.x, (const T*)p.w, (int)p.c, (int)p.h, (int)p.w_, (int)p.kh, (int)p.kw,
                      (int)p.oh, (int)p.ow, (int)p.sh, (int)p.sw, (int)p.pt, (int)p.pl, (int)p.dh,
                      (int)p.dw, Cg, g, P, R, Kg};
    for (i64 t = blockIdx.y; t < mt; t += gridDim.y) {
      const i64 m0 = t * TBM;
      C acc[4][4];
      tile_mma<C>(ld, Kg, NC, R, m0, n0, acc);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const i64 m = m0 + ty + 16 * i;
        if (m >= Kg) continue;
        const i64 kout = (i64)g * Kg + m;
        const C b0 = bias ? (C)tof(bias[kout]) : (C)0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const i64 q = n0 + tx + 16 * j;
          if (q >= NC) continue;
          const i64 nn = q / P, pp = q - nn * P;
          C v = acc[i][j] + b0;
          if (p.actfn != U_Copy) v = act_call<C>((int)p.actfn, v, p.act_alpha, p.act_beta);
          stv(&y[(nn * p.k + kout) * P + pp], v);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) conv_h(const ConvArgs p) { conv_body<__half>(p); }
extern "C" __global__ void __launch_bounds__(NT) conv_f(const ConvArgs p) { conv_body<float>(p); }
extern "C" __global__ void __launch_bounds__(NT) conv_d(const ConvArgs p) { conv_body<double>(p); }

// Depthwise Conv (one input channel per group, K/groups output channels
// each), one thread per output element, the window walked directly; 3x3
// windows unrolled. It replaces cuDNN's depthwise kernels, which ran
// MobileNetV2's layers far below the memory bandwidth (as PyTorch, which
// has its own depthwise kernel for f32).
template <typename T, int KS>
__device__ __forceinline__ typename CT<T>::type dw_window(const ConvArgs& p, const T* xc, const T* wk, int ih0, int iw0) {
  typedef typename CT<T>::type C;
  const int H = (int)p.h, Wd = (int)p.w_;
  const int KH = KS ? KS : (int)p.kh, KW = KS ? KS : (int)p.kw, dh = (int)p.dh, dw = (int)p.dw;
  C acc = (C)0;
#pragma unroll
  for (int a = 0; a < KH; a++) {
    const int ih = ih0 + a * dh;
    if (ih < 0 || ih >= H) continue;
#pragma unroll
    for (int b = 0; b < KW; b++) {
      const int iw = iw0 + b * dw;
      if (iw < 0 || iw >= Wd) continue;
      acc += (C)tof(xc[ih * Wd + iw]) * (C)tof(wk[a * KW + b]);
    }
  }
  return acc;
}

template <typename T>
__device__ __forceinline__ void dwconv_body(const ConvArgs& p) {
  typedef typename CT<T>::type C;
  const i64 tot = p.n * p.k * p.oh * p.ow;
  const int km = (int)(p.k / p.groups);  // output channels per input channel
  const bool k3 = p.kh == 3 && p.kw == 3;
  const T* X = (const T*)p.x;
  const T* W = (const T*)p.w;
  const T* bias = (const T*)p.bias;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    i64 r = q;
    const int ow = (int)(r % p.ow); r /= p.ow;
    const int oh = (int)(r % p.oh); r /= p.oh;
    const i64 k = r % p.k;
    const i64 n = r / p.k;
    const T* xc = X + (n * p.c + k / km) * p.h * p.w_;
    const T* wk = W + k * p.kh * p.kw;
    const int ih0 = oh * (int)p.sh - (int)p.pt, iw0 = ow * (int)p.sw - (int)p.pl;
    C acc = k3 ? dw_window<T, 3>(p, xc, wk, ih0, iw0) : dw_window<T, 0>(p, xc, wk, ih0, iw0);
    if (bias) acc += (C)tof(bias[k]);
    if (p.actfn != U_Copy) acc = act_call<C>((int)p.actfn, acc, p.act_alpha, p.act_beta);
    stv(&((T*)p.y)[q], acc);
  }
}

extern "C" __global__ void __launch_bounds__(NT) dwconv_h(const ConvArgs p) { dwconv_body<__half>(p); }
extern "C" __global__ void __launch_bounds__(NT) dwconv_f(const ConvArgs p) { dwconv_body<float>(p); }
extern "C" __global__ void __launch_bounds__(NT) dwconv_d(const ConvArgs p) { dwconv_body<double>(p); }

// ConvTranspose, one thread per output element: gathers the inputs whose
// scatter reaches (oh, ow): oh = ih*sh - pt + kh*dh.
template <typename T>
__device__ __forceinline__ void convt_body(const ConvArgs& p) {
  typedef typename CT<T>::type C;
  const i64 G = p.groups, Cg = p.c / G, Kg = p.k / G;
  const i64 tot = p.n * p.k * p.oh * p.ow;
  const T* X = (const T*)p.x;
  const T* W = (const T*)p.w;
  const T* bias = (const T*)p.bias;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    i64 r = q;
    const i64 ow = r % p.ow; r /= p.ow;
    const i64 oh = r % p.oh; r /= p.oh;
    const i64 k = r % p.k;
    const i64 n = r / p.k;
    const i64 g = k / Kg, kk = k - g * Kg;
    C acc = bias ? (C)tof(bias[k]) : (C)0;
    for (i64 kh = 0; kh < p.kh; kh++) {
      const i64 th = oh + p.pt - kh * p.dh;
      if (th < 0 || th % p.sh != 0) continue;
      const i64 ih = th / p.sh;
      if (ih >= p.h) continue;
      for (i64 kw = 0; kw < p.kw; kw++) {
        const i64 tw = ow + p.pl - kw * p.dw;
        if (tw < 0 || tw % p.sw != 0) continue;
        const i64 iw = tw / p.sw;
        if (iw >= p.w_) continue;
        for (i64 c = 0; c < Cg; c++) {
          const i64 ci = g * Cg + c;
          acc += (C)tof(X[((n * p.c + ci) * p.h + ih) * p.w_ + iw]) *
                 (C)tof(W[((ci * Kg + kk) * p.kh + kh) * p.kw + kw]);
        }
      }
    }
    stv(&((T*)p.y)[q], acc);
  }
}

extern "C" __global__ void __launch_bounds__(NT) convt_h(const ConvArgs p) { convt_body<__half>(p); }
extern "C" __global__ void __launch_bounds__(NT) convt_f(const ConvArgs p) { convt_body<float>(p); }
extern "C" __global__ void __launch_bounds__(NT) convt_d(const ConvArgs p) { convt_body<double>(p); }

struct PoolArgs {
  u64 x, y;
  i64 nc, h, w, oh, ow;
  i64 kh, kw, sh, sw;
  i64 pt, pl, pb, pr;
  i64 dh, dw;
  i64 cip;  // CountIncludePad
  i64 p;    // LpPool exponent
  i64 fn;   // 0 max, 1 avg, 2 lp
};

// padCount: taps start + t*dil (t < k) inside [lo, hi).
__device__ __forceinline__ i64 pad_count(i64 start, i64 dil, i64 k, i64 lo, i64 hi) {
  i64 c = 0;
  for (i64 t = 0; t < k; t++) {
    const i64 q = start + t * dil;
    if (q >= lo && q < hi) c++;
  }
  return c;
}

template <typename T>
__device__ __forceinline__ void pool_body(const PoolArgs& a) {
  const i64 tot = a.nc * a.oh * a.ow;
  const T* X = (const T*)a.x;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 ow = q % a.ow, oh = (q / a.ow) % a.oh, c = q / (a.ow * a.oh);
    const T* xp = X + c * a.h * a.w;
    const i64 hs = oh * a.sh - a.pt, ws = ow * a.sw - a.pl;
    double r = 0;
    if (a.fn == 0) {
      double m = __longlong_as_double((i64)0xfff0000000000000ULL);
      for (i64 kh = 0; kh < a.kh; kh++) {
        const i64 ih = hs + kh * a.dh;
        if (ih < 0 || ih >= a.h) continue;
        for (i64 kw = 0; kw < a.kw; kw++) {
          const i64 iw = ws + kw * a.dw;
          if (iw < 0 || iw >= a.w) continue;
          const double v = (double)tof(xp[ih * a.w + iw]);
          if (v > m || v != v) m = v;
        }
      }
      r = m;
    } else {
      double s = 0;
      i64 nh = 0, nw = 0;
      const double pf = (double)a.p;
      for (i64 kh = 0; kh < a.kh; kh++) {
        const i64 ih = hs + kh * a.dh;
        if (ih < 0 || ih >= a.h) continue;
        nh++;
        nw = 0;
        for (i64 kw = 0; kw < a.kw; kw++) {
          const i64 iw = ws + kw * a.dw;
          if (iw < 0 || iw >= a.w) continue;
          nw++;
          double v = (double)tof(xp[ih * a.w + iw]);
          if (a.fn == 1) {
            s += v;
          } else {
            v = fabs(v);
            s += a.p == 1 ? v : (a.p == 2 ? v * v : pow(v, pf));
          }
        }
      }
      if (a.fn == 1) {
        i64 cnt = nh * nw;  // in-input taps (nw: valid columns of a valid row)
        if (a.cip) cnt = pad_count(hs, a.dh, a.kh, -a.pt, a.h + a.pb) * pad_count(ws, a.dw, a.kw, -a.pl, a.w + a.pr);
        r = cnt > 0 ? s / (double)cnt : 0.0;
      } else {
        r = a.p == 1 ? s : (a.p == 2 ? sqrt(s) : pow(s, 1.0 / pf));
      }
    }
    stv(&((T*)a.y)[q], r);
  }
}

extern "C" __global__ void __launch_bounds__(NT) pool_h(const PoolArgs a) { pool_body<__half>(a); }
extern "C" __global__ void __launch_bounds__(NT) pool_f(const PoolArgs a) { pool_body<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) pool_d(const PoolArgs a) { pool_body<double>(a); }

struct GatherArgs {
  u64 x, idx, y;
  i64 outer, axis, inner, nidx;
  i64 esz;    // element size in bytes
  i64 idx64;  // 1: Idx is i64, 0: i32
  u64 status; // the stream's index status words (flag_index)
  i64 tag;    // launch index + 1, or 0: out-of-range indices are allowed
};

// gather: Y[o, j, i] = X[o, Idx[j], i]; negative indices count from the
// end; indices still out of range give zeros and are flagged (once per
// index) in the status words.
extern "C" __global__ void __launch_bounds__(NT) gather(const GatherArgs a) {
  const i64 tot = a.outer * a.nidx * a.inner;
  const int sz = (int)a.esz;
  for (i64 q = (i64)blockIdx.x * NT + threadIdx.x; q < tot; q += (i64)gridDim.x * NT) {
    const i64 i = q % a.inner, oj = q / a.inner, j = oj % a.nidx, o = oj / a.nidx;
    const i64 raw = a.idx64 ? ((const i64*)a.idx)[j] : (i64)((const int*)a.idx)[j];
    i64 k = raw;
    if (k < 0) k += a.axis;
    const bool ok = k >= 0 && k < a.axis;
    if (!ok && o == 0 && i == 0) flag_index(a.status, a.tag, raw, a.axis);
    const i64 src = (o * a.axis + k) * a.inner + i;
    switch (sz) {
      case 1: ((unsigned char*)a.y)[q] = ok ? ((const unsigned char*)a.x)[src] : 0; break;
      case 2: ((unsigned short*)a.y)[q] = ok ? ((const unsigned short*)a.x)[src] : 0; break;
      case 4: ((unsigned int*)a.y)[q] = ok ? ((const unsigned int*)a.x)[src] : 0; break;
      default: ((u64*)a.y)[q] = ok ? ((const u64*)a.x)[src] : 0; break;
    }
  }
}
