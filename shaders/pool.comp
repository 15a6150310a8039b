#version 450
#extension GL_GOOGLE_include_directive : require
// pool: 2-D max / average / Lp pooling over [NC, H, W], one invocation per
// output.
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

// pool3: the 3×3, dilation-1 max and average pools with their nine loads
// issued together: each is clamped into the image and masked after it
// (the generic loop below waits for one load at a time).
void pool3(uint total) {
	GRID_LOOP(r, total) {
		uint ow = r % pc.OW;
		uint t = r / pc.OW;
		uint oh = t % pc.OH;
		uint nc = t / pc.OH;
		int ih0 = int(oh * pc.sh) - int(pc.pt), iw0 = int(ow * pc.sw) - int(pc.pl);
		uint base = pc.offX + nc * pc.H * pc.W;
		CT v[9];
		bool ok[9];
		uint vh = 0u, vw = 0u, ph = 0u, pw = 0u;
		[[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
			int ih = ih0 + int(kh);
			bool inH = ih >= 0 && ih < int(pc.H);
			vh += inH ? 1u : 0u;
			ph += ih >= -int(pc.pt) && ih < int(pc.H + pc.pb) ? 1u : 0u;
			uint rh = uint(clamp(ih, 0, int(pc.H) - 1));
			[[unroll]] for (uint kw = 0u; kw < 3u; kw++) {
				int iw = iw0 + int(kw);
				bool inW = iw >= 0 && iw < int(pc.W);
				if (kh == 0u) {
					vw += inW ? 1u : 0u;
					pw += iw >= -int(pc.pl) && iw < int(pc.W + pc.pr) ? 1u : 0u;
				}
				v[kh * 3u + kw] = CT(X_LD(x[base + rh * pc.W + uint(clamp(iw, 0, int(pc.W) - 1))]));
				ok[kh * 3u + kw] = inH && inW;
			}
		}
		CT acc;
		if (pc.fn == 0u) {
			acc = -CT(M_INF);
			[[unroll]] for (uint i = 0u; i < 9u; i++) {
				if (ok[i]) acc = max(acc, v[i]);
			}
		} else {
			acc = CT(0);
			[[unroll]] for (uint i = 0u; i < 9u; i++) {
				if (ok[i]) acc += v[i];
			}
			acc /= CT(pc.cip != 0u ? ph * pw : vh * vw);
		}
		y[pc.offY + r] = Y_ST(acc);
	}
}

void main() {
	uint total = pc.NC * pc.OH * pc.OW;
	if (pc.KH == 3u && pc.KW == 3u && pc.dh == 1u && pc.dw == 1u && pc.fn <= 1u && pc.H > 0u && pc.W > 0u) {
		pool3(total);
		return;
	}
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
