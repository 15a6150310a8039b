#version 450
#extension GL_GOOGLE_include_directive : require
// splitk: the reduction pass of split-K GEMMs (matmul.comp and
// convgemm.comp built with -DSPLITK). For output element (bt, m, n) of
// batch entries of M x N, it sums the S partials
// part[((bt*S + s)*M + m)*N + n] in a fixed order (deterministic: four
// running sums over s mod 4, then (s0 + s1) + (s2 + s3)),
// then writes
//   Y[offY + bt*sY + m*sYm + (n/OHW)*sYn + n%OHW]
//     = act(alpha*sum + beta*Bias[offBias + bt*sBias + m*bs0 + n*bs1]
//           + Res[offRes + (the same offsets as Y's)])
// (bias only with flag 1, Res only with flag 2). MatMul passes OHW = N, so n/OHW = 0; Conv
// passes the image/pixel split of its GEMM columns.
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
	uint M, N, S, batch;
	uint OHW, sYn, sYm, sY;
	uint offY, offBias, sBias, flags;
	int bs0, bs1;
	uint act, offRes;
	uvec2 alpha, beta, actA, actB;
} pc;
layout(std430, binding = 0) readonly buffer BP { CT part[]; };
layout(std430, binding = 1) readonly buffer BB { X_T bias[]; };
layout(std430, binding = 2) writeonly buffer BY { Y_T y[]; };
// Res (flag 2): a residual laid out like Y, added before the activation;
// a dummy binding without it.
layout(std430, binding = 3) readonly buffer BR { X_T res[]; };

void main() {
	uint MN = pc.M * pc.N;
	CT alpha = pc_real(pc.alpha), beta = pc_real(pc.beta);
	CT aa = pc_real(pc.actA), ab = pc_real(pc.actB);
	GRID_LOOP(i, pc.batch * MN) {
		uint bt = i / MN, e = i - bt * MN;
		uint m = e / pc.N, n = e - m * pc.N;
		uint base = bt * pc.S * MN + e;
		// four independent sums (more loads in flight), combined in a
		// fixed order
		CT v0 = CT(0), v1 = CT(0), v2 = CT(0), v3 = CT(0);
		uint s = 0u;
		for (; s + 3u < pc.S; s += 4u) {
			v0 += part[base + s * MN];
			v1 += part[base + (s + 1u) * MN];
			v2 += part[base + (s + 2u) * MN];
			v3 += part[base + (s + 3u) * MN];
		}
		for (; s < pc.S; s++) v0 += part[base + s * MN];
		CT v = ((v0 + v1) + (v2 + v3)) * alpha;
		if ((pc.flags & 1u) != 0u)
			v += beta * CT(X_LD(bias[pc.offBias + bt * pc.sBias + m * uint(pc.bs0) + n * uint(pc.bs1)]));
		uint img = n / pc.OHW, p = n - img * pc.OHW;
		uint yi = bt * pc.sY + m * pc.sYm + img * pc.sYn + p;
		if ((pc.flags & 2u) != 0u) v += CT(X_LD(res[pc.offRes + yi]));
		if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
		y[pc.offY + yi] = Y_ST(v);
	}
}
