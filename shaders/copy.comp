#version 450
#extension GL_GOOGLE_include_directive : require
// copy: strided Y[i] = X[i] for one element size (transpose, slice, concat).
#define RANK 6
#define NOPS 2
#include "common.glsl"
#include "bytes.glsl"

layout(push_constant) uniform PC {
	uint n;
	uint fn, pad0, pad1;
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
} pc;
layout(std430, binding = 0) readonly buffer BX { E_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { E_T y[]; };

void main() {
	EW_LOOP(base, pc.n) {
#if ESIZE >= 4
		E_T v[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				v[u] = x[o[0]];
				oy[u] = o[1];
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) y[oy[u]] = v[u];
		}
#else
		// 8- and 16-bit elements move memory to memory: holding them in
		// registers would need the Int8/Int16 capabilities.
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				y[o[1]] = x[o[0]];
			}
		}
#endif
	}
}
