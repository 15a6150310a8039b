#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// convgemm: implicit-GEMM NCHW convolution with matmul.comp's tiling.
//
// Per group g (workgroup z, grid-strided), Y is the GEMM
//   Yg[m, col] = act(Bias[g*Kg + m] + sum_r Wg[m, r] * Xcol[r, col])
// with Wg = W viewed as [Kg, KD] (Kg = K/G, KD = C/G*KH*KW, row-major, the
// A operand) and Xcol the im2col matrix [KD, NB*OH*OW] (the B operand),
// never materialized: row r = c*KH*KW + kh*KW + kw, column
// col = n*OH*OW + oh*OW + ow is X[n, g*C/G + c, oh*sh - pt + kh*dh,
// ow*sw - pl + kw*dw], zero outside the input. Y[n, g*Kg + m, oh, ow] is
// written in the epilogue with the bias and the fused activation.
//
// The tile geometry (-D BM, BN, BK, TM, TN) and the two-stage K loop are
// matmul.comp's (see there); A is loaded as in its non-transposed case and
// B as in its non-transposed case, so each invocation owns one im2col
// column: its (n, oh, ow) decomposition is computed once per group, and
// each element fetched needs only the (c, kh, kw) split of its row. Flag 2
// (pointwise: 1x1 kernel, unit stride, no padding, OH = H, OW = W) reads
// X[n, c, pixel] directly. Flag 4 adds Res[n, g*Kg + m, oh, ow] (binding
// 4, rt.Conv's residual) before the activation; the split-K variant leaves
// that, the bias and the activation to splitk.comp.
//
// -D SEPDW builds rt.SepConv: the pointwise GEMM of a depthwise-separable
// pair whose B loader computes each depthwise output on the fly,
//   Xcol[c, col] = dwact(DWB[c] + sum_{kh,kw} DWW[c, kh, kw] * X[n, c, ih, iw])
// with ih = oh*sh - pt + kh, iw = ow*sw - pl + kw, zero outside the input,
// so the intermediate never reaches memory. X is the depthwise input
// [N, C, H, W]; OHW, OW, KH, KW, sh, sw, pt, pl are the depthwise
// geometry (unit dilation, one group). The push constants that a single
// group and unit dilation leave free carry the rest (see the defines
// below): the element offsets of DWW (binding 5) and DWB (binding 6, flag
// 8), and the depthwise activation with its two parameters as halves. The
// depthwise kernel is 3x3: fetch only loads the 9 taps of each B element
// into registers (rb holds 9 per element), and store_stage, which runs
// after the multiply of the current slice, weighs and sums them, so the
// loads' latency hides behind the multiply as the plain loader's does.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#ifdef CT_DOUBLE
#include "mathd.glsl"
#include "gen_act_d.glsl"
#define CT4 dvec4
#else
#include "mathf.glsl"
#include "gen_act_f.glsl"
#define CT4 vec4
#endif

#define WGM (BM / TM)
#define WGN (BN / TN)
#define NT (WGM * WGN)
#define BM4 (BM / 4)
#define BN4 (BN / 4)
#define LA (BM * BK / NT)
#define LB (BN * BK / NT)
#define SA (BK * BM4)
#define SB (BK * BN4)

