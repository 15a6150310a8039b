#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// matmul: register-blocked shared-memory GEMM,
//   Y[b] = act(alpha * op(A[b]) op(B[b]) + beta * Bias + Res[b]),
// with the residual Res (flags bit 16, binding 4 at offset pc.offRes,
// laid out like Y; it may be Y itself) only in the builds without SPLITK
// (a split GEMM adds it in splitk.comp).
//
// The workgroup computes a BM x BN block of Y with NT = (BM/TM)*(BN/TN)
// invocations, each holding a TM x TN micro-tile in registers (TM, TN
// multiples of 4). The tile geometry is compile-time (-D BM, BN, BK, TM,
// TN; one variant per configuration) so that glslc unrolls every
// micro-tile loop and the accumulators are plain registers in the SPIR-V
// rather than function-scope arrays; spec constant 0 (the workgroup size)
// must equal NT.
//
// K is walked in BK slices through two shared-memory stages: while the
// invocations multiply stage s, they have already fetched slice t+1 from
// global memory into registers, and store it into stage s^1 afterwards
// (one barrier per slice). Loads are coalesced along the contiguous
// dimension of each operand; TransA/TransB are resolved there, so shared
// memory always holds A as [k][m] and B as [k][n], as vec4s. The vec4
// column index is XOR-swizzled with k&7, which spreads the transposing
// stores over the banks without padding (2 stages of BK*(BM+BN) elements
// exactly: 32 KiB for 128x128x16 in f32), while each invocation's reads
// of its 4-row / 4-column groups stay single vec4 loads. Built with PADA
// (tile "l"), nothing is swizzled and A's rows are padded by one vec4
// (BK*4 more elements a stage: 33280 bytes for "l", more than lavapipe's
// 32 KiB): every shared-memory read of the inner loop is then a
// per-invocation base plus a constant, with no index arithmetic, and
// the transposing stores of A meet 2-way bank conflicts at most. On an
// H200 (2026-12-04, f32, vec4 loads, GPU time, docs/benchmarks.md) that
// took "l" from 33.3 / 35.1 / 30.6-34.9 to 37.1-37.3 / 39.4 / 38.0-39.3
// TFLOP/s at n = 2048 / 4096 / 8192, 0.78 / 0.79 / 0.75-0.77 x cuBLAS
// in the same runs (47.5-48.3 / 49.6-50.1 / 50.6-50.9); unpadded and
// unswizzled stages gained as much at 2048 and 4096, not at 8192.
//
// f32 builds have a second load path (flags bit 8, set by the host when
// M, N, K, the offsets and batch strides are multiples of 4): each
// invocation fetches LA/4 and LB/4 aligned vec4s (128-bit loads, bounds
// checked per vec4) instead of LA and LB scalars; a vec4 along the tile's
// m (A transposed) or n (B not transposed) dimension is stored to shared
// memory as one vec4.
//
// Invocation (tr, tc) owns rows g*4*WGM + 4*tr + c (g < TM/4, c < 4) and
// columns h*4*WGN + 4*tc + d (h < TN/4, d < 4). All global accesses are
// bounds-checked, so any M, N, K work.
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
#ifdef PADA
#define LDA (BM4 + 1)
#else
#define LDA BM4
#endif
#define SA (BK * LDA)
#define SB (BK * BN4)

layout(constant_id = 1) const uint FIXED = 0u;

layout(push_constant) uniform PC {
	uint M, N, K, flags;
	uint sA, sB, sY, act;
	uint offA, offB, offY, offBias;
	int bs0, bs1;
	uint batch, offRes;
	uvec2 alpha, beta, actA, actB;
#ifdef SPLITK
	uint S, KS; // K slices per batch entry, K per slice
#endif
} pc;
layout(std430, binding = 0) readonly buffer BA { X_T a[]; };
layout(std430, binding = 1) readonly buffer BB { W_T b[]; };
layout(std430, binding = 2) readonly buffer BC { X_T bias[]; };
#if X_DT == 1
#define VEC4LD 1
layout(std430, binding = 0) readonly buffer BA4 { vec4 a4[]; };
#if W_DT == 2
// f16 weights: four halves per 64-bit load
layout(std430, binding = 1) readonly buffer BB4 { uvec2 b4[]; };
vec4 ld_b4(uint i) { uvec2 u = b4[i]; return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
#else
layout(std430, binding = 1) readonly buffer BB4 { vec4 b4[]; };
vec4 ld_b4(uint i) { return b4[i]; }
#endif
#endif
#ifdef SPLITK
// Split-K partial pass: z index zz = bt*S + s sums K range [s*KS,
// min(K, (s+1)*KS)) into part[zz*M*N + m*N + n] (raw accumulators, no
// alpha, bias or activation); splitk.comp reduces the S partials in order.
layout(std430, binding = 3) writeonly buffer BY { CT part[]; };
#else
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };
layout(std430, binding = 4) readonly buffer BR { X_T res[]; };
#endif

