#version 450
#extension GL_GOOGLE_include_directive : require
// cast: strided Y[i] = convert(X[i]) between two dtypes (Unary Copy).
#define RANK 6
#define NOPS 2
#include "common.glsl"

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
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };
#ifdef VEC
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
layout(std430, binding = 1) writeonly buffer BY4 { Y_VT y4[]; };
#endif

#if Y_ISBOOL
#define CONVERT(v) Y_CT((v) != X_CT(0) ? 1 : 0)
#else
#define CONVERT(v) Y_CT(v)
#endif

void main() {
#ifdef VEC
	EW_LOOP(base, pc.n) {
		X_VCT v[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				if (VEC_SPLAT(0)) v[u] = X_VCT(X_LD(x[o[0]]));
				else v[u] = X_VLD(x4[o[0] >> 2]);
				oy[u] = o[1] >> 2;
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) y4[oy[u]] = Y_VST(Y_VCT(v[u]));
		}
	}
	VEC_TAIL(i) y[VEC_TAIL_AT(1, i)] = Y_ST(CONVERT(X_LD(x[VEC_TAIL_AT(0, i)])));
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
			if (EW_ITEM(base, u) < pc.n) y[oy[u]] = Y_ST(CONVERT(v[u]));
		}
	}
#endif
}