layout(push_constant) uniform PC {
	uint NC, C, H, W;     // NC: GEMM columns (N*OH*OW)
	uint K, Kg, Cg, KD;   // KD: GEMM depth (Cg*KH*KW)
	uint OHW, OW, KH, KW;
	uint sh, sw, pt, pl;
	uint dh, dw, G, flags;
	uint offX, offW, offB, offY;
	uint act, offR; // offR: element offset of Res (flag 4)
	uvec2 actA, actB;
#ifdef SPLITK
	uint S, KS; // K slices per group, GEMM depth per slice
#else
	uint sYn; // elements between the images of Y and Res (K*OHW when dense)
#endif
} pc;
#ifdef SEPDW
#define offDW Cg
#define offDB dh
#define dwAct dw
#define dwActAB G
#define NGROUPS 1u
#define TAPS 9u
layout(std430, binding = 5) readonly buffer BDW { W_T dww[]; };
layout(std430, binding = 6) readonly buffer BDB { X_T dwb[]; };
#else
#define NGROUPS pc.G
#define TAPS 1u
#endif
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) readonly buffer BW { W_T w[]; };
layout(std430, binding = 2) readonly buffer BB { X_T bias[]; };
#ifndef SPLITK
// Res (flag 4): a residual shaped like Y, added before the activation;
// bound to Y's buffer (never read) without it.
layout(std430, binding = 4) readonly buffer BR { X_T res[]; };
#endif
#ifdef SPLITK
// Split-K partial pass (see matmul.comp): z index zz = g*S + s sums depth
// [s*KS, min(KD, (s+1)*KS)) into part[(zz*Kg + m)*NC + col].
layout(std430, binding = 3) writeonly buffer BY { CT part[]; };
#else
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };
#endif

shared CT4 S[2 * SA + 2 * SB];
#define As(i) S[i]
#define Bs(i) S[2u * SA + (i)]
#define CH (WGM * BN)

uint sw4(uint v, uint k) { return v ^ (k & 7u); }

#if (TM != 4 && TM != 8) || CH > 2 * (SA + SB) || (NT % BM) != 0 || (NT % BN) != 0 || (NT % BK) != 0 || (TM % 4) != 0 || (TN % 4) != 0 || BM4 < 8 || BN4 < 8
#error convgemm.comp: unsupported tile geometry
#endif

// Element (m, k) slots of this invocation: A (am0 + r*amS, ak0), B (bn0, bk0 + r*bkS).
#define AK0 (tid % BK)
#define AM0 (tid / BK)
#define AMS (NT / BK)
#define BN0 (tid % BN)
#define BK0 (tid / BN)
#define BKS (NT / BN)

// store_stage stores slice k0 (depth < KE; ok: the column exists).
void store_stage(uint tid, uint st, uint k0, uint KE, bool ok, CT ra[LA], CT rb[LB * TAPS]) {
	[[unroll]] for (uint r = 0u; r < LA; r++) {
		uint m = AM0 + r * AMS, k = AK0;
		As(st * SA + k * BM4 + sw4(m >> 2, k))[m & 3u] = ra[r];
	}
	[[unroll]] for (uint r = 0u; r < LB; r++) {
		uint n = BN0, k = BK0 + r * BKS;
#ifdef SEPDW
		// the depthwise output of channel gk: its 9 taps weighed, the
		// bias and the activation
		uint gk = k0 + k;
		CT v = CT(0);
		if (ok && gk < KE) {
			v = (pc.flags & 8u) != 0u ? CT(X_LD(dwb[pc.offDB + gk])) : CT(0);
			uint wb = pc.offDW + gk * TAPS;
			[[unroll]] for (uint j = 0u; j < TAPS; j++) v = fma(CT(W_LD(dww[wb + j])), rb[r * TAPS + j], v);
			if (pc.dwAct != 0u) {
				vec2 ab = unpackHalf2x16(pc.dwActAB);
				v = act_apply(pc.dwAct, v, CT(ab.x), CT(ab.y));
			}
		}
		Bs(st * SB + k * BN4 + sw4(n >> 2, k))[n & 3u] = v;
#else
		Bs(st * SB + k * BN4 + sw4(n >> 2, k))[n & 3u] = rb[r];
#endif
	}
}

// col_base splits GEMM column col into image n and pixel p.
void col_split(uint col, out uint n, out uint p) {
	n = col / pc.OHW;
	p = col - n * pc.OHW;
}

