// attention.cu: rt.Attention, fused scaled dot-product attention, flash
// style (the same scheme as shaders/attention.comp). One block of NT
// threads per (batch*head, block of AT_BQ query rows), AT_LANES threads
// per query row. The block walks the keys in blocks of AT_BK: it stages
// the block's K and V rows in shared memory, each lane scores
// AT_BK/AT_LANES keys of its row against the row's Q (scaled, in shared
// memory) into a shared AT_BQ x AT_BK tile, and then every lane of the
// row folds the tile into the row's running max, sum and output with an
// online softmax, for its DMAX/AT_LANES output dims (lane, lane+AT_LANES,
// ...). No score tensor reaches global memory. Compute is in f32 for f32
// and f16 storage.

struct AttnArgs {
  u64 q, k, v, m, y;
  i64 lq, lk, d, dv, heads, nqb, causal, masked;
  double scale;
  i64 sq[4], sk[4], sv[4], sm[4], sy[4];  // strides [b, h, row, col] in elements
};

#define AT_LANES 16
#define AT_BK 32
#define AT_BQ (NT / AT_LANES)

template <typename T, int DMAX>
__device__ __forceinline__ void attention_body(const AttnArgs& a) {
  constexpr int DL = DMAX / AT_LANES;
  __shared__ float qs[AT_BQ][DMAX + 1];
  __shared__ float ks[AT_BK][DMAX + 1];
  __shared__ float vs[AT_BK][DMAX];
  __shared__ float ss[AT_BQ][AT_BK + 1];
  const int t = threadIdx.x, row = t / AT_LANES, lane = t % AT_LANES;
  const i64 wg = blockIdx.x + (i64)blockIdx.y * gridDim.x;
  const i64 bh = wg / a.nqb, qb0 = (wg % a.nqb) * AT_BQ;
  const i64 b = bh / a.heads, h = bh % a.heads;
  const int D = (int)a.d, DV = (int)a.dv;
  const i64 LK = a.lk, LQ = a.lq;
  const float scale = (float)a.scale;
  const T* q = (const T*)a.q + b * a.sq[0] + h * a.sq[1];
  const T* k = (const T*)a.k + b * a.sk[0] + h * a.sk[1];
  const T* v = (const T*)a.v + b * a.sv[0] + h * a.sv[1];
  const T* m = a.masked ? (const T*)a.m + b * a.sm[0] + h * a.sm[1] : nullptr;
  T* y = (T*)a.y + b * a.sy[0] + h * a.sy[1];
  for (int e = t; e < AT_BQ * D; e += NT) {
    const int r = e / D, c = e % D;
    const i64 i = qb0 + r;
    qs[r][c] = i < LQ ? tof(q[i * a.sq[2] + c * a.sq[3]]) * scale : 0.f;
  }
  const i64 i = qb0 + row;
  const i64 lastKey = a.causal ? min(LK, i + LK - LQ + 1) : LK;
  const float ninf = __int_as_float(0xff800000);
  float mx = ninf, l = 0.f;
  float acc[DL];
#pragma unroll
  for (int u = 0; u < DL; u++) acc[u] = 0.f;
  for (i64 j0 = 0; j0 < LK; j0 += AT_BK) {
    __syncthreads();
    for (int e = t; e < AT_BK * D; e += NT) {
      const int r = e / D, c = e % D;
      const i64 j = j0 + r;
      ks[r][c] = j < LK ? tof(k[j * a.sk[2] + c * a.sk[3]]) : 0.f;
    }
    for (int e = t; e < AT_BK * DV; e += NT) {
      const int r = e / DV, c = e % DV;
      const i64 j = j0 + r;
      vs[r][c] = j < LK ? tof(v[j * a.sv[2] + c * a.sv[3]]) : 0.f;
    }
    __syncthreads();
    for (int kk = lane; kk < AT_BK; kk += AT_LANES) {
      const i64 j = j0 + kk;
      float s = ninf;
      if (j < lastKey && i < LQ) {
        s = 0.f;
        for (int c = 0; c < D; c++) s = fmaf(qs[row][c], ks[kk][c], s);
        if (m) s += tof(m[i * a.sm[2] + j * a.sm[3]]);
      }
      ss[row][kk] = s;
    }
    __syncthreads();
    float mb = ninf;
#pragma unroll 8
    for (int kk = 0; kk < AT_BK; kk++) mb = fmaxf(mb, ss[row][kk]);
    const float mn = fmaxf(mx, mb);
    if (mn == ninf) continue;  // nothing attended yet
    const float alpha = __expf(mx - mn);
    l *= alpha;
#pragma unroll
    for (int u = 0; u < DL; u++) acc[u] *= alpha;
    for (int kk = 0; kk < AT_BK; kk++) {
      const float p = __expf(ss[row][kk] - mn);
      l += p;
#pragma unroll
      for (int u = 0; u < DL; u++) acc[u] = fmaf(p, vs[kk][lane + u * AT_LANES], acc[u]);
    }
    mx = mn;
  }
  if (i >= LQ) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int u = 0; u < DL; u++) {
    const int c = lane + u * AT_LANES;
    if (c < DV) stv(&y[i * a.sy[2] + c * a.sy[3]], acc[u] * inv);
  }
}

extern "C" __global__ void __launch_bounds__(NT) attention_h64(const AttnArgs a) { attention_body<__half, 64>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_f64(const AttnArgs a) { attention_body<float, 64>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_h128(const AttnArgs a) { attention_body<__half, 128>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_f128(const AttnArgs a) { attention_body<float, 128>(a); }
