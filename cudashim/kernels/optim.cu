// optim.cu: rt.OptimStep, the optimizer update of n parameters in place
// (SGD, Adam/AdamW, AdaGrad, RMSProp, with an optional clipping scale), one
// thread per parameter (grid-stride), in the parameters' dtype: optim_f for
// f32, optim_d for f64. The math and the order of its roundings are
// rt.OptimStep's doc comment (rt/optim.go). build.sh compiles this file on
// its own to optim.ptx, a third PTX module with its own hash
// (optim.ptx.sha256), so that adding it does not invalidate kernels.ptx.
// Absent operands are 0 and never read.
#include "common.cuh"

struct OptimArgs {
  u64 p, g, s1, s2, s3, h, scale;
  i64 n, fn, flags;
  double c0, c1, c2, c3, eps, wd;
};

// Update rules (rt.OptimFn), slots of H (rt.OptimLR, ...) and flag bits
// (rt.OptimFlagScale, ...), checked against package rt by a Go test that
// parses this file.
enum { O_SGD = 0, O_Adam = 1, O_AdaGrad = 2, O_RMSProp = 3 };
enum { OH_LR = 0, OH_FIRST = 1, OH_STEPSIZE = 2, OH_BC2SQRT = 3, OH_DECAY = 4 };
enum { OF_SCALE = 1, OF_WD = 2, OF_MOMENTUM = 4, OF_NESTEROV = 8, OF_DECOUPLED = 16, OF_CENTERED = 32 };

template <typename T>
__device__ __forceinline__ void optim_step(const OptimArgs& a) {
  T* P = (T*)a.p;
  T* G = (T*)a.g;
  T* S1 = (T*)a.s1;
  T* S2 = (T*)a.s2;
  T* S3 = (T*)a.s3;
  const T* H = (const T*)a.h;
  // The coefficients are computed in float64 and rounded to T once, as
  // torch.optim's Python scalars are.
  const T c0 = (T)a.c0, c1 = (T)a.c1, c2 = (T)a.c2, c3 = (T)a.c3, eps = (T)a.eps, wd = (T)a.wd;
  const i64 fl = a.flags;
  const T lr = H[OH_LR];
  const bool first = H[OH_FIRST] != (T)0;
  const T scale = (fl & OF_SCALE) ? ((const T*)a.scale)[0] : (T)1;
  for (i64 i = (i64)blockIdx.x * NT + threadIdx.x; i < a.n; i += (i64)gridDim.x * NT) {
    T p = P[i], g = G[i];
    if (fl & OF_SCALE) {
      g = g * scale;
      G[i] = g;
    }
    if (fl & OF_WD) g = g + wd * p;
    if (a.fn == O_SGD) {
      if (fl & OF_MOMENTUM) {
        const T b = first ? g : S1[i] * c0 + c1 * g;
        S1[i] = b;
        g = (fl & OF_NESTEROV) ? g + c0 * b : b;
      }
      P[i] = p - lr * g;
    } else if (a.fn == O_Adam) {
      if (fl & OF_DECOUPLED) p = p * H[OH_DECAY];
      const T m = S1[i] * c0 + c1 * g;
      const T v = S2[i] * c2 + c3 * g * g;
      S1[i] = m;
      S2[i] = v;
      const T d = m_sqrt(v) / H[OH_BC2SQRT] + eps;
      P[i] = p - H[OH_STEPSIZE] * (m / d);
    } else if (a.fn == O_AdaGrad) {
      const T s = S1[i] + g * g;
      S1[i] = s;
      P[i] = p - lr * (g / (m_sqrt(s) + eps));
    } else {
      const T q = S1[i] * c0 + c1 * g * g;
      S1[i] = q;
      T d;
      if (fl & OF_CENTERED) {
        const T av = S2[i] * c0 + c1 * g;
        S2[i] = av;
        d = m_sqrt(q - av * av);
      } else {
        d = m_sqrt(q);
      }
      d = d + eps;
      if (fl & OF_MOMENTUM) {
        const T b = S3[i] * c2 + g / d;
        S3[i] = b;
        P[i] = p - lr * b;
      } else {
        P[i] = p - lr * (g / d);
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT) optim_f(const OptimArgs a) { optim_step<float>(a); }
extern "C" __global__ void __launch_bounds__(NT) optim_d(const OptimArgs a) { optim_step<double>(a); }
