#version 450
#extension GL_GOOGLE_include_directive : require
// cast: strided Y[i] = convert(X[i]) between two dtypes (Unary Copy).
#define RANK 6
#define NOPS 2
#include "common.glsl"

layout(push_constant) uniform PC {
	uint n;
	uint fn, pad0, pad1;
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };

void main() {
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
			if (EW_ITEM(base, u) < pc.n) {
#if Y_ISBOOL
				Y_CT r = v[u] != X_CT(0) ? 1 : 0;
#else
				Y_CT r = Y_CT(v[u]);
#endif
				y[oy[u]] = Y_ST(r);
			}
		}
	}
}
