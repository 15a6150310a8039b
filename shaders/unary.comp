#version 450
#extension GL_GOOGLE_include_directive : require
// unary: strided Y[i] = fn(X[i]) for one dtype; fn is an rt.UnaryFn.
#define RANK 6
#define NOPS 2
#include "common.glsl"
#if X_ISFLOAT
#ifdef CT_DOUBLE
#include "mathd.glsl"
#include "gen_act_d.glsl"
#else
#include "mathf.glsl"
#include "gen_act_f.glsl"
#endif
#endif

#ifdef VEC
#include "vec.glsl"
#endif

layout(push_constant) uniform PC {
	uint n;
#ifdef VEC
	uint fn, ntot, mask;
#else
	uint fn, pad0, pad1;
#endif
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
	uvec2 alpha, beta;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };
#ifdef VEC
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
layout(std430, binding = 1) writeonly buffer BY4 { Y_VT y4[]; };
#endif

#if !X_ISFLOAT
// Integer and bool functions (the engine only lowers these to ints).
X_CT int_apply(uint fn, X_CT v, X_CT a, X_CT b) {
	switch (fn) {
	case 1u: return -v;
	case 2u: return v < X_CT(0) ? -v : v;
	case 3u: return v > X_CT(0) ? v : X_CT(0);
	case 26u: return v > X_CT(0) ? X_CT(1) : (v < X_CT(0) ? X_CT(-1) : X_CT(0));
	case 30u: return min(max(v, a), b);
	case 32u: return v == X_CT(0) ? X_CT(1) : X_CT(0);
	case 33u: return v * v;
	}
	return v;
}
#endif

#if X_ISFLOAT
#define APPLY(v) act_apply(pc.fn, v, a, b)
#else
#define APPLY(v) int_apply(pc.fn, v, a, b)
#endif

#ifdef VEC
// UNARY_VEC is the vector kernel's loop (and scalar tail) with F4 on a
// vector and F1 on an item.
#define UNARY_VEC(F4, F1) \
	EW_LOOP(base, pc.n) { \
		X_VCT v[EW_U]; \
		uint oy[EW_U]; \
		[[unroll]] for (uint u = 0u; u < EW_U; u++) { \
			uint i = EW_ITEM(base, u); \
			if (i < pc.n) { \
				uint o[NOPS]; \
				ew_index(i, pc.shape, pc.st, pc.off, o); \
				if (VEC_SPLAT(0)) v[u] = X_VCT(X_LD(x[o[0]])); \
				else v[u] = X_VLD(x4[o[0] >> 2]); \
				oy[u] = o[1] >> 2; \
			} \
		} \
		[[unroll]] for (uint u = 0u; u < EW_U; u++) { \
			if (EW_ITEM(base, u) < pc.n) y4[oy[u]] = Y_VST(F4(v[u])); \
		} \
	} \
	VEC_TAIL(i) y[VEC_TAIL_AT(1, i)] = Y_ST(F1(X_LD(x[VEC_TAIL_AT(0, i)])));
#define RELU4(v) max(v, X_VCT(0))
#define RELU1(v) max(v, X_CT(0))
#define GENERIC4(v) apply4(v, a, b)
X_VCT apply4(X_VCT v, X_CT a, X_CT b) {
	X_VCT r;
	[[unroll]] for (int c = 0; c < 4; c++) r[c] = APPLY(v[c]);
	return r;
}
#endif

void main() {
#if X_ISFLOAT
	CT a = pc_real(pc.alpha), b = pc_real(pc.beta);
#else
	// integer Clip bounds arrive as two's complement words
#if X_DT == 5
	X_CT a = X_CT(packInt2x32(ivec2(pc.alpha))), b = X_CT(packInt2x32(ivec2(pc.beta)));
#else
	X_CT a = X_CT(int(pc.alpha.x)), b = X_CT(int(pc.beta.x));
#endif
#endif
#ifdef VEC
	// Relu runs its own copy of the loop: the generic one evaluates the
	// function's switch per item (0.83x of the copy on the H200)
	if (pc.fn == 3u) {
		UNARY_VEC(RELU4, RELU1)
	} else {
		UNARY_VEC(GENERIC4, APPLY)
	}
#else
	EW_LOOP(base, pc.n) {
		X_CT v[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				v[u] = X_LD(x[o[0]]);
				oy[u] = o[1];
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) y[oy[u]] = Y_ST(APPLY(v[u]));
		}
	}
#endif
}