// The epilogue goes through shared memory one row group (4*WGM rows) at a
// time, so the activation is applied in a rolled, coalesced loop.
#define CH (WGM * BN)
// Both stages of A then both of B; reused by the epilogue (CH vec4s,
// more than the stages when BK is 8).
#define SN (CH > 2 * (SA + SB) ? CH : 2 * (SA + SB))
shared CT4 S[SN];
#define As(i) S[i]
#define Bs(i) S[2u * SA + (i)]

// ia and ib are the positions of vec4 column v of row k in a stage of A
// and of B: XOR-swizzled (sw), or, built with PADA, A's rows padded by
// one vec4 and B's rows as they are.
#ifdef PADA
uint ia(uint k, uint v) { return k * LDA + v; }
uint ib(uint k, uint v) { return k * BN4 + v; }
#else
// sw is the swizzled vec4 column of row k.
uint sw(uint v, uint k) { return v ^ (k & 7u); }
uint ia(uint k, uint v) { return k * BM4 + sw(v, k); }
uint ib(uint k, uint v) { return k * BN4 + sw(v, k); }
#endif

// store_stage writes one slice, fetched into ra and rb, into stage st.
void store_stage(uint st, CT ra[LA], CT rb[LB], uint am0, uint amS, uint ak0, uint akS, uint bn0, uint bnS, uint bk0, uint bkS) {
	[[unroll]] for (uint r = 0u; r < LA; r++) {
		uint m = am0 + r * amS, k = ak0 + r * akS;
		As(st * SA + ia(k, m >> 2))[m & 3u] = ra[r];
	}
	[[unroll]] for (uint r = 0u; r < LB; r++) {
		uint n = bn0 + r * bnS, k = bk0 + r * bkS;
		Bs(st * SB + ib(k, n >> 2))[n & 3u] = rb[r];
	}
}

#ifdef VEC4LD
// Vector path: chunk i of this invocation (i < LA/4) is vec4 number
// c = tid + i*NT of the A tile, laid out along A's contiguous dimension:
// A row-major: row m = c / (BK/4), k = 4*(c % (BK/4)); A transposed: k =
// c / (BM/4), m = 4*(c % (BM/4)). B likewise (not transposed: k = c /
// (BN/4), n = 4*(c % (BN/4)); transposed: n = c / (BK/4), k = 4*(c % (BK/4))).
void fetch_vec(uint tid, bool ta, bool tb, uint baseA, uint baseB, uint m0, uint n0, uint k0, uint ke, out CT ra[LA], out CT rb[LB]) {
	[[unroll]] for (uint i = 0u; i < LA / 4u; i++) {
		uint c = tid + i * NT;
		uint gm, gk;
		if (ta) { gk = k0 + c / BM4; gm = m0 + 4u * (c % BM4); }
		else { gm = m0 + c / (BK / 4u); gk = k0 + 4u * (c % (BK / 4u)); }
		vec4 v = (gm < pc.M && gk < ke) ? a4[(baseA + (ta ? gk * pc.M + gm : gm * pc.K + gk)) / 4u] : vec4(0);
		ra[4u * i] = v.x; ra[4u * i + 1u] = v.y; ra[4u * i + 2u] = v.z; ra[4u * i + 3u] = v.w;
	}
	[[unroll]] for (uint i = 0u; i < LB / 4u; i++) {
		uint c = tid + i * NT;
		uint gn, gk;
		if (tb) { gn = n0 + c / (BK / 4u); gk = k0 + 4u * (c % (BK / 4u)); }
		else { gk = k0 + c / BN4; gn = n0 + 4u * (c % BN4); }
		vec4 v = (gn < pc.N && gk < ke) ? ld_b4((baseB + (tb ? gn * pc.K + gk : gk * pc.N + gn)) / 4u) : vec4(0);
		rb[4u * i] = v.x; rb[4u * i + 1u] = v.y; rb[4u * i + 2u] = v.z; rb[4u * i + 3u] = v.w;
	}
}

