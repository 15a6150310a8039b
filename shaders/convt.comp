#version 450
#extension GL_GOOGLE_include_directive : require
// convt: transposed convolution (gather form), one invocation per output:
// Y[n,k,oh,ow] = bias[k] + sum X[n,c,ih,iw] W[c,k%Kg,kh,kw] over the (c,kh,kw)
// with oh = ih*sh - pt + kh*dh (same for w).
#define RANK 1
#define NOPS 1
#include "common.glsl"

layout(push_constant) uniform PC {
	uint N, C, H, W;
	uint K, OH, OW, KH;
	uint KW, sh, sw, pt;
	uint pl, dh, dw, groups;
	uint offX, offW, offB, offY;
	uint flags;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) readonly buffer BW { X_T w[]; };
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
		uint g = k / kg, kk = k % kg;
		CT acc = CT(0);
		for (uint kh = 0u; kh < pc.KH; kh++) {
			int th = int(oh) + int(pc.pt) - int(kh * pc.dh);
			if (th < 0 || th % int(pc.sh) != 0) continue;
			int ih = th / int(pc.sh);
			if (ih >= int(pc.H)) continue;
			for (uint kw = 0u; kw < pc.KW; kw++) {
				int tw = int(ow) + int(pc.pl) - int(kw * pc.dw);
				if (tw < 0 || tw % int(pc.sw) != 0) continue;
				int iw = tw / int(pc.sw);
				if (iw >= int(pc.W)) continue;
				for (uint c = g * cg; c < (g + 1u) * cg; c++) {
					CT xv = CT(X_LD(x[pc.offX + ((n * pc.C + c) * pc.H + uint(ih)) * pc.W + uint(iw)]));
					CT wv = CT(X_LD(w[pc.offW + ((c * kg + kk) * pc.KH + kh) * pc.KW + kw]));
					acc = fma(xv, wv, acc);
				}
			}
		}
		if ((pc.flags & 1u) != 0u) acc += CT(X_LD(bias[pc.offB + k]));
		y[pc.offY + r] = Y_ST(acc);
	}
}
