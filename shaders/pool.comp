#version 450
#extension GL_GOOGLE_include_directive : require
// pool: 2-D max / average / Lp pooling over [NC, H, W], one invocation per output.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#ifdef CT_DOUBLE
#include "mathd.glsl"
#else
#include "mathf.glsl"
#endif

layout(push_constant) uniform PC {
	uint NC, H, W, OH;
	uint OW, KH, KW, sh;
	uint sw, pt, pl, pb;
	uint pr, dh, dw, fn;
	uint cip, p, offX, offY;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };

void main() {
	uint total = pc.NC * pc.OH * pc.OW;
	GRID_LOOP(r, total) {
		uint ow = r % pc.OW;
		uint t = r / pc.OW;
		uint oh = t % pc.OH;
		uint nc = t / pc.OH;
		int ih0 = int(oh * pc.sh) - int(pc.pt), iw0 = int(ow * pc.sw) - int(pc.pl);
		CT acc = pc.fn == 0u ? -CT(M_INF) : CT(0);
		uint cnt = 0u, padcnt = 0u;
		CT pp = CT(pc.p);
		for (uint kh = 0u; kh < pc.KH; kh++) {
			int ih = ih0 + int(kh * pc.dh);
			bool inH = ih >= 0 && ih < int(pc.H);
			bool inPH = ih >= -int(pc.pt) && ih < int(pc.H + pc.pb);
			for (uint kw = 0u; kw < pc.KW; kw++) {
				int iw = iw0 + int(kw * pc.dw);
				bool inW = iw >= 0 && iw < int(pc.W);
				if (inPH && iw >= -int(pc.pl) && iw < int(pc.W + pc.pr)) padcnt++;
				if (!inH || !inW) continue;
				CT v = CT(X_LD(x[pc.offX + (nc * pc.H + uint(ih)) * pc.W + uint(iw)]));
				cnt++;
				if (pc.fn == 0u) acc = max(acc, v);
				else if (pc.fn == 1u) acc += v;
				else acc += pc.p == 1u ? abs(v) : (pc.p == 2u ? v * v : M_POW(abs(v), pp));
			}
		}
		if (pc.fn == 1u) acc /= CT(pc.cip != 0u ? padcnt : cnt);
		if (pc.fn == 2u) acc = pc.p == 1u ? acc : (pc.p == 2u ? sqrt(acc) : M_POW(acc, CT(1) / pp));
		y[pc.offY + r] = Y_ST(acc);
	}
}
