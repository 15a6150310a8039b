#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef KHR
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
// convcm: convgemm.comp's implicit-GEMM convolution on subgroup-scope
// cooperative matrices (NV, or KHR with -D KHR=1: coopmat.glsl), for f16
// weights with f32 activations (rt.HalfWeights): the
// products are f16 x f16 on the tensor cores, accumulated in f32. W is
// the A operand ([Kg, KD] per group, f16 as stored), the im2col matrix of
// X the B operand ([KD, NB*OH*OW], never materialized), its elements
// rounded to f16 as they are loaded. Bias, the residual (flag 4) and the
// activation are applied in f32 in the epilogue; push constants, flags 1,
// 2 and 4, the group loop and the split-K partial pass (-D SPLITK, its
// reduction splitk.comp) are convgemm.comp's.
//
// A workgroup of 128 invocations (4 subgroups of 32, or 16 of 8 with -D
// SGS=8) computes a 64 x 64 block of Yg (64 output channels by 64 im2col
// columns); subgroups form an SGR x SGR grid (2 x 2, or 4 x 4) and
// subgroup s owns the WM x WN sub-block at rows (s/SGR)*WM, columns
// (s%SGR)*WN as FM x FN accumulators of the MS x NS x KS shape (-D MS, NS,
// KS). K is walked in slices of BK (-D BKN, 64 or 32) through one
// shared-memory stage prefetched into registers, as in mmcm.comp: store
// slice t, barrier, issue the global loads of slice t+1, multiply slice
// t, barrier.
//
// Both tiles move in chunks of 8 halves (one uvec4) and live in shared
// memory with rows skewed by 8 halves, so that the rows of a fragment
// load hit distinct banks: A (W) as [64][BK+8], B as [BK][64+8].
// A's chunk is one uvec4 load when the host found the group's rows
// 16-byte aligned (flag 16: KD and W's offset multiples of 8, and split-K
// slices multiples of 8, so that a chunk is wholly in or out of the
// slice), else 8 bounds-checked half loads. Each invocation loads 8
// adjacent im2col columns of BK/16 rows of B: the columns' image, pixel
// and window origin are computed once, a row's (c, kh, kw) once a slice,
// and the 8 elements are rounded to f16 and packed into one chunk. A
// pointwise row of 8 pixels of one image from a multiple of 4 is two vec4
// loads where X's channel planes are 16-byte aligned (flag 32).
//
// The epilogue reuses A's space for the block's f32 accumulators,
// [64][64]; each invocation then finishes 32 rows of one column,
// coalesced along the pixels.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"
#include "gen_act_f.glsl"
#include "coopmat.glsl"

#define BM 64u
#define BN 64u
#ifndef BKN
#define BKN 64
#endif
#define BK uint(BKN)
#define NT 128u
#if SGS == 32
#define SGRN 2
#elif SGS == 8
#define SGRN 4
#endif
#define SGR uint(SGRN)
#define WM (BM / SGR) // rows and columns of a subgroup's sub-block
#define WN (BN / SGR)
#define FM (WM / MS)
#define FN (WN / NS)
#define LDA (BK + 8u)          // halves per shared row of A
#define LDB (BN + 8u)          // halves per shared row of B
#define A4 (BM * LDA / 8u)     // uvec4s of the A tile
#define B4 (BK * LDB / 8u)     // uvec4s of the B tile
#define SCR4 (BM * BN / 4u)    // uvec4s of the f32 epilogue block
#define CA (BM * BK / 8u / NT) // A chunks per invocation
#define CPT 8u                 // B columns per invocation
#define TPR (BN / CPT)         // invocations per B row
#define RS (NT / TPR)          // B rows between an invocation's rows
#define RB (BK / RS)           // B rows per invocation

#if (KS != 16 && !(KS == 8 && SGS == 8)) || (SGS != 32 && SGS != 8) || (64 / SGRN) % MS != 0 || (64 / SGRN) % NS != 0 || (BKN != 32 && BKN != 64)
#error convcm.comp: unsupported shape
#endif

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
	uint S, KS_; // K slices per group, GEMM depth per slice
#else
	uint sYn; // elements between the images of Y and Res (K*OHW when dense)