void store_vec(uint st, uint tid, bool ta, bool tb, CT ra[LA], CT rb[LB]) {
	[[unroll]] for (uint i = 0u; i < LA / 4u; i++) {
		uint c = tid + i * NT;
		vec4 v = vec4(ra[4u * i], ra[4u * i + 1u], ra[4u * i + 2u], ra[4u * i + 3u]);
		if (ta) {
			uint k = c / BM4, m4 = c % BM4;
			As(st * SA + ia(k, m4)) = v;
		} else {
			uint m = c / (BK / 4u), k = 4u * (c % (BK / 4u));
			[[unroll]] for (uint j = 0u; j < 4u; j++) As(st * SA + ia(k + j, m >> 2))[m & 3u] = v[j];
		}
	}
	[[unroll]] for (uint i = 0u; i < LB / 4u; i++) {
		uint c = tid + i * NT;
		vec4 v = vec4(rb[4u * i], rb[4u * i + 1u], rb[4u * i + 2u], rb[4u * i + 3u]);
		if (tb) {
			uint n = c / (BK / 4u), k = 4u * (c % (BK / 4u));
			[[unroll]] for (uint j = 0u; j < 4u; j++) Bs(st * SB + ib(k + j, n >> 2))[n & 3u] = v[j];
		} else {
			uint k = c / BN4, n4 = c % BN4;
			Bs(st * SB + ib(k, n4)) = v;
		}
	}
}
#endif

#if (TM != 4 && TM != 8) || (NT % BM) != 0 || (NT % BN) != 0 || (NT % BK) != 0 || (TM % 4) != 0 || (TN % 4) != 0 || BM4 < 8 || BN4 < 8 || (LA % 4) != 0 || (LB % 4) != 0
#error matmul.comp: unsupported tile geometry
#endif

// epilogue stores row group g (rows g*4*WGM + 4*tr + c, accumulators
// r0..r3) through S and writes Y = act(alpha*acc + beta*Bias) for it.
void epilogue(uint g, CT4 r0[TN / 4], CT4 r1[TN / 4], CT4 r2[TN / 4], CT4 r3[TN / 4], uint baseY, uint bt) {
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
		if (gm < pc.M && gn < pc.N) part[baseY + gm * pc.N + gn] = S[e / 4u][e & 3u];
	}
#else
	CT alpha = pc_real(pc.alpha), beta = pc_real(pc.beta);
	CT aa = pc_real(pc.actA), ab = pc_real(pc.actB);
	bool hasBias = (pc.flags & 4u) != 0u, hasRes = (pc.flags & 16u) != 0u;
	for (uint e = tid; e < 4u * CH; e += NT) {
		uint gm = m0 + g * (4u * WGM) + e / BN, gn = n0 + e % BN;
		if (gm < pc.M && gn < pc.N) {
			CT v = alpha * S[e / 4u][e & 3u];
			if (hasBias) v += beta * CT(X_LD(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]));
			if (hasRes) v += CT(X_LD(res[baseY - pc.offY + pc.offRes + gm * pc.N + gn]));
			if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
			y[baseY + gm * pc.N + gn] = Y_ST(v);
		}
	}
#endif
	barrier();
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint tr = tid / WGN, tc = tid % WGN;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	// FIXED (specialization constant 1) with bit 31 set fixes the load
	// path: its bits 0, 1 and 8 stand for pc.flags' (TransA, TransB, vec4
	// loads), so the driver compiles only that path of the K loop.
	uint lf = (FIXED & 0x80000000u) != 0u ? FIXED : pc.flags;
	bool ta = (lf & 1u) != 0u, tb = (lf & 2u) != 0u;
#ifdef VEC4LD
	bool vec = (lf & 256u) != 0u;
#endif
	uint M = pc.M, N = pc.N, K = pc.K;

	// Element r of this invocation's share of a slice sits at (m, k) =
	// (am0 + r*amS, ak0 + r*akS) of the A tile and (n, k) = (bn0 + r*bnS,
	// bk0 + r*bkS) of the B tile; consecutive invocations walk the
	// operand's contiguous dimension. (NT is a multiple of BM, BN and BK.)
	uint am0, amS, ak0, akS, bn0, bnS, bk0, bkS;
	if (ta) { am0 = tid % BM; amS = 0u; ak0 = tid / BM; akS = NT / BM; }
	else { ak0 = tid % BK; akS = 0u; am0 = tid / BK; amS = NT / BK; }
	if (tb) { bk0 = tid % BK; bkS = 0u; bn0 = tid / BK; bnS = NT / BK; }
	else { bn0 = tid % BN; bnS = 0u; bk0 = tid / BN; bkS = NT / BN; }

