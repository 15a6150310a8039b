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
// mmcm: f16 GEMM on subgroup-scope cooperative matrices (f16 inputs, f32
// accumulators), same push constants and semantics as matmul.comp; NV or
// KHR cooperative matrices (-D KHR=1), see coopmat.glsl.
//
// A workgroup of 256 invocations (spec constant 0 = 256: 8 subgroups of
// 32, or 32 of 8 with -D SGS=8) computes a 128 x BN block of Y (-D BN =
// 128 or 256); subgroups form an SGR x SGC grid (2 x 4, or 4 x 8) and
// subgroup w owns the WMR x WN sub-block at rows (w/SGC)*WMR, columns
// (w%SGC)*WN, as FM x FN accumulators of the MS x NS x KS shape (-D MS,
// NS, KS; KS = 16, or 8 with 8-wide subgroups): 4x4 fragments of 16x16
// for BN = 256, 4x2 for BN = 128. Each fragment of A is reused FN times,
// each of B FM times.
//
// K is walked in slices of BK = 32 (-D BKN=64: 64, for 128-wide blocks)
// through one shared-memory stage,
// prefetched into registers: store slice t, barrier, issue the global
// loads of slice t+1, multiply slice t, barrier. Global -> shared copies
// are 16-byte chunks (8 halves): one uvec4 load when the host found the
// operand's offsets, batch stride and leading dimension multiples of 8
// (flags 32 for A, 64 for B; a chunk is then wholly inside or outside the
// matrix), else 8 bounds-checked half loads. Shared memory keeps each
// operand's contiguous dimension (TransA/TransB are resolved by loading the
// fragments column-major): A as [128][32+8] or [32][128+8] halves, B as
// [32][BN+8] or [BN][32+8], the 8-half skew making the 8 row addresses of
// a fragment load hit distinct banks.
//
// Epilogue: a block fully inside Y with no bias or activation, Y rows
// 16-byte aligned (flag 128), converts alpha*acc to f16 fragments and
// stores them straight to global memory; otherwise each subgroup stores
// one fragment row (MS x WN floats) at a time to its own part of shared
// memory and applies alpha, beta*Bias and the activation per element with
// bounds checks, coalesced along N.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"
#include "gen_act_f.glsl"

#include "coopmat.glsl"

#define BM 128u
#ifndef BKN
#define BKN 32
#endif
#define BK uint(BKN)
#define NT 256u
#if SGS == 32
#define SGR 2u
#define SGC 4u
#elif SGS == 8
#define SGR 4u
#define SGC 8u
#endif
#define WMR (BM / SGR)           // rows per subgroup
#define WN (BN / SGC)            // columns per subgroup
#define FM (WMR / MS)
#define FN (WN / NS)
#define A4 (max(BM * (BK + 8u), BK * (BM + 8u)) / 8u) // uvec4s of the A tile
#define B4 (max(BK * (BN + 8u), BN * (BK + 8u)) / 8u)
#define SCR4 (MS * WN / 4u)      // uvec4s of epilogue scratch per subgroup
#define SHN (max(A4 + B4, SGR * SGC * SCR4))
#define CA (BM * BK / 8u / NT)   // A chunks per invocation
#define CB (BN * BK / 8u / NT)

#if (KS != 16 && !(KS == 8 && SGS == 8)) || (SGS != 32 && SGS != 8) || (BN != 128 && BN != 256) || (BKN != 32 && BKN != 64)
#error mmcm.comp: unsupported shape
#endif

layout(push_constant) uniform PC {
	uint M, N, K, flags;
	uint sA, sB, sY, act;
	uint offA, offB, offY, offBias;
	int bs0, bs1;
	uint batch, pad;
	uvec2 alpha, beta, actA, actB;
} pc;
layout(std430, binding = 0) readonly buffer BA { float16_t a[]; };
layout(std430, binding = 0) readonly buffer BA4 { uvec4 a4[]; };
layout(std430, binding = 1) readonly buffer BB { float16_t b[]; };
layout(std430, binding = 1) readonly buffer BB4 { uvec4 b4[]; };
layout(std430, binding = 2) readonly buffer BC { float16_t bias[]; };
layout(std430, binding = 3) writeonly buffer BY { float16_t y[]; };

