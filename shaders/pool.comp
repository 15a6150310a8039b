#version 450
#extension GL_GOOGLE_include_directive : require
// pool: 2-D max / average / Lp pooling over [NC, H, W], one invocation per
// output, or (spec constant 2, TILE = 1) poolt's bands of rows.
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
// PV: the outputs per invocation of poolv (spec constant 1: 2 or 4).
layout(constant_id = 1) const uint PV = 4u;
#define PVMAX 4u
#endif

// TILE (spec constant 2): 1 runs poolt (pc.p is its band's output rows).
layout(constant_id = 2) const uint TILE = 0u;
// HMAX: the elements of poolt's shared band (rt/vulkan's poolTileMax).
#define HMAX 3072u
shared CT hm[HMAX];

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

// poolt (TILE = 1): the 3×3, dilation-1 max and average pools, any
// stride. A workgroup owns a band of BR = pc.p output rows of one plane
// (bands looped over the grid). Stage 1 reads each of the band's input
// rows once, coalesced, and reduces it along W into the shared band hm
// (one value per input row and output column); stage 2 reduces three
// rows of hm per output. Where the pool reads each input row from up to
// three output rows' windows (pool3, poolv), this reads it once from
// memory (a band's halo rows twice). In the VEC variants, with stride 2
// and pad at most 1 along W, rows of a multiple of 4 items at an offset
// that is a multiple of 4 and OW <= W/2, stage 1 takes one 128-bit load
// (and one scalar load of the neighbouring column) per two output columns.
CT pool_id() { return pc.fn == 0u ? -CT(M_INF) : CT(0); }
CT pool_op(CT a, CT b) { return pc.fn == 0u ? max(a, b) : a + b; }

// poolt_valid counts the window positions k0 + 0..2 inside [0, n) and
// inside [-lo, n + hi) (the padded extent).
void poolt_valid(int k0, uint n, uint lo, uint hi, out uint v, out uint p) {
	v = 0u;
	p = 0u;
	[[unroll]] for (int k = 0; k < 3; k++) {
		int i = k0 + k;
		v += i >= 0 && i < int(n) ? 1u : 0u;
		p += i >= -int(lo) && i < int(n + hi) ? 1u : 0u;
	}
}

