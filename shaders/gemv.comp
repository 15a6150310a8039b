#version 450
#extension GL_GOOGLE_include_directive : require
// gemv: matmul for M == 1 or N == 1. Same push constants as matmul.comp.
//
// Row mode (flags bit 3 clear) serves outputs whose two operands are both
// contiguous along K: one workgroup per output element, invocations split
// K and combine with a shared-memory tree.
//
// Column mode (bit 3 set) serves y[j] = sum_k v[k] * W[k*L + j], where W
// is contiguous along the outputs (M == 1 with B not transposed, W = B,
// L = N; or N == 1 with A transposed, W = A, L = M, flags bit 4): a
// workgroup owns 32 consecutive outputs, its WG/32 subgroups of 32 split
// K, so every load of W is a coalesced 128-byte row segment.
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

shared CT sv[WG];

void epilogue(uint bt, uint gm, uint gn, CT acc) {
	CT v = pc_real(pc.alpha) * acc;
	if ((pc.flags & 4u) != 0u) v += pc_real(pc.beta) * CT(X_LD(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]));
	if (pc.act != 0u) v = act_apply(pc.act, v, pc_real(pc.actA), pc_real(pc.actB));
	y[pc.offY + bt * pc.sY + gm * pc.N + gn] = Y_ST(v);
}

#define CW 32u

void column() {
	uint t = gl_LocalInvocationID.x;
	uint c = t % CW, s = t / CW, ns = WG / CW;
	bool wa = (pc.flags & 16u) != 0u; // W is A (N == 1)
	uint L = wa ? pc.M : pc.N, K = pc.K;
	uint ngroups = (L + CW - 1u) / CW;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseV = wa ? pc.offB + bt * pc.sB : pc.offA + bt * pc.sA;
		uint baseW = wa ? pc.offA + bt * pc.sA : pc.offB + bt * pc.sB;
		for (uint w = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; w < ngroups; w += nwg) {
			uint j = w * CW + c;
			CT acc0 = CT(0), acc1 = CT(0), acc2 = CT(0), acc3 = CT(0);
			if (j < L) {
				uint k = s;
				if (wa) {
					for (; k + 3u * ns < K; k += 4u * ns) {
						acc0 = fma(CT(X_LD(b[baseV + k])), CT(X_LD(a[baseW + k * L + j])), acc0);
						acc1 = fma(CT(X_LD(b[baseV + k + ns])), CT(X_LD(a[baseW + (k + ns) * L + j])), acc1);
						acc2 = fma(CT(X_LD(b[baseV + k + 2u * ns])), CT(X_LD(a[baseW + (k + 2u * ns) * L + j])), acc2);
						acc3 = fma(CT(X_LD(b[baseV + k + 3u * ns])), CT(X_LD(a[baseW + (k + 3u * ns) * L + j])), acc3);
					}
					for (; k < K; k += ns) acc0 = fma(CT(X_LD(b[baseV + k])), CT(X_LD(a[baseW + k * L + j])), acc0);
				} else {
					for (; k + 3u * ns < K; k += 4u * ns) {
						acc0 = fma(CT(X_LD(a[baseV + k])), CT(X_LD(b[baseW + k * L + j])), acc0);
						acc1 = fma(CT(X_LD(a[baseV + k + ns])), CT(X_LD(b[baseW + (k + ns) * L + j])), acc1);
						acc2 = fma(CT(X_LD(a[baseV + k + 2u * ns])), CT(X_LD(b[baseW + (k + 2u * ns) * L + j])), acc2);
						acc3 = fma(CT(X_LD(a[baseV + k + 3u * ns])), CT(X_LD(b[baseW + (k + 3u * ns) * L + j])), acc3);
					}
					for (; k < K; k += ns) acc0 = fma(CT(X_LD(a[baseV + k])), CT(X_LD(b[baseW + k * L + j])), acc0);
				}
			}
			sv[t] = (acc0 + acc1) + (acc2 + acc3);
			barrier();
			if (s == 0u && j < L) {
				CT sum = CT(0);
				for (uint q = 0u; q < ns; q++) sum += sv[q * CW + c];
				if (wa) epilogue(bt, j, 0u, sum);
				else epilogue(bt, 0u, j, sum);
			}
			barrier();
		}
	}
}

void main() {
	if ((pc.flags & 8u) != 0u) {
		column();
		return;
	}
	uint t = gl_LocalInvocationID.x;
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	uint M = pc.M, N = pc.N, K = pc.K;
	uint total = M * N;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < total; r += nwg) {
			uint gm = r / N, gn = r % N;
			CT acc = CT(0);
			for (uint k = t; k < K; k += WG) {
				CT av = CT(X_LD(a[baseA + (ta ? k * M + gm : gm * K + k)]));
				CT bv = CT(X_LD(b[baseB + (tb ? gn * K + k : k * N + gn)]));
				acc = fma(av, bv, acc);
			}
			sv[t] = acc;
			barrier();
			for (uint s = WG / 2u; s > 0u; s >>= 1) {
				if (t < s) sv[t] += sv[t + s];
				barrier();
			}
			if (t == 0u) epilogue(bt, gm, gn, sv[0]);
			barrier();
		}
	}
}
