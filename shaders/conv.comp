#version 450
#extension GL_GOOGLE_include_directive : require
// conv: direct NCHW convolution, one invocation per output element, with
// groups, stride, dilation, padding, bias and a fused activation.
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
	uint N, C, H, W;
	uint K, OH, OW, KH;
	uint KW, sh, sw, pt;
	uint pl, dh, dw, groups;
	uint offX, offW, offB, offY;
	uint flags, act, pad0, pad1;
	uvec2 actA, actB;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) readonly buffer BW { W_T w[]; };
layout(std430, binding = 2) readonly buffer BB { X_T bias[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };

void main() {
	uint total = pc.N * pc.K * pc.OH * pc.OW;
	uint cg = pc.C / pc.groups, kg = pc.K / pc.groups;
	GRID_LOOP(r, total) {
		uint ow = r % pc.OW;
		uint t = r / pc.OW;
		uint oh = t % pc.OH;
		t /= pc.OH;
		uint k = t % pc.K;
		uint n = t / pc.K;
		uint g = k / kg;
		CT acc = CT(0);
		int ih0 = int(oh * pc.sh) - int(pc.pt), iw0 = int(ow * pc.sw) - int(pc.pl);
		for (uint c = 0u; c < cg; c++) {
			uint xb = pc.offX + (n * pc.C + g * cg + c) * pc.H * pc.W;
			uint wb = pc.offW + (k * cg + c) * pc.KH * pc.KW;
			for (uint kh = 0u; kh < pc.KH; kh++) {
				int ih = ih0 + int(kh * pc.dh);
				if (ih < 0 || ih >= int(pc.H)) continue;
				for (uint kw = 0u; kw < pc.KW; kw++) {
					int iw = iw0 + int(kw * pc.dw);
					if (iw < 0 || iw >= int(pc.W)) continue;
					acc = fma(CT(X_LD(x[xb + uint(ih) * pc.W + uint(iw)])), CT(W_LD(w[wb + kh * pc.KW + kw])), acc);
				}
			}
		}
		if ((pc.flags & 1u) != 0u) acc += CT(X_LD(bias[pc.offB + k]));
		if (pc.act != 0u) acc = act_apply(pc.act, acc, pc_real(pc.actA), pc_real(pc.actB));
		y[pc.offY + r] = Y_ST(acc);
	}
}
