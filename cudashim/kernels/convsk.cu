// convsk.cu: the small-grid convolution path (cudashim/convsk.go): an
// implicit GEMM on narrow tiles (BM output channels x BN output columns,
// BN = 32) whose GEMM depth R = C/G*KH*KW may be split into `splits`
// slices of `ks` (split-K). With one slice the kernel applies the bias,
// the residual (rt.Conv.Res) and the activation itself; with more, each
// slice writes its partial sums (in the compute type) to the stream's
// scratch buffer, laid out [splits][K][N*OH*OW], and convskr_* adds them
// in slice order (deterministic), then the bias, the residual and the
// activation.
#include "common.cuh"

struct ConvSKArgs {
  u64 x, w, bias, y;  // bias is 0 when absent
  u64 res;            // the residual [N, K, OH, OW], 0 when absent
  u64 scratch;        // the stream's scratch buffer (splits > 1)
  i64 n, c, h, w_;
  i64 k, oh, ow;
  i64 kh, kw;
  i64 sh, sw, pt, pl, dh, dw;
  i64 groups;
  i64 actfn;
  i64 splits;  // K slices, >= 1; gridDim.z = groups * splits
  i64 ks;      // GEMM depth per slice, a multiple of SKBK
  double act_alpha, act_beta;
};

#define SKBK 16

