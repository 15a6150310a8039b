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
#ifdef VEC
#include "vec.glsl"
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
layout(std430, binding = 1) writeonly buffer BY4 { Y_VT y4[]; };
#if Y_DT == 2
layout(std430, binding = 1) writeonly buffer BY2 { f16vec2 y2[]; };
#define Y_V2ST(v) f16vec2(v)
#else
layout(std430, binding = 1) writeonly buffer BY2 { vec2 y2[]; };
#define Y_V2ST(v) (v)
#endif
// PV: the outputs per invocation of poolv (spec constant 1: 2 or 4).
layout(constant_id = 1) const uint PV = 4u;
#define PVMAX 4u
#endif

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

#ifdef VEC
// poolv (the VEC variants): the 3×3, dilation-1, stride-2 max and average
// pools with pad left at most 1 on rows of a multiple of 4 items (at an
// offset that is a multiple of 4): an invocation computes PV adjacent
// outputs of a row from the 2*PV+1 input columns they span. Per input row
// it makes PV/2 vector loads and one scalar load, of the one column
// outside them that its pad needs (left of them with pad 1, right of them
// with pad 0). Where the row length and Y's offset are multiples of PV,
// the PV outputs go out as one vector store. (Taking that column from the
// neighbouring invocation through a subgroup shuffle instead was slower:
// 0.85 of copy against 0.91 on an H100.)
void poolv() {
	uint nq = (pc.OW + PV - 1u) / PV;
	uint total = pc.NC * pc.OH * nq;
	uint W = pc.W, W4 = W >> 2;
	bool pl1 = pc.pl != 0u;
	bool vst = ((pc.OW | pc.offY) & (PV - 1u)) == 0u;
	GRID_LOOP(r, total) {
		uint q = r % nq;
		uint t = r / nq;
		uint oh = t % pc.OH;
		uint nc = t / pc.OH;
		int ih0 = int(oh * pc.sh) - int(pc.pt);
		uint c0 = 2u * PV * q; // column of v[.][1], a multiple of 4
		// the column outside the vectors: left of them (pad 1) or right
		uint ce = min(pl1 ? max(c0, 1u) - 1u : c0 + 2u * PV, W - 1u);
		uint base = pc.offX + nc * pc.H * W;
		CT v[3][2u * PVMAX + 2u];
		bool okH[3];
		uint vh = 0u, ph = 0u;
		[[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
			int ih = ih0 + int(kh);
			okH[kh] = ih >= 0 && ih < int(pc.H);
			vh += okH[kh] ? 1u : 0u;
			ph += ih >= -int(pc.pt) && ih < int(pc.H + pc.pb) ? 1u : 0u;
			uint rb = base + uint(clamp(ih, 0, int(pc.H) - 1)) * W;
			[[unroll]] for (uint u = 0u; u < PV / 2u; u++) {
				vec4 e = vec4(X_VLD(x4[(rb >> 2) + min(c0 / 4u + u, W4 - 1u)]));
				v[kh][1u + 4u * u] = CT(e.x);
				v[kh][2u + 4u * u] = CT(e.y);
				v[kh][3u + 4u * u] = CT(e.z);
				v[kh][4u + 4u * u] = CT(e.w);
			}
			CT edge = CT(X_LD(x[rb + ce]));
			v[kh][0] = edge;
			v[kh][2u * PV + 1u] = edge;
		}
		CT outs[PVMAX];
		for (uint i = 0u; i < PV; i++) {
			CT acc = pc.fn == 0u ? -CT(M_INF) : CT(0);
			uint vw = 0u, pw = 0u;
			[[unroll]] for (uint kw = 0u; kw < 3u; kw++) {
				// input column c0 + 2i - pl + kw: v[.][2i + kw] with pad 1,
				// v[.][2i + kw + 1] with pad 0
				int iw = int(c0 + 2u * i + kw) - int(pc.pl);
				bool inW = iw >= 0 && iw < int(W);
				vw += inW ? 1u : 0u;
				pw += iw >= -int(pc.pl) && iw < int(W + pc.pr) ? 1u : 0u;
				[[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
					CT e = pl1 ? v[kh][2u * i + kw] : v[kh][2u * i + kw + 1u];
					if (inW && okH[kh]) acc = pc.fn == 0u ? max(acc, e) : acc + e;
				}
			}
			if (pc.fn != 0u) acc /= CT(pc.cip != 0u ? ph * pw : vh * vw);
			outs[i] = acc;
		}
		uint ybase = pc.offY + (nc * pc.OH + oh) * pc.OW + PV * q;
		if (vst && PV == 4u) {
			y4[ybase >> 2] = Y_VST(vec4(outs[0], outs[1], outs[2], outs[3]));
		} else if (vst && PV == 2u) {
			y2[ybase >> 1] = Y_V2ST(vec2(outs[0], outs[1]));
		} else {
			for (uint i = 0u; i < PV; i++) {
				if (PV * q + i < pc.OW) y[ybase + i] = Y_ST(outs[i]);
			}
		}
	}
}
#endif

void main() {
#ifdef VEC
	poolv();
	return;
#endif
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
