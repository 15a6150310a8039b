#version 450
#extension GL_GOOGLE_include_directive : require
// matmul: tiled shared-memory GEMM with TMxTN register blocking,
//   Y[b] = act(alpha * op(A[b]) op(B[b]) + beta * Bias).
// Spec constants: 0 threads (= WGM*WGN), 1 WGM, 2 WGN, 3 BK; the tile is
// BM = WGM*TM by BN = WGN*TN. All loads and stores are bounds-checked, so
// any M, N, K work.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#ifdef CT_DOUBLE
#include "mathd.glsl"
#include "gen_act_d.glsl"
#else
#include "mathf.glsl"
#include "gen_act_f.glsl"
#endif

layout(constant_id = 1) const uint WGM = 16;
layout(constant_id = 2) const uint WGN = 16;
layout(constant_id = 3) const uint BK = 16;
const uint BM = WGM * TM;
const uint BN = WGN * TN;

layout(push_constant) uniform PC {
	uint M, N, K, flags;
	uint sA, sB, sY, act;
	uint offA, offB, offY, offBias;
	int bs0, bs1;
	uint batch, pad;
	uvec2 alpha, beta, actA, actB;
} pc;
layout(std430, binding = 0) readonly buffer BA { X_T a[]; };
layout(std430, binding = 1) readonly buffer BB { X_T b[]; };
layout(std430, binding = 2) readonly buffer BC { X_T bias[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };

shared CT As[BK * BM];
shared CT Bs[BK * BN];

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint tr = tid / WGN, tc = tid % WGN;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	uint M = pc.M, N = pc.N, K = pc.K;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		CT acc[TM * TN];
		for (uint i = 0u; i < TM * TN; i++) acc[i] = CT(0);
		for (uint k0 = 0u; k0 < K; k0 += BK) {
			for (uint l = tid; l < BM * BK; l += WG) {
				uint m, k;
				if (ta) { k = l / BM; m = l % BM; } else { m = l / BK; k = l % BK; }
				uint gm = m0 + m, gk = k0 + k;
				CT v = CT(0);
				if (gm < M && gk < K) v = CT(X_LD(a[baseA + (ta ? gk * M + gm : gm * K + gk)]));
				As[k * BM + m] = v;
			}
			for (uint l = tid; l < BN * BK; l += WG) {
				uint n, k;
				if (tb) { n = l / BK; k = l % BK; } else { k = l / BN; n = l % BN; }
				uint gn = n0 + n, gk = k0 + k;
				CT v = CT(0);
				if (gn < N && gk < K) v = CT(X_LD(b[baseB + (tb ? gn * K + gk : gk * N + gn)]));
				Bs[k * BN + n] = v;
			}
			barrier();
			for (uint kk = 0u; kk < BK; kk++) {
				CT ra[TM], rb[TN];
				for (uint i = 0u; i < TM; i++) ra[i] = As[kk * BM + tr + i * WGM];
				for (uint j = 0u; j < TN; j++) rb[j] = Bs[kk * BN + tc + j * WGN];
				for (uint i = 0u; i < TM; i++)
					for (uint j = 0u; j < TN; j++) acc[i * TN + j] = fma(ra[i], rb[j], acc[i * TN + j]);
			}
			barrier();
		}
		CT alpha = pc_real(pc.alpha), beta = pc_real(pc.beta);
		CT aa = pc_real(pc.actA), ab = pc_real(pc.actB);
		for (uint i = 0u; i < TM; i++) {
			uint gm = m0 + tr + i * WGM;
			if (gm >= M) continue;
			for (uint j = 0u; j < TN; j++) {
				uint gn = n0 + tc + j * WGN;
				if (gn >= N) continue;
				CT v = alpha * acc[i * TN + j];
				if ((pc.flags & 4u) != 0u) v += beta * CT(X_LD(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]));
				if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
				y[pc.offY + bt * pc.sY + gm * N + gn] = Y_ST(v);
			}
		}
	}
}