// convsk_body: block (x, y, z) computes output columns [x*BN, x*BN+BN)
// and channels [y*BM, y*BM+BM) of group z / splits over the depth slice
// z % splits. Thread t owns rows (t/16) + 16*i, i < BM/16, and columns
// (t%16) + 16*j, j < BN/16. 32-bit index arithmetic: the Go side checks
// every extent fits (and N*K*OH*OW*splits for the scratch).
template <typename T, int BM, int BN>
__device__ __forceinline__ void convsk_body(const ConvSKArgs& p) {
  typedef typename CT<T>::type C;
  constexpr int MI = BM / 16, NJ = BN / 16;
  static_assert(BM % 16 == 0 && BN % 16 == 0 && (BM * SKBK) % NT == 0 && (BN * SKBK) % NT == 0,
                "convsk tile must divide among NT threads");
  __shared__ C As[SKBK][BM + 1];
  __shared__ C Bs[SKBK][BN + 1];
  const int S = (int)p.splits;
  const int Cg = (int)(p.c / p.groups), Kg = (int)(p.k / p.groups);
  const int P = (int)(p.oh * p.ow), R = Cg * (int)(p.kh * p.kw);
  const int NC = (int)p.n * P;
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int n0 = (int)blockIdx.x * BN, m0 = (int)blockIdx.y * BM;
  const int z = (int)blockIdx.z;
  const int g = z / S, s = z - g * S;
  const int k0 = s * (int)p.ks;
  const int k1 = min(R, k0 + (int)p.ks);
  const T* X = (const T*)p.x;
  const T* W = (const T*)p.w + (i64)g * Kg * R;
  const int H = (int)p.h, Wd = (int)p.w_, KW = (int)p.kw, KK = (int)(p.kh * p.kw);
  const int dh = (int)p.dh, dw = (int)p.dw;
  // The im2col columns this thread loads do not change with the depth:
  // decode them once. xb: the offset of X[n, g*Cg, 0, 0] (-1: past the
  // last column); ih0, iw0: the window's top-left corner.
  int xb[NJ], ih0[NJ], iw0[NJ];
#pragma unroll
  for (int l = 0; l < NJ; l++) {
    const int idx = tid + NT * l;
    const int gn = n0 + (idx - (idx / BN) * BN);
    xb[l] = -1;
    ih0[l] = 0;
    iw0[l] = 0;
    if (gn < NC) {
      const int nn = gn / P, pp = gn - nn * P;
      const int oh = pp / (int)p.ow, ow = pp - oh * (int)p.ow;
      xb[l] = (nn * (int)p.c + g * Cg) * H * Wd;
      ih0[l] = oh * (int)p.sh - (int)p.pt;
      iw0[l] = ow * (int)p.sw - (int)p.pl;
    }
  }
  C acc[MI][NJ];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++) acc[i][j] = (C)0;
  for (int kb = k0; kb < k1; kb += SKBK) {
#pragma unroll
    for (int l = 0; l < (BM * SKBK) / NT; l++) {
      const int idx = tid + NT * l;
      const int am = idx >> 4, ak = idx & 15;
      const int gm = m0 + am, gk = kb + ak;
      As[ak][am] = (gm < Kg && gk < k1) ? (C)tof(W[(i64)gm * R + gk]) : (C)0;
    }
#pragma unroll
    for (int l = 0; l < (BN * SKBK) / NT; l++) {
      const int idx = tid + NT * l;
      const int bk = idx / BN, bn = idx - bk * BN;
      const int gk = kb + bk;
      C v = (C)0;
      if (xb[l] >= 0 && gk < k1) {
        int c = gk, kh = 0, kw = 0;
        if (KK != 1) {
          c = gk / KK;
          const int rem = gk - c * KK;
          kh = rem / KW;
          kw = rem - kh * KW;
        }
        const int ih = ih0[l] + kh * dh, iw = iw0[l] + kw * dw;
        if (ih >= 0 && ih < H && iw >= 0 && iw < Wd) v = (C)tof(X[xb[l] + (c * H + ih) * Wd + iw]);
      }
      Bs[bk][bn] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < SKBK; kk++) {
      C av[MI], bv[NJ];
#pragma unroll
      for (int i = 0; i < MI; i++) av[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < NJ; j++) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  const T* bias = (const T*)p.bias;
  const T* res = (const T*)p.res;
  T* y = (T*)p.y;
  C* part = (C*)p.scratch;
#pragma unroll
  for (int i = 0; i < MI; i++) {
    const int m = m0 + ty + 16 * i;
    if (m >= Kg) continue;
    const i64 kout = (i64)g * Kg + m;
    const C b0 = (bias && S == 1) ? (C)tof(bias[kout]) : (C)0;
#pragma unroll
    for (int j = 0; j < NJ; j++) {
      const int q = n0 + tx + 16 * j;
      if (q >= NC) continue;
      if (S > 1) {
        part[((i64)s * p.k + kout) * NC + q] = acc[i][j];
        continue;
      }
      const int nn = q / P, pp = q - nn * P;
      const i64 oi = ((i64)nn * p.k + kout) * P + pp;
      C v = acc[i][j] + b0;
      if (res) v += (C)tof(res[oi]);
      if (p.actfn != U_Copy) v = act_call<C>((int)p.actfn, v, p.act_alpha, p.act_beta);
      stv(&y[oi], v);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) convsk_h_n(const ConvSKArgs p) { convsk_body<__half, 128, 32>(p); }
extern "C" __global__ void __launch_bounds__(NT) convsk_h_u(const ConvSKArgs p) { convsk_body<__half, 64, 32>(p); }
extern "C" __global__ void __launch_bounds__(NT) convsk_f_n(const ConvSKArgs p) { convsk_body<float, 128, 32>(p); }
extern "C" __global__ void __launch_bounds__(NT) convsk_f_u(const ConvSKArgs p) { convsk_body<float, 64, 32>(p); }
extern "C" __global__ void __launch_bounds__(NT) convsk_d_n(const ConvSKArgs p) { convsk_body<double, 128, 32>(p); }
extern "C" __global__ void __launch_bounds__(NT) convsk_d_u(const ConvSKArgs p) { convsk_body<double, 64, 32>(p); }

// convskr_body: one thread per output element Y[n, k, oh, ow]: the sum of
// the splits partials in slice order, plus the bias and the residual,
// through the activation.
template <typename T>
__device__ __forceinline__ void convskr_body(const ConvSKArgs& p) {
  typedef typename CT<T>::type C;
  const i64 P = p.oh * p.ow, NC = p.n * P, tot = NC * p.k, S = p.splits;
  const C* part = (const C*)p.scratch;
  const T* bias = (const T*)p.bias;
  const T* res = (const T*)p.res;
  T* y = (T*)p.y;
  for (i64 o = (i64)blockIdx.x * NT + threadIdx.x; o < tot; o += (i64)gridDim.x * NT) {
    const i64 pp = o % P, t = o / P;
    const i64 kout = t % p.k, nn = t / p.k;
    const i64 q = nn * P + pp;
    C v = (C)0;
    for (i64 s = 0; s < S; s++) v += part[(s * p.k + kout) * NC + q];
    if (bias) v += (C)tof(bias[kout]);
    if (res) v += (C)tof(res[o]);
    if (p.actfn != U_Copy) v = act<C>((int)p.actfn, v, p.act_alpha, p.act_beta);
    stv(&y[o], v);
  }
}

extern "C" __global__ void __launch_bounds__(NT) convskr_h(const ConvSKArgs p) { convskr_body<__half>(p); }
extern "C" __global__ void __launch_bounds__(NT) convskr_f(const ConvSKArgs p) { convskr_body<float>(p); }
extern "C" __global__ void __launch_bounds__(NT) convskr_d(const ConvSKArgs p) { convskr_body<double>(p); }
