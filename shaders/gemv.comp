#version 450
#extension GL_GOOGLE_include_directive : require
// gemv: matmul for M == 1 or N == 1: one workgroup per output element,
// invocations split K and combine with a shared-memory tree. Same push
// constants as matmul.comp.
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

void main() {
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
			if (t == 0u) {
				CT v = pc_real(pc.alpha) * sv[0];
				if ((pc.flags & 4u) != 0u) v += pc_real(pc.beta) * CT(X_LD(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]));
				if (pc.act != 0u) v = act_apply(pc.act, v, pc_real(pc.actA), pc_real(pc.actB));
				y[pc.offY + bt * pc.sY + r] = Y_ST(v);
			}
			barrier();
		}
	}
}