#ifdef SPLITK
	uint nz = pc.batch * pc.S;
#else
	uint nz = pc.batch;
#endif
	for (uint zz = gl_WorkGroupID.z; zz < nz; zz += gl_NumWorkGroups.z) {
#ifdef SPLITK
		uint bt = zz / pc.S, kb = (zz - bt * pc.S) * pc.KS, ke = min(K, kb + pc.KS);
#else
		uint bt = zz, kb = 0u, ke = K;
#endif
		uint ntiles = ke > kb ? (ke - kb + BK - 1u) / BK : 0u;
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		CT4 acc[TM][TN / 4];
		[[unroll]] for (uint i = 0u; i < TM; i++)
			[[unroll]] for (uint h = 0u; h < TN / 4u; h++) acc[i][h] = CT4(0);
		CT ra[LA], rb[LB];

		// slice 0 -> stage 0
#ifdef VEC4LD
		if (vec) {
			fetch_vec(tid, ta, tb, baseA, baseB, m0, n0, kb, ke, ra, rb);
			store_vec(0u, tid, ta, tb, ra, rb);
		} else
#endif
		{
			[[unroll]] for (uint r = 0u; r < LA; r++) {
				uint gm = m0 + am0 + r * amS, gk = kb + ak0 + r * akS;
				ra[r] = (gm < M && gk < ke) ? CT(X_LD(a[baseA + (ta ? gk * M + gm : gm * K + gk)])) : CT(0);
			}
			[[unroll]] for (uint r = 0u; r < LB; r++) {
				uint gn = n0 + bn0 + r * bnS, gk = kb + bk0 + r * bkS;
				rb[r] = (gn < N && gk < ke) ? CT(W_LD(b[baseB + (tb ? gn * K + gk : gk * N + gn)])) : CT(0);
			}
			store_stage(0u, ra, rb, am0, amS, ak0, akS, bn0, bnS, bk0, bkS);
		}
		barrier();

		for (uint t = 0u; t < ntiles; t++) {
			uint cur = t & 1u;
			bool more = t + 1u < ntiles;
#ifdef VEC4LD
			if (more && vec) fetch_vec(tid, ta, tb, baseA, baseB, m0, n0, kb + (t + 1u) * BK, ke, ra, rb);
			else
#endif
			if (more) {
				uint k0 = kb + (t + 1u) * BK;
				[[unroll]] for (uint r = 0u; r < LA; r++) {
					uint gm = m0 + am0 + r * amS, gk = k0 + ak0 + r * akS;
					ra[r] = (gm < M && gk < ke) ? CT(X_LD(a[baseA + (ta ? gk * M + gm : gm * K + gk)])) : CT(0);
				}
				[[unroll]] for (uint r = 0u; r < LB; r++) {
					uint gn = n0 + bn0 + r * bnS, gk = k0 + bk0 + r * bkS;
					rb[r] = (gn < N && gk < ke) ? CT(W_LD(b[baseB + (tb ? gn * K + gk : gk * N + gn)])) : CT(0);
				}
			}
			uint sa = cur * SA, sb = cur * SB;
			[[unroll]] for (uint kk = 0u; kk < BK; kk++) {
				CT4 va[TM / 4], vb[TN / 4];
				[[unroll]] for (uint g = 0u; g < TM / 4u; g++) va[g] = As(sa + ia(kk, g * WGM + tr));
				[[unroll]] for (uint h = 0u; h < TN / 4u; h++) vb[h] = Bs(sb + ib(kk, h * WGN + tc));
				[[unroll]] for (uint g = 0u; g < TM / 4u; g++)
					[[unroll]] for (uint c = 0u; c < 4u; c++)
						[[unroll]] for (uint h = 0u; h < TN / 4u; h++)
							acc[g * 4u + c][h] = fma(CT4(va[g][c]), vb[h], acc[g * 4u + c][h]);
			}
#ifdef VEC4LD
			if (more && vec) store_vec(cur ^ 1u, tid, ta, tb, ra, rb);
			else
#endif
			if (more) {
				store_stage(cur ^ 1u, ra, rb, am0, amS, ak0, akS, bn0, bnS, bk0, bkS);
			}
			barrier();
		}

#ifdef SPLITK
		uint baseY = zz * M * N;
#else
		uint baseY = pc.offY + bt * pc.sY;
#endif
		epilogue(0u, acc[0], acc[1], acc[2], acc[3], baseY, bt);
#if TM == 8
		epilogue(1u, acc[4], acc[5], acc[6], acc[7], baseY, bt);
#endif
	}
}
