#version 450
#extension GL_GOOGLE_include_directive : require
// splitk: the reduction pass of split-K GEMMs (matmul.comp and
// convgemm.comp built with -DSPLITK). For output element (bt, m, n) of
// batch entries of M x N, it sums the S partials
// part[((bt*S + s)*M + m)*N + n] in order s = 0..S-1 (deterministic),
// then writes
//   Y[offY + bt*sY + m*sYm + (n/OHW)*sYn + n%OHW]
//     = act(alpha*sum + beta*Bias[offBias + bt*sBias + m*bs0 + n*bs1])
// (bias only with flag 1). MatMul passes OHW = N, so n/OHW = 0; Conv
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
	uint act, pad;
	uvec2 alpha, beta, actA, actB;
} pc;
layout(std430, binding = 0) readonly buffer BP { CT part[]; };
layout(std430, binding = 1) readonly buffer BB { X_T bias[]; };
layout(std430, binding = 2) writeonly buffer BY { Y_T y[]; };

void main() {
	uint MN = pc.M * pc.N;
	CT alpha = pc_real(pc.alpha), beta = pc_real(pc.beta);
	CT aa = pc_real(pc.actA), ab = pc_real(pc.actB);
	GRID_LOOP(i, pc.batch * MN) {
		uint bt = i / MN, e = i - bt * MN;
		uint m = e / pc.N, n = e - m * pc.N;
		uint base = bt * pc.S * MN + e;
		CT v = CT(0);
		for (uint s = 0u; s < pc.S; s++) v += part[base + s * MN];
		v *= alpha;
		if ((pc.flags & 1u) != 0u)
			v += beta * CT(X_LD(bias[pc.offBias + bt * pc.sBias + m * uint(pc.bs0) + n * uint(pc.bs1)]));
		if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
		uint img = n / pc.OHW, p = n - img * pc.OHW;
		y[pc.offY + bt * pc.sY + m * pc.sYm + img * pc.sYn + p] = Y_ST(v);
	}
}
