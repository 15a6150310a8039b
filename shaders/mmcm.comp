#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
// mmcm: f16 GEMM on NV cooperative matrices (f16 inputs, f32
// accumulators), same push constants and semantics as matmul.comp.
//
// A workgroup of 256 invocations (8 subgroups of 32, spec constant 0 =
// 256) computes a 128x128 block of Y; subgroup w owns the 64x32 sub-block
// at rows (w/4)*64, columns (w%4)*32, as (64/MS) x (32/NS) accumulators of
// the MS x NS x KS shape (-D MS, NS, KS; KS = 16). K is walked in slices of
// 32 through two shared-memory stages (fetch slice t+1 into registers,
// multiply slice t, store t+1; one barrier per slice). Global loads are
// bounds-checked half pairs along the contiguous dimension (TransA/TransB
// resolved there), packed into uints: A as [m][k] rows of 40 halves, B as
// [k][n] rows of 136 halves (8 halves of padding against bank conflicts).
// The epilogue stores half of a subgroup's accumulators at a time to its
// own part of the (then free) shared memory, and applies alpha, beta*Bias
// and the activation per element with bounds checks.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"
#include "gen_act_f.glsl"

#define BM 128u
#define BN 128u
#define BK 32u
#define NT 256u
#define FM (64u / MS)
#define FN (32u / NS)
#define AW 20u                 // uints per A row (32 + 8 halves)
#define BW 68u                 // uints per B row (128 + 8 halves)
#define ASZ (BM * AW)
#define STAGE (ASZ + BK * BW)  // uints per stage
#define SCR ((FM / 2u) * FN * MS * NS) // floats of epilogue scratch per subgroup

#if KS != 16 // (8 subgroups x SCR = 8192 floats <= 2 stages = 9472 uints)
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
layout(std430, binding = 1) readonly buffer BB { float16_t b[]; };
layout(std430, binding = 2) readonly buffer BC { float16_t bias[]; };
layout(std430, binding = 3) writeonly buffer BY { float16_t y[]; };

shared uint SM[2u * STAGE];

#define MATA fcoopmatNV<16, gl_ScopeSubgroup, MS, KS>
#define MATB fcoopmatNV<16, gl_ScopeSubgroup, KS, NS>
#define MATC fcoopmatNV<32, gl_ScopeSubgroup, MS, NS>

float16_t lda(uint base, uint gm, uint gk, bool ta) {
	if (gm >= pc.M || gk >= pc.K) return float16_t(0);
	return a[base + (ta ? gk * pc.M + gm : gm * pc.K + gk)];
}

float16_t ldb(uint base, uint gn, uint gk, bool tb) {
	if (gn >= pc.N || gk >= pc.K) return float16_t(0);
	return b[base + (tb ? gn * pc.K + gk : gk * pc.N + gn)];
}

// Pair r (< 8) of this invocation: A (m, 2*kp..2*kp+1), B (k, 2*np..2*np+1).
void fetch(uint tid, uint baseA, uint baseB, uint m0, uint n0, uint k0, bool ta, bool tb, out uint ra[8], out uint rb[8]) {
	[[unroll]] for (uint r = 0u; r < 8u; r++) {
		uint m, kp;
		if (ta) { m = tid % BM; kp = tid / BM + 2u * r; } else { kp = tid % 16u; m = tid / 16u + 16u * r; }
		uint gk = k0 + 2u * kp;
		ra[r] = packFloat2x16(f16vec2(lda(baseA, m0 + m, gk, ta), lda(baseA, m0 + m, gk + 1u, ta)));
		uint k, np;
		if (tb) { k = tid % BK; np = tid / BK + 8u * r; } else { np = tid % 64u; k = tid / 64u + 4u * r; }
		uint gn = n0 + 2u * np;
		rb[r] = packFloat2x16(f16vec2(ldb(baseB, gn, k0 + k, tb), ldb(baseB, gn + 1u, k0 + k, tb)));
	}
}

