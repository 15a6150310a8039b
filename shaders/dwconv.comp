#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// dwconv: depthwise NCHW convolution (C/groups == 1: every output channel
// k reads only input channel k/(K/groups)), one invocation per output
// element, consecutive invocations along ow. A 3x3 kernel is unrolled,
// with the bounds checks dropped for windows inside the input. Push
// constants are conv.comp's.
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
	uint kg = pc.K / pc.groups;
	bool k3 = pc.KH == 3u && pc.KW == 3u;
	int H = int(pc.H), W = int(pc.W);
	GRID_LOOP(r, total) {
		uint ow = r % pc.OW;
		uint t = r / pc.OW;
		uint oh = t % pc.OH;
		t /= pc.OH;
		uint k = t % pc.K;
		uint n = t / pc.K;
		uint xb = pc.offX + (n * pc.C + k / kg) * pc.H * pc.W;
		uint wb = pc.offW + k * pc.KH * pc.KW;
		int ih0 = int(oh * pc.sh) - int(pc.pt), iw0 = int(ow * pc.sw) - int(pc.pl);
		int dh = int(pc.dh), dw = int(pc.dw);
		CT acc = CT(0);
		if (k3) {
			CT wv[9];
			[[unroll]] for (uint i = 0u; i < 9u; i++) wv[i] = CT(W_LD(w[wb + i]));
			if (ih0 >= 0 && ih0 + 2 * dh < H && iw0 >= 0 && iw0 + 2 * dw < W) {
				uint b = xb + uint(ih0) * pc.W + uint(iw0);
				[[unroll]] for (uint i = 0u; i < 3u; i++)
					[[unroll]] for (uint j = 0u; j < 3u; j++)
						acc = fma(CT(X_LD(x[b + i * pc.dh * pc.W + j * pc.dw])), wv[i * 3u + j], acc);
			} else {
				[[unroll]] for (int i = 0; i < 3; i++) {
					int ih = ih0 + i * dh;
					if (ih < 0 || ih >= H) continue;
					[[unroll]] for (int j = 0; j < 3; j++) {
						int iw = iw0 + j * dw;
						if (iw >= 0 && iw < W) acc = fma(CT(X_LD(x[xb + uint(ih * W + iw)])), wv[i * 3 + j], acc);
					}
				}
			}
		} else {
			for (uint kh = 0u; kh < pc.KH; kh++) {
				int ih = ih0 + int(kh) * dh;
				if (ih < 0 || ih >= H) continue;
				for (uint kw = 0u; kw < pc.KW; kw++) {
					int iw = iw0 + int(kw) * dw;
					if (iw >= 0 && iw < W) acc = fma(CT(X_LD(x[xb + uint(ih * W + iw)])), CT(W_LD(w[wb + kh * pc.KW + kw])), acc);
				}
			}
		}
		if ((pc.flags & 1u) != 0u) acc += CT(X_LD(bias[pc.offB + k]));
		if (pc.act != 0u) acc = act_apply(pc.act, acc, pc_real(pc.actA), pc_real(pc.actB));
		y[pc.offY + r] = Y_ST(acc);
	}
}
