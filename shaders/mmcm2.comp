#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// mmcm2: f16 GEMM on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2 on top of VK_KHR_cooperative_matrix): f16
// inputs, f32 accumulators, f16 output; the push constants and semantics of
// matmul.comp and mmcm.comp. Compiled with glslang 15 (shaders/gen: the
// cooperative_matrix2 extension above selects it).
//
// A workgroup (spec constant 0: 256 invocations, or 128 for the 64x64
// block) computes one BM x BN block of Y (-D BM, BN) as a single
// workgroup-scope accumulator, walking K in slices of BK (-D BK).
// Operands are loaded with coopMatLoadTensorNV through tensor layouts
// (the driver stages them in shared memory on its own); -D TA=1 / TB=1
// select the transposed operands (a transposing tensor view), so each
// variant has one straight loop.
//
// Fast path: a block wholly inside Y and operands whose offsets, batch
// strides and leading dimensions are multiples of 8 halves (host flags 32
// and 64) read the whole BK slices of K through unclamped layouts, the
// loop unrolled UNROLL times (-D UNROLL, default 4). The K tail, and every
// slice of other blocks, go through clamping layouts: elements outside A
// or B read as 0 (so the tail adds nothing). Stores outside Y are dropped.
//
// Epilogue: alpha alone is a scalar multiply; with a bias (flag 4) or an
// activation, coopMatPerElementNV applies alpha, beta*Bias and the
// activation per element in f32. The result is converted to f16 and
// stored through the clamping layout of Y.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "mathf.glsl"
#include "gen_act_f.glsl"

#ifndef TA
#define TA 0
#endif
#ifndef TB
#define TB 0
#endif
#ifndef UNROLL
#define UNROLL 4
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

#define MATA coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MATC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>
#define MATH coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// epi is the per-element epilogue: element (r, c) of the block at m0, n0.
float epi(const in uint r, const in uint c, const in float v, const in uint m0, const in uint n0) {
	uint gm = m0 + r, gn = n0 + c;
	float x = uintBitsToFloat(pc.alpha.x) * v;
	if ((pc.flags & 4u) != 0u && gm < pc.M && gn < pc.N)
		x += uintBitsToFloat(pc.beta.x) * float(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]);
	if (pc.act != 0u) x = act_apply(pc.act, x, uintBitsToFloat(pc.actA.x), uintBitsToFloat(pc.actB.x));
	return x;
}

// A is stored M x K (K x M with TA), B K x N (N x K with TB); a slice is
// given in stored order and the transposing view turns it around.
#if TA
#define SLICEA(l, k0) sliceTensorLayoutNV(l, k0, BK, m0, BM)
#define LOADA(m, base, l, k0) coopMatLoadTensorNV(m, a, base, SLICEA(l, k0), tview)
#else
#define SLICEA(l, k0) sliceTensorLayoutNV(l, m0, BM, k0, BK)
#define LOADA(m, base, l, k0) coopMatLoadTensorNV(m, a, base, SLICEA(l, k0))
#endif
#if TB
#define SLICEB(l, k0) sliceTensorLayoutNV(l, n0, BN, k0, BK)
#define LOADB(m, base, l, k0) coopMatLoadTensorNV(m, b, base, SLICEB(l, k0), tview)
#else
#define SLICEB(l, k0) sliceTensorLayoutNV(l, k0, BK, n0, BN)
#define LOADB(m, base, l, k0) coopMatLoadTensorNV(m, b, base, SLICEB(l, k0))
#endif

void main() {
	uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
	uint M = pc.M, N = pc.N, K = pc.K;
	bool fast = (pc.flags & 96u) == 96u && m0 + BM <= M && n0 + BN <= N;
	uint kfull = fast ? K / BK * BK : 0u; // slices read unclamped
	uint lda = TA != 0 ? M : K, ldb = TB != 0 ? K : N;
	tensorViewNV<2, false, 1, 0> tview = createTensorViewNV(2, false, 1, 0);
	tensorLayoutNV<2> la = createTensorLayoutNV(2), lb = createTensorLayoutNV(2);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lac = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lbc = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
#if TA
	lac = setTensorLayoutDimensionNV(lac, K, M);
#else
	lac = setTensorLayoutDimensionNV(lac, M, K);
#endif
#if TB
	lbc = setTensorLayoutDimensionNV(lbc, N, K);
#else
	lbc = setTensorLayoutDimensionNV(lbc, K, N);
#endif
	ly = setTensorLayoutDimensionNV(ly, M, N);
	if (fast) {
		// The host found offsets and leading dimensions multiples of 8:
		// say so, for 16-byte loads.
		lda &= ~7u;
		ldb &= ~7u;
		la = setTensorLayoutDimensionNV(la, TA != 0 ? K : M, TA != 0 ? M : K);
		lb = setTensorLayoutDimensionNV(lb, TB != 0 ? N : K, TB != 0 ? K : N);
		la = setTensorLayoutStrideNV(la, lda, 1);
		lb = setTensorLayoutStrideNV(lb, ldb, 1);
	}
	for (uint bt = gl_WorkGroupID.z; bt < pc.batch; bt += gl_NumWorkGroups.z) {
		uint baseA = pc.offA + bt * pc.sA, baseB = pc.offB + bt * pc.sB;
		MATC acc = MATC(0.0);
		uint k0 = 0u;
		if (fast) {
			uint ba = baseA & ~7u, bb = baseB & ~7u;
#if UNROLL > 1
			for (; k0 + UNROLL * BK <= kfull;) {
				[[unroll]] for (uint u = 0u; u < UNROLL; u++) {
					MATA ma;
					MATB mb;
					LOADA(ma, ba, la, k0);
					LOADB(mb, bb, lb, k0);
					acc = coopMatMulAdd(ma, mb, acc);
					k0 += BK;
				}
			}
#endif
			for (; k0 < kfull; k0 += BK) {
				MATA ma;
				MATB mb;
				LOADA(ma, ba, la, k0);
				LOADB(mb, bb, lb, k0);
				acc = coopMatMulAdd(ma, mb, acc);
			}
		}
		for (; k0 < K; k0 += BK) { // the K tail, or everything off the fast path
			MATA ma;
			MATB mb;
			LOADA(ma, baseA, lac, k0);
			LOADB(mb, baseB, lbc, k0);
			acc = coopMatMulAdd(ma, mb, acc);
		}
		if ((pc.flags & 4u) != 0u || pc.act != 0u) {
			coopMatPerElementNV(acc, acc, epi, m0, n0);
		} else if (pc.alpha.x != floatBitsToUint(1.0)) {
			acc = acc * uintBitsToFloat(pc.alpha.x);
		}
		MATH h = MATH(acc);
		coopMatStoreTensorNV(h, y, pc.offY + bt * pc.sY, sliceTensorLayoutNV(ly, m0, BM, n0, BN));
	}
}