shared uvec4 SH[SHN];

// Chunk q of a tile with rows of L halves: row q / (L/8), halves 8*(q % (L/8)).
// A: non-transposed rows are m (L = BK), transposed rows are k (L = BM).
// B: non-transposed rows are k (L = BN), transposed rows are n (L = BK).

// LOADCHUNK loads 8 halves at row gr (< rlim), columns gc.. (< clim) of
// an operand with leading dimension ld, as one uvec4 or half by half.
#define LOADCHUNK(arr, arr4, vec, base, gr, rlim, gc, clim, ld, out_)           \
	{                                                                            \
		out_ = uvec4(0u);                                                        \
		if (gr < rlim) {                                                         \
			uint e0 = base + gr * ld + gc;                                       \
			if (vec) {                                                           \
				if (gc < clim) out_ = arr4[e0 / 8u];                             \
			} else {                                                             \
				f16vec2 hv[4];                                                   \
				[[unroll]] for (uint q = 0u; q < 4u; q++) {                      \
					float16_t lo = gc + 2u * q < clim ? arr[e0 + 2u * q] : float16_t(0);       \
					float16_t hi = gc + 2u * q + 1u < clim ? arr[e0 + 2u * q + 1u] : float16_t(0); \
					hv[q] = f16vec2(lo, hi);                                     \
				}                                                                \
				out_ = uvec4(packFloat2x16(hv[0]), packFloat2x16(hv[1]), packFloat2x16(hv[2]), packFloat2x16(hv[3])); \
			}                                                                    \
		}                                                                        \
	}

void fetch(uint tid, uint baseA, uint baseB, uint m0, uint n0, uint k0, out uvec4 ra[CA], out uvec4 rb[CB]) {
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	bool va = (pc.flags & 32u) != 0u, vb = (pc.flags & 64u) != 0u;
	[[unroll]] for (uint i = 0u; i < CA; i++) {
		uint q = tid + i * NT;
		if (ta) {
			uint r = q / (BM / 8u), c = 8u * (q % (BM / 8u));
			uint gr = k0 + r, gc = m0 + c;
			LOADCHUNK(a, a4, va, baseA, gr, pc.K, gc, pc.M, pc.M, ra[i])
		} else {
			uint r = q / (BK / 8u), c = 8u * (q % (BK / 8u));
			uint gr = m0 + r, gc = k0 + c;
			LOADCHUNK(a, a4, va, baseA, gr, pc.M, gc, pc.K, pc.K, ra[i])
		}
	}
	[[unroll]] for (uint i = 0u; i < CB; i++) {
		uint q = tid + i * NT;
		if (tb) {
			uint r = q / (BK / 8u), c = 8u * (q % (BK / 8u));
			uint gr = n0 + r, gc = k0 + c;
			LOADCHUNK(b, b4, vb, baseB, gr, pc.N, gc, pc.K, pc.K, rb[i])
		} else {
			uint r = q / (BN / 8u), c = 8u * (q % (BN / 8u));
			uint gr = k0 + r, gc = n0 + c;
			LOADCHUNK(b, b4, vb, baseB, gr, pc.K, gc, pc.N, pc.N, rb[i])
		}
	}
}

// stash stores the fetched chunks at their tile positions (row stride L+8).
void stash(uint tid, uvec4 ra[CA], uvec4 rb[CB]) {
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	[[unroll]] for (uint i = 0u; i < CA; i++) {
		uint q = tid + i * NT;
		uint L = ta ? BM : BK;
		uint r = q / (L / 8u), c = q % (L / 8u);
		SH[r * ((L + 8u) / 8u) + c] = ra[i];
	}
	[[unroll]] for (uint i = 0u; i < CB; i++) {
		uint q = tid + i * NT;
		uint L = tb ? BK : BN;
		uint r = q / (L / 8u), c = q % (L / 8u);
		SH[A4 + r * ((L + 8u) / 8u) + c] = rb[i];
	}
}