void stash(uint tid, uint st, bool ta, bool tb, uint ra[8], uint rb[8]) {
	[[unroll]] for (uint r = 0u; r < 8u; r++) {
		uint m, kp;
		if (ta) { m = tid % BM; kp = tid / BM + 2u * r; } else { kp = tid % 16u; m = tid / 16u + 16u * r; }
		SM[st * STAGE + m * AW + kp] = ra[r];
		uint k, np;
		if (tb) { k = tid % BK; np = tid / BK + 8u * r; } else { np = tid % 64u; k = tid / 64u + 4u * r; }
		SM[st * STAGE + ASZ + k * BW + np] = rb[r];
	}
}

// finish applies the epilogue to the SCR floats a subgroup stored at
// SM[w*SCR], accumulators (i0 + f/FN, f%FN) for f < FM/2*FN.
void finish(uint w, uint i0, uint m0, uint n0, uint baseY) {
	uint lane = gl_SubgroupInvocationID;
	uint wm = w / 4u, wn = w % 4u;
	float alpha = uintBitsToFloat(pc.alpha.x), beta = uintBitsToFloat(pc.beta.x);
	float aa = uintBitsToFloat(pc.actA.x), ab = uintBitsToFloat(pc.actB.x);
	for (uint e = lane; e < SCR; e += 32u) {
		uint f = e / (MS * NS), q = e % (MS * NS);
		uint i = i0 + f / FN, j = f % FN;
		uint gm = m0 + wm * 64u + i * MS + q / NS, gn = n0 + wn * 32u + j * NS + q % NS;
		if (gm < pc.M && gn < pc.N) {
			float v = alpha * uintBitsToFloat(SM[w * SCR + e]);
			if ((pc.flags & 4u) != 0u) v += beta * float(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]);
			if (pc.act != 0u) v = act_apply(pc.act, v, aa, ab);
			y[baseY + gm * pc.N + gn] = float16_t(v);
		}
	}
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint w = gl_SubgroupID;
	uint wm = w / 4u, wn = w % 4u;
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	bool ta = (pc.flags & 1u) != 0u, tb = (pc.flags & 2u) != 0u;
	uint ntiles = (pc.K + BK - 1u) / BK;
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		MATC acc[FM][FN];
		[[unroll]] for (uint i = 0u; i < FM; i++)
			[[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = MATC(0.0);
		uint ra[8], rb[8];
		fetch(tid, baseA, baseB, m0, n0, 0u, ta, tb, ra, rb);
		stash(tid, 0u, ta, tb, ra, rb);
		barrier();
		for (uint t = 0u; t < ntiles; t++) {
			uint cur = t & 1u;
			bool more = t + 1u < ntiles;
			if (more) fetch(tid, baseA, baseB, m0, n0, (t + 1u) * BK, ta, tb, ra, rb);
			[[unroll]] for (uint ks = 0u; ks < BK / KS; ks++) {
				MATA fa[FM];
				MATB fb[FN];
				[[unroll]] for (uint i = 0u; i < FM; i++)
					coopMatLoadNV(fa[i], SM, cur * STAGE + (wm * 64u + i * MS) * AW + ks * (KS / 2u), AW, false);
				[[unroll]] for (uint j = 0u; j < FN; j++)
					coopMatLoadNV(fb[j], SM, cur * STAGE + ASZ + ks * KS * BW + (wn * 32u + j * NS) / 2u, BW, false);
				[[unroll]] for (uint i = 0u; i < FM; i++)
					[[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
			}
			if (more) stash(tid, cur ^ 1u, ta, tb, ra, rb);
			barrier();
		}
		uint baseY = pc.offY + bt * pc.sY;
		[[unroll]] for (uint h = 0u; h < 2u; h++) {
			[[unroll]] for (uint i = 0u; i < FM / 2u; i++)
				[[unroll]] for (uint j = 0u; j < FN; j++)
					coopMatStoreNV(acc[h * (FM / 2u) + i][j], SM, w * SCR + (i * FN + j) * MS * NS, NS, false);
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			finish(w, h * (FM / 2u), m0, n0, baseY);
			subgroupMemoryBarrierShared();
			subgroupBarrier();
		}
		barrier();
	}
}
