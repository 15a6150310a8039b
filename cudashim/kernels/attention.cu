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

// The tiled kernels (attention_ht, attention_ft: D and Dv up to 64), the
// scheme of attention.comp's tiled variant, for rows that share their
// keys. A block of 64 or 128 threads (blockDim.x) takes blockDim.x/4 query
// rows and walks the keys in blocks of AT_TBK. Thread t belongs to row
// group rg = t/16 (rows rg + nrg*a, a < 4, nrg = blockDim.x/16) and holds
// lane g = t%16 of it: for the scores, keys g and g+16 of the block; for
// the output, dims 4g..4g+3. Scores are 4-row x 2-key register tiles and
// output updates 4-row x 4-dim ones, fed by float4 reads of shared memory.
// The rows' block maxima and final sums go through a small shared table.
#define AT_TQ 32
#define AT_TBK 32
#define AT_QS4 17  // float4 per staged Q or K row: 64 dims and a pad
#define AT_PS4 (AT_TBK / 4 + 1)

template <typename T>
__device__ __forceinline__ void attention_tiled(const AttnArgs& a) {
  __shared__ float4 tq[AT_TQ * AT_QS4];
  __shared__ float4 tk[AT_TBK * AT_QS4];
  __shared__ float4 tv[AT_TBK * 16];
  __shared__ float4 tp[AT_TQ * AT_PS4];
  __shared__ float4 tr[AT_TQ * 4];
  float* tqf = (float*)tq;
  float* tkf = (float*)tk;
  float* tvf = (float*)tv;
  float* tpf = (float*)tp;
  float* trf = (float*)tr;
  const int t = threadIdx.x, nth = blockDim.x, nrg = nth / 16, bq = nth / 4;
  const int rg = t / 16, g = t % 16;
  const i64 wg = blockIdx.x + (i64)blockIdx.y * gridDim.x;
  const i64 bh = wg / a.nqb, qb0 = (wg % a.nqb) * bq;
  const i64 b = bh / a.heads, h = bh % a.heads;
  const int D = (int)a.d, DV = (int)a.dv, DP = (D + 3) & ~3, DV4 = (DV + 3) / 4;
  const i64 LK = a.lk, LQ = a.lq;
  const float scale = (float)a.scale;
  const T* q = (const T*)a.q + b * a.sq[0] + h * a.sq[1];
  const T* k = (const T*)a.k + b * a.sk[0] + h * a.sk[1];
  const T* v = (const T*)a.v + b * a.sv[0] + h * a.sv[1];
  const T* m = a.masked ? (const T*)a.m + b * a.sm[0] + h * a.sm[1] : nullptr;
  T* y = (T*)a.y + b * a.sy[0] + h * a.sy[1];
  const float ninf = __int_as_float(0xff800000);
  for (int e = t; e < bq * DP; e += nth) {
    const int r = e / DP, c = e % DP;
    const i64 i = qb0 + r;
    tqf[r * 4 * AT_QS4 + c] = i < LQ && c < D ? tof(q[i * a.sq[2] + c * a.sq[3]]) * scale : 0.f;
  }
  i64 last[4];
  float mx[4], l[4];
  float4 acc[4];
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const i64 i = qb0 + rg + nrg * u;
    last[u] = i < LQ ? (a.causal ? min(LK, i + LK - LQ + 1) : LK) : 0;
    mx[u] = ninf;
    l[u] = 0.f;
    acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const i64 keys = a.causal ? max((i64)0, min(LK, min(qb0 + bq, LQ) + LK - LQ)) : LK;
  for (i64 j0 = 0; j0 < keys; j0 += AT_TBK) {
    __syncthreads();
    for (int e = t; e < AT_TBK * DP; e += nth) {
      const int r = e / DP, c = e % DP;
      const i64 j = j0 + r;
      tkf[r * 4 * AT_QS4 + c] = j < LK && c < D ? tof(k[j * a.sk[2] + c * a.sk[3]]) : 0.f;
    }
    for (int e = t; e < AT_TBK * DV4 * 4; e += nth) {
      const int r = e / (DV4 * 4), c = e % (DV4 * 4);
      const i64 j = j0 + r;
      tvf[r * 64 + c] = j < LK && c < DV ? tof(v[j * a.sv[2] + c * a.sv[3]]) : 0.f;
    }
    __syncthreads();
    float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
    for (int c4 = 0; c4 < DP / 4; c4++) {
      const float4 k0 = tk[g * AT_QS4 + c4], k1 = tk[(g + 16) * AT_QS4 + c4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const float4 qa = tq[(rg + nrg * u) * AT_QS4 + c4];
        s0[u] = fmaf(qa.x, k0.x, fmaf(qa.y, k0.y, fmaf(qa.z, k0.z, fmaf(qa.w, k0.w, s0[u]))));
        s1[u] = fmaf(qa.x, k1.x, fmaf(qa.y, k1.y, fmaf(qa.z, k1.z, fmaf(qa.w, k1.w, s1[u]))));
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const i64 i = qb0 + rg + nrg * u;
      i64 j = j0 + g;
      s0[u] = j < last[u] ? s0[u] + (m ? tof(m[i * a.sm[2] + j * a.sm[3]]) : 0.f) : ninf;
      j += 16;
      s1[u] = j < last[u] ? s1[u] + (m ? tof(m[i * a.sm[2] + j * a.sm[3]]) : 0.f) : ninf;
      trf[(rg + nrg * u) * 16 + g] = fmaxf(s0[u], s1[u]);
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int r = rg + nrg * u;
      const float4 x0 = tr[r * 4], x1 = tr[r * 4 + 1], x2 = tr[r * 4 + 2], x3 = tr[r * 4 + 3];
      const float mb = fmaxf(fmaxf(fmaxf(fmaxf(x0.x, x0.y), fmaxf(x0.z, x0.w)), fmaxf(fmaxf(x1.x, x1.y), fmaxf(x1.z, x1.w))),
                             fmaxf(fmaxf(fmaxf(x2.x, x2.y), fmaxf(x2.z, x2.w)), fmaxf(fmaxf(x3.x, x3.y), fmaxf(x3.z, x3.w))));
      const float mn = fmaxf(mx[u], mb);
      // Nothing attended yet (mn = -inf): p = 0 and the state stays.
      const bool none = mn == ninf;
      const float alpha = none ? 1.f : __expf(mx[u] - mn);
      const float p0 = none ? 0.f : __expf(s0[u] - mn), p1 = none ? 0.f : __expf(s1[u] - mn);
      l[u] = l[u] * alpha + p0 + p1;
      acc[u].x *= alpha;
      acc[u].y *= alpha;
      acc[u].z *= alpha;
      acc[u].w *= alpha;
      if (!none) mx[u] = mn;
      tpf[r * 4 * AT_PS4 + g] = p0;
      tpf[r * 4 * AT_PS4 + g + 16] = p1;
    }
    __syncthreads();
    if (g < DV4) {
      for (int j4 = 0; j4 < AT_TBK / 4; j4++) {
        const float4 v0 = tv[(4 * j4) * 16 + g], v1 = tv[(4 * j4 + 1) * 16 + g];
        const float4 v2 = tv[(4 * j4 + 2) * 16 + g], v3 = tv[(4 * j4 + 3) * 16 + g];
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float4 p = tp[(rg + nrg * u) * AT_PS4 + j4];
          acc[u].x = fmaf(p.x, v0.x, fmaf(p.y, v1.x, fmaf(p.z, v2.x, fmaf(p.w, v3.x, acc[u].x))));
          acc[u].y = fmaf(p.x, v0.y, fmaf(p.y, v1.y, fmaf(p.z, v2.y, fmaf(p.w, v3.y, acc[u].y))));
          acc[u].z = fmaf(p.x, v0.z, fmaf(p.y, v1.z, fmaf(p.z, v2.z, fmaf(p.w, v3.z, acc[u].z))));
          acc[u].w = fmaf(p.x, v0.w, fmaf(p.y, v1.w, fmaf(p.z, v2.w, fmaf(p.w, v3.w, acc[u].w))));
        }
      }
    }
  }
  // Each lane holds part of its rows' sums: add them up.
  __syncthreads();
#pragma unroll
  for (int u = 0; u < 4; u++) trf[(rg + nrg * u) * 16 + g] = l[u];
  __syncthreads();
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int r = rg + nrg * u;
    const i64 i = qb0 + r;
    if (i >= LQ) continue;
    const float4 x0 = tr[r * 4], x1 = tr[r * 4 + 1], x2 = tr[r * 4 + 2], x3 = tr[r * 4 + 3];
    const float sum = ((x0.x + x0.y) + (x0.z + x0.w)) + ((x1.x + x1.y) + (x1.z + x1.w)) +
                      (((x2.x + x2.y) + (x2.z + x2.w)) + ((x3.x + x3.y) + (x3.z + x3.w)));
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const float o[4] = {acc[u].x * inv, acc[u].y * inv, acc[u].z * inv, acc[u].w * inv};
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int c = 4 * g + w;
      if (c < DV) stv(&y[i * a.sy[2] + c * a.sy[3]], o[w]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) attention_h64(const AttnArgs a) { attention_body<__half, 64>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_f64(const AttnArgs a) { attention_body<float, 64>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_h128(const AttnArgs a) { attention_body<__half, 128>(a); }
extern "C" __global__ void __launch_bounds__(NT) attention_f128(const AttnArgs a) { attention_body<float, 128>(a); }
extern "C" __global__ void __launch_bounds__(128) attention_ht(const AttnArgs a) { attention_tiled<__half>(a); }
extern "C" __global__ void __launch_bounds__(128) attention_ft(const AttnArgs a) { attention_tiled<float>(a); }