// finish applies the epilogue to fragment row i of subgroup w, stored as a
// [MS][WN] float matrix at SH[w*SCR4].
void finish(uint w, uint i, uint m0, uint n0, uint baseY) {
	uint lane = gl_SubgroupInvocationID;
	uint wm = w / SGC, wn = w % SGC;
	float alpha = uintBitsToFloat(pc.alpha.x), beta = uintBitsToFloat(pc.beta.x);
	float aa = uintBitsToFloat(pc.actA.x), ab = uintBitsToFloat(pc.actB.x);
	for (uint e = lane; e < MS * WN; e += SGS) {
		uint gm = m0 + wm * WMR + i * MS + e / WN, gn = n0 + wn * WN + e % WN;
		if (gm < pc.M && gn < pc.N) {
			float v = alpha * uintBitsToFloat(SH[w * SCR4 + e / 4u][e % 4u]);
			if ((pc.flags & 4u) != 0u) v += beta * float(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]);
			if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
			y[baseY + gm * pc.N + gn] = float16_t(v);
		}
	}
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint w = gl_SubgroupID;
	uint wm = w / SGC, wn = w % SGC;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	uint ntiles = (pc.K + BK - 1u) / BK;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		MATC acc[FM][FN];
		[[unroll]] for (uint i = 0u; i < FM; i++)
			[[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = MATC(0.0);
		uvec4 ra[CA], rb[CB];
		fetch(tid, baseA, baseB, m0, n0, 0u, ra, rb);
		for (uint t = 0u; t < ntiles; t++) {
			barrier(); // everyone is done reading the previous slice
			stash(tid, ra, rb);
			barrier();
			if (t + 1u < ntiles) fetch(tid, baseA, baseB, m0, n0, (t + 1u) * BK, ra, rb);
			[[unroll]] for (uint ks = 0u; ks < BK / KS; ks++) {
				MATA fa[FM];
				[[unroll]] for (uint i = 0u; i < FM; i++) {
					uint r = wm * WMR + i * MS;
					if (ta) CM_LOADT(fa[i], SH, (ks * KS * (BM + 8u) + r) / 8u, (BM + 8u) / 8u);
					else CM_LOAD(fa[i], SH, (r * (BK + 8u) + ks * KS) / 8u, (BK + 8u) / 8u);
				}
				[[unroll]] for (uint j = 0u; j < FN; j++) {
					uint c = wn * WN + j * NS;
					MATB fb;
					if (tb) CM_LOADT(fb, SH, A4 + (c * (BK + 8u) + ks * KS) / 8u, (BK + 8u) / 8u);
					else CM_LOAD(fb, SH, A4 + (ks * KS * (BN + 8u) + c) / 8u, (BN + 8u) / 8u);
					[[unroll]] for (uint i = 0u; i < FM; i++) acc[i][j] = CM_MULADD(fa[i], fb, acc[i][j]);
				}
			}
		}
		uint baseY = pc.offY + bt * pc.sY;
		bool direct = (pc.flags & (4u | 128u)) == 128u && pc.act == 0u && m0 + BM <= pc.M && n0 + BN <= pc.N;
		if (direct) {
			float alpha = uintBitsToFloat(pc.alpha.x);
			[[unroll]] for (uint i = 0u; i < FM; i++)
				[[unroll]] for (uint j = 0u; j < FN; j++) {
					MATH h = MATH(acc[i][j] * alpha);
					uint gm = m0 + wm * WMR + i * MS, gn = n0 + wn * WN + j * NS;
					CM_STORE(h, y, baseY + gm * pc.N + gn, pc.N);
				}
		} else {
			barrier(); // the last slice is no longer read: SH is scratch
			[[unroll]] for (uint i = 0u; i < FM; i++) {
				[[unroll]] for (uint j = 0u; j < FN; j++)
					CM_STORE(acc[i][j], SH, w * SCR4 + j * NS / 4u, WN / 4u);
				subgroupMemoryBarrierShared();
				subgroupBarrier();
				finish(w, i, m0, n0, baseY);
				subgroupMemoryBarrierShared();
				subgroupBarrier();
			}
		}
	}
}