// fetch loads slice k0 of this invocation's A and B elements. xb is the
// element offset of X[n, g*Cg, 0, 0] of the column, ih0/iw0 its window
// origin, p its pixel; ok = the column exists.
void fetch(uint tid, uint k0, uint KE, uint wbase, uint m0, bool ok, uint xb, int ih0, int iw0, uint p, out CT ra[LA], out CT rb[LB * TAPS]) {
	uint KD = pc.KD;
	[[unroll]] for (uint r = 0u; r < LA; r++) {
		uint gm = m0 + AM0 + r * AMS, gk = k0 + AK0;
		ra[r] = (gm < pc.Kg && gk < KE) ? CT(W_LD(w[wbase + gm * KD + gk])) : CT(0);
	}
	uint khw = pc.KH * pc.KW;
	bool pw = (pc.flags & 2u) != 0u;
	uint hw = pc.H * pc.W;
#ifdef SEPDW
	// the 3x3 taps of channel gk's depthwise window (store_stage sums them)
	[[unroll]] for (uint r = 0u; r < LB; r++) {
		uint gk = k0 + BK0 + r * BKS;
		bool inside = ok && gk < KE;
		uint xc = xb + min(gk, KE - 1u) * hw;
		[[unroll]] for (uint j = 0u; j < TAPS; j++) {
			int ih = ih0 + int(j / 3u), iw = iw0 + int(j % 3u);
			rb[r * TAPS + j] = inside && ih >= 0 && ih < int(pc.H) && iw >= 0 && iw < int(pc.W) ? CT(X_LD(x[xc + uint(ih) * pc.W + uint(iw)])) : CT(0);
		}
	}
#else
	[[unroll]] for (uint r = 0u; r < LB; r++) {
		uint gk = k0 + BK0 + r * BKS;
		CT v = CT(0);
		if (ok && gk < KE) {
			if (pw) {
				v = CT(X_LD(x[xb + gk * hw + p]));
			} else {
				uint c = gk / khw, rem = gk - c * khw;
				uint kh = rem / pc.KW, kw = rem - kh * pc.KW;
				int ih = ih0 + int(kh * pc.dh), iw = iw0 + int(kw * pc.dw);
				if (ih >= 0 && ih < int(pc.H) && iw >= 0 && iw < int(pc.W))
					v = CT(X_LD(x[xb + c * hw + uint(ih) * pc.W + uint(iw)]));
			}
		}
		rb[r] = v;
	}
#endif
}