void poolt() {
	uint BR = pc.p, OW = pc.OW, W = pc.W, t = gl_LocalInvocationID.x;
	uint nb = (pc.OH + BR - 1u) / BR;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
#ifdef VEC
	bool vec = pc.sw == 2u && pc.pl <= 1u && (W & 3u) == 0u && 2u * OW <= W && (pc.offX & 3u) == 0u;
#endif
	for (uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; g < pc.NC * nb; g += nwg) {
		uint nc = g / nb, oh0 = (g % nb) * BR;
		uint nr = min(BR, pc.OH - oh0);
		uint rows = (nr - 1u) * pc.sh + 3u;
		int ih0 = int(oh0 * pc.sh) - int(pc.pt);
		uint base = pc.offX + nc * pc.H * W;
#ifdef VEC
		if (vec) {
			// quad q of an input row (columns 4q..4q+3) gives output
			// columns 2q and 2q+1: with pad 1 their windows are 4q-1..4q+1
			// and 4q+1..4q+3, with pad 0 4q..4q+2 and 4q+2..4q+4.
			uint W4 = W >> 2, nq = (OW + 1u) >> 1;
			for (uint e = t; e < rows * nq; e += WG) {
				uint i = e / nq, q = e % nq;
				int ih = ih0 + int(i);
				CT m0 = pool_id(), m1 = pool_id();
				if (ih >= 0 && ih < int(pc.H)) {
					uint rb = base + uint(ih) * W;
					vec4 v = vec4(X_VLD(x4[(rb >> 2) + q]));
					if (pc.pl != 0u) {
						CT l = q > 0u ? CT(X_LD(x[rb + 4u * q - 1u])) : pool_id();
						m0 = pool_op(pool_op(l, CT(v.x)), CT(v.y));
						m1 = pool_op(pool_op(CT(v.y), CT(v.z)), CT(v.w));
					} else {
						CT r = 4u * q + 4u < W ? CT(X_LD(x[rb + 4u * q + 4u])) : pool_id();
						m0 = pool_op(pool_op(CT(v.x), CT(v.y)), CT(v.z));
						m1 = pool_op(pool_op(CT(v.z), CT(v.w)), r);
					}
				}
				hm[i * OW + 2u * q] = m0;
				if (2u * q + 1u < OW) hm[i * OW + 2u * q + 1u] = m1;
			}
		} else
#endif
		{
			for (uint e = t; e < rows * OW; e += WG) {
				uint i = e / OW, ow = e % OW;
				int ih = ih0 + int(i);
				CT m = pool_id();
				if (ih >= 0 && ih < int(pc.H)) {
					uint rb = base + uint(ih) * W;
					int iw0 = int(ow * pc.sw) - int(pc.pl);
					[[unroll]] for (int k = 0; k < 3; k++) {
						int iw = iw0 + k;
						if (iw >= 0 && iw < int(W)) m = pool_op(m, CT(X_LD(x[rb + uint(iw)])));
					}
				}
				hm[i * OW + ow] = m;
			}
		}
		barrier();
		uint yb = pc.offY + (nc * pc.OH + oh0) * OW;
		for (uint e = t; e < nr * OW; e += WG) {
			uint j = e / OW, ow = e % OW;
			uint r0 = j * pc.sh;
			CT acc = pool_op(pool_op(hm[r0 * OW + ow], hm[(r0 + 1u) * OW + ow]), hm[(r0 + 2u) * OW + ow]);
			if (pc.fn != 0u) {
				uint vh, ph, vw, pw;
				poolt_valid(ih0 + int(r0), pc.H, pc.pt, pc.pb, vh, ph);
				poolt_valid(int(ow * pc.sw) - int(pc.pl), W, pc.pl, pc.pr, vw, pw);
				acc /= CT(pc.cip != 0u ? ph * pw : vh * vw);
			}
			y[yb + e] = Y_ST(acc);
		}
		barrier();
	}
}

#ifdef VEC
// poolv (the VEC variants): the 3×3, dilation-1, stride-2 max and average
// pools with pad left at most 1 on rows of a multiple of 4 items (at an
// offset that is a multiple of 4): an invocation computes PV adjacent
// outputs of a row from the 2*PV+2 input columns they span, per input
// row one scalar load (the column left of them), PV/2 vector loads and
// one scalar load (the column right of them), against 9 loads an output
// (clamped into the image and masked after, as in pool3).
void poolv() {
	uint nq = (pc.OW + PV - 1u) / PV;
	uint total = pc.NC * pc.OH * nq;
	uint W = pc.W, W4 = W >> 2;
	bool pl1 = pc.pl != 0u;
	GRID_LOOP(r, total) {
		uint q = r % nq;
		uint t = r / nq;
		uint oh = t % pc.OH;
		uint nc = t / pc.OH;
		int ih0 = int(oh * pc.sh) - int(pc.pt);
		uint c0 = 2u * PV * q; // column of v[.][1], a multiple of 4
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
			v[kh][0] = CT(X_LD(x[rb + min(max(c0, 1u) - 1u, W - 1u)]));
			[[unroll]] for (uint u = 0u; u < PV / 2u; u++) {
				vec4 e = vec4(X_VLD(x4[(rb >> 2) + min(c0 / 4u + u, W4 - 1u)]));
				v[kh][1u + 4u * u] = CT(e.x);
				v[kh][2u + 4u * u] = CT(e.y);
				v[kh][3u + 4u * u] = CT(e.z);
				v[kh][4u + 4u * u] = CT(e.w);
			}
			v[kh][2u * PV + 1u] = CT(X_LD(x[rb + min(c0 + 2u * PV, W - 1u)]));
		}
		uint ybase = pc.offY + (nc * pc.OH + oh) * pc.OW;
		[[unroll]] for (uint i = 0u; i < PV; i++) {
			uint ow = PV * q + i;
			if (ow < pc.OW) {
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
				y[ybase + ow] = Y_ST(acc);
			}
		}
	}
}
#endif

void main() {
	if (TILE != 0u) {
		poolt();
		return;
	}
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