#endif
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 0) readonly buffer BX4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer BW { float16_t w[]; };
layout(std430, binding = 1) readonly buffer BW4 { uvec4 w4[]; };
layout(std430, binding = 2) readonly buffer BB { X_T bias[]; };
#ifdef SPLITK
layout(std430, binding = 3) writeonly buffer BY { float part[]; };
#else
layout(std430, binding = 4) readonly buffer BR { X_T res[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };
#endif

shared uvec4 SH[max(A4, SCR4)]; // the A tile; the epilogue's f32 block
shared uvec4 SB[B4];            // the B tile

// Cols holds what B's loads need of an invocation's CPT columns: the
// element offset of each column's image in X (~0u: no such column), its
// pixel, and its window's origin.
struct Cols {
	uint img[CPT], pix[CPT];
	int ih0[CPT], iw0[CPT];
};

// pack8 packs 8 floats as 8 halves.
uvec4 pack8(float v[CPT]) {
	return uvec4(packFloat2x16(f16vec2(v[0], v[1])), packFloat2x16(f16vec2(v[2], v[3])),
		packFloat2x16(f16vec2(v[4], v[5])), packFloat2x16(f16vec2(v[6], v[7])));
}

// fetch loads slice k0 (depth < KE) of this invocation's A chunks and B
// rows; xg is the element offset of channel g*Cg of X's images.
void fetch(uint tid, uint k0, uint KE, uint wbase, uint m0, uint xg, Cols cs, out uvec4 ra[CA], out uvec4 rb[RB]) {
	bool vec = (pc.flags & 16u) != 0u;
	[[unroll]] for (uint i = 0u; i < CA; i++) {
		uint q = tid + i * NT;
		uint gm = m0 + q / (BK / 8u), gk = k0 + 8u * (q % (BK / 8u));
		uvec4 v = uvec4(0u);
		if (gm < pc.Kg) {
			uint e0 = wbase + gm * pc.KD + gk;
			if (vec) {
				if (gk < KE) v = w4[e0 / 8u];
			} else {
				f16vec2 hv[4];
				[[unroll]] for (uint j = 0u; j < 4u; j++) {
					float16_t lo = gk + 2u * j < KE ? w[e0 + 2u * j] : float16_t(0);
					float16_t hi = gk + 2u * j + 1u < KE ? w[e0 + 2u * j + 1u] : float16_t(0);
					hv[j] = f16vec2(lo, hi);
				}
				v = uvec4(packFloat2x16(hv[0]), packFloat2x16(hv[1]), packFloat2x16(hv[2]), packFloat2x16(hv[3]));
			}
		}
		ra[i] = v;
	}
	uint khw = pc.KH * pc.KW, hw = pc.H * pc.W;
	bool pw = (pc.flags & 2u) != 0u;
	// pointwise, 8 pixels of one image from a multiple of 4, X's channel
	// planes 16-byte aligned (flag 32): two vec4 loads a row
	bool pv = pw && (pc.flags & 32u) != 0u && cs.img[CPT - 1u] != ~0u && cs.img[CPT - 1u] == cs.img[0] && cs.pix[CPT - 1u] == cs.pix[0] + CPT - 1u && (cs.pix[0] & 3u) == 0u;
	[[unroll]] for (uint r = 0u; r < RB; r++) {
		uint gk = k0 + tid / TPR + r * RS;
		float v[CPT];
		[[unroll]] for (uint j = 0u; j < CPT; j++) v[j] = 0.0;
		if (gk < KE) {
			if (pv) {
				uint e = (xg + cs.img[0] + gk * hw + cs.pix[0]) / 4u;
				vec4 a = x4[e], b = x4[e + 1u];
				v = float[CPT](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
			} else if (pw) {
				[[unroll]] for (uint j = 0u; j < CPT; j++)
					if (cs.img[j] != ~0u) v[j] = float(X_LD(x[xg + cs.img[j] + gk * hw + cs.pix[j]]));
			} else {
				uint c = gk / khw, rem = gk - c * khw;
				uint kh = rem / pc.KW, kw = rem - kh * pc.KW;
				int dy = int(kh * pc.dh), dx = int(kw * pc.dw);
				uint cb = xg + c * hw;
				[[unroll]] for (uint j = 0u; j < CPT; j++) {
					int ih = cs.ih0[j] + dy, iw = cs.iw0[j] + dx;
					if (cs.img[j] != ~0u && ih >= 0 && ih < int(pc.H) && iw >= 0 && iw < int(pc.W))
						v[j] = float(X_LD(x[cb + cs.img[j] + uint(ih) * pc.W + uint(iw)]));
				}
			}
		}
		rb[r] = pack8(v);
	}
}

// stash stores the fetched slice at its tile positions.
void stash(uint tid, uvec4 ra[CA], uvec4 rb[RB]) {
	[[unroll]] for (uint i = 0u; i < CA; i++) {
		uint q = tid + i * NT;
		SH[(q / (BK / 8u)) * (LDA / 8u) + q % (BK / 8u)] = ra[i];
	}
	[[unroll]] for (uint r = 0u; r < RB; r++) SB[(tid / TPR + r * RS) * (LDB / 8u) + tid % TPR] = rb[r];
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint s = gl_SubgroupID;
	uint wm = s / SGR, wn = s % SGR;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	uint hw = pc.H * pc.W;

	// the im2col columns this invocation loads
	Cols cs;
	[[unroll]] for (uint j = 0u; j < CPT; j++) {
		uint col = n0 + (tid % TPR) * CPT + j;
		uint cc = min(col, pc.NC - 1u);
		uint n = cc / pc.OHW, p = cc - n * pc.OHW;
		uint oh = p / pc.OW, ow = p - oh * pc.OW;
		cs.img[j] = col < pc.NC ? n * pc.C * hw : ~0u;
		cs.pix[j] = p;
		cs.ih0[j] = int(oh * pc.sh) - int(pc.pt);
		cs.iw0[j] = int(ow * pc.sw) - int(pc.pl);
	}
	// the column this invocation finishes in the epilogue
	uint bn = tid % BN, col = n0 + bn;
	bool ok = col < pc.NC;
	uint en = min(col, pc.NC - 1u) / pc.OHW, ep = min(col, pc.NC - 1u) - en * pc.OHW;

#ifdef SPLITK
	uint nz = pc.G * pc.S;
#else
	uint nz = pc.G;
#endif
	for (uint zz = gl_WorkGroupID.z; zz < nz; zz += gl_NumWorkGroups.z) {
#ifdef SPLITK
		uint g = zz / pc.S, kb = (zz - g * pc.S) * pc.KS_, ke = min(pc.KD, kb + pc.KS_);
#else
		uint g = zz, kb = 0u, ke = pc.KD;
#endif
		uint ntiles = ke > kb ? (ke - kb + BK - 1u) / BK : 0u;
		uint wbase = pc.offW + g * pc.Kg * pc.KD;
		uint xg = pc.offX + g * pc.Cg * hw;
		MATC acc[FM][FN];
		[[unroll]] for (uint i = 0u; i < FM; i++)
			[[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = MATC(0.0);
		uvec4 ra[CA], rb[RB];
		fetch(tid, kb, ke, wbase, m0, xg, cs, ra, rb);
		for (uint t = 0u; t < ntiles; t++) {
			barrier(); // everyone is done reading the previous slice
			stash(tid, ra, rb);
			barrier();
			if (t + 1u < ntiles) fetch(tid, kb + (t + 1u) * BK, ke, wbase, m0, xg, cs, ra, rb);
			[[unroll]] for (uint ks = 0u; ks < BK / KS; ks++) {
				MATA fa[FM];
				[[unroll]] for (uint i = 0u; i < FM; i++)
					CM_LOAD(fa[i], SH, ((wm * WM + i * MS) * LDA + ks * KS) / 8u, LDA / 8u);
				[[unroll]] for (uint j = 0u; j < FN; j++) {
					MATB fb;
					CM_LOAD(fb, SB, (ks * KS * LDB + wn * WN + j * NS) / 8u, LDB / 8u);
					[[unroll]] for (uint i = 0u; i < FM; i++) acc[i][j] = CM_MULADD(fa[i], fb, acc[i][j]);
				}
			}
		}

		// epilogue: the block's accumulators to SH as f32 [BM][BN], then
		// rows tid/BN + e*(NT/BN) of column bn
		barrier(); // the last slice is no longer read
		[[unroll]] for (uint i = 0u; i < FM; i++)
			[[unroll]] for (uint j = 0u; j < FN; j++)
				CM_STORE(acc[i][j], SH, ((wm * WM + i * MS) * BN + wn * WN + j * NS) / 4u, BN / 4u);
		barrier();
#ifndef SPLITK
		float aa = pc_real(pc.actA), ab = pc_real(pc.actB);
		uint ybase = en * pc.sYn + ep;
#endif
		for (uint r = tid / BN; r < BM; r += NT / BN) {
			uint gm = m0 + r;
			if (!ok || gm >= pc.Kg) continue;
			float v = uintBitsToFloat(SH[(r * BN + bn) / 4u][bn & 3u]);
#ifdef SPLITK
			part[(zz * pc.Kg + gm) * pc.NC + col] = v;
#else
			uint k = g * pc.Kg + gm;
			if ((pc.flags & 1u) != 0u) v += float(X_LD(bias[pc.offB + k]));
			uint yi = ybase + k * pc.OHW;
			if ((pc.flags & 4u) != 0u) v += float(X_LD(res[pc.offR + yi]));
			if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
			y[pc.offY + yi] = Y_ST(v);
#endif
		}
	}
}