void epilogue(uint g, CT4 r0[TN / 4], CT4 r1[TN / 4], CT4 r2[TN / 4], CT4 r3[TN / 4], uint grp) {
	uint tid = gl_LocalInvocationID.x;
	uint tr = tid / WGN, tc = tid % WGN;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	[[unroll]] for (uint h = 0u; h < TN / 4u; h++) {
		S[(4u * tr + 0u) * BN4 + h * WGN + tc] = r0[h];
		S[(4u * tr + 1u) * BN4 + h * WGN + tc] = r1[h];
		S[(4u * tr + 2u) * BN4 + h * WGN + tc] = r2[h];
		S[(4u * tr + 3u) * BN4 + h * WGN + tc] = r3[h];
	}
	barrier();
#ifdef SPLITK
	for (uint e = tid; e < 4u * CH; e += NT) {
		uint gm = m0 + g * (4u * WGM) + e / BN, gn = n0 + e % BN;
		if (gm < pc.Kg && gn < pc.NC) part[(grp * pc.Kg + gm) * pc.NC + gn] = S[e / 4u][e & 3u];
	}
#else
	CT aa = pc_real(pc.actA), ab = pc_real(pc.actB);
	bool hasBias = (pc.flags & 1u) != 0u;
	// NT is a multiple of BN, so every element e of this invocation has
	// column e % BN = tid % BN: its image/pixel split is done once (an
	// integer division per element cost the shallow GEMMs of 1x1
	// convolutions much of their time)
	uint gn = n0 + tid % BN;
	uint n, p;
	col_split(min(gn, pc.NC - 1u), n, p);
	uint ybase = n * pc.sYn + p;
	for (uint e = tid; e < 4u * CH; e += NT) {
		uint gm = m0 + g * (4u * WGM) + e / BN;
		if (gm < pc.Kg && gn < pc.NC) {
			uint k = grp * pc.Kg + gm;
			CT v = S[e / 4u][e & 3u];
			if (hasBias) v += CT(X_LD(bias[pc.offB + k]));
			uint yi = ybase + k * pc.OHW;
			if ((pc.flags & 4u) != 0u) v += CT(X_LD(res[pc.offR + yi]));
			if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
			y[pc.offY + yi] = Y_ST(v);
		}
	}
#endif
	barrier();
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint tr = tid / WGN, tc = tid % WGN;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

	// this invocation's im2col column
	uint col = n0 + BN0;
	bool ok = col < pc.NC;
	uint n, p;
	col_split(min(col, pc.NC - 1u), n, p);
	uint oh = p / pc.OW, ow = p - oh * pc.OW;
	int ih0 = int(oh * pc.sh) - int(pc.pt), iw0 = int(ow * pc.sw) - int(pc.pl);

#ifdef SPLITK
	uint nz = NGROUPS * pc.S;
#else
	uint nz = NGROUPS;
#endif
	for (uint zz = gl_WorkGroupID.z; zz < nz; zz += gl_NumWorkGroups.z) {
#ifdef SPLITK
		uint g = zz / pc.S, kb = (zz - g * pc.S) * pc.KS, ke = min(pc.KD, kb + pc.KS);
#else
		uint g = zz, kb = 0u, ke = pc.KD;
#endif
		uint ntiles = ke > kb ? (ke - kb + BK - 1u) / BK : 0u;
		uint wbase = pc.offW + g * pc.Kg * pc.KD;
		uint xb = pc.offX + (n * pc.C + g * pc.Cg) * pc.H * pc.W;
		CT4 acc[TM][TN / 4];
		[[unroll]] for (uint i = 0u; i < TM; i++)
			[[unroll]] for (uint h = 0u; h < TN / 4u; h++) acc[i][h] = CT4(0);
		CT ra[LA], rb[LB * TAPS];
		fetch(tid, kb, ke, wbase, m0, ok, xb, ih0, iw0, p, ra, rb);
		store_stage(tid, 0u, kb, ke, ok, ra, rb);
		barrier();

		for (uint t = 0u; t < ntiles; t++) {
			uint cur = t & 1u;
			bool more = t + 1u < ntiles;
			if (more) fetch(tid, kb + (t + 1u) * BK, ke, wbase, m0, ok, xb, ih0, iw0, p, ra, rb);
			uint sa = cur * SA, sb = cur * SB;
			[[unroll]] for (uint kk = 0u; kk < BK; kk++) {
				CT4 va[TM / 4], vb[TN / 4];
				[[unroll]] for (uint q = 0u; q < TM / 4u; q++) va[q] = As(sa + kk * BM4 + sw4(q * WGM + tr, kk));
				[[unroll]] for (uint h = 0u; h < TN / 4u; h++) vb[h] = Bs(sb + kk * BN4 + sw4(h * WGN + tc, kk));
				[[unroll]] for (uint q = 0u; q < TM / 4u; q++)
					[[unroll]] for (uint c = 0u; c < 4u; c++)
						[[unroll]] for (uint h = 0u; h < TN / 4u; h++)
							acc[q * 4u + c][h] = fma(CT4(va[q][c]), vb[h], acc[q * 4u + c][h]);
			}
			if (more) store_stage(tid, cur ^ 1u, kb + (t + 1u) * BK, ke, ok, ra, rb);
			barrier();
		}

#ifdef SPLITK
		uint grp = zz;
#else
		uint grp = g;
#endif
		epilogue(0u, acc[0], acc[1], acc[2], acc[3], grp);
#if TM == 8
		epilogue(1u, acc[4], acc[5], acc[6], acc[7], grp);
#endif
	}
}
