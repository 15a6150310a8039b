#version 450
#extension GL_GOOGLE_include_directive : require
// copy: strided Y[i] = X[i] for one element size (transpose, slice, concat).
#define RANK 6
#define NOPS 2
#include "common.glsl"
#include "bytes.glsl"

#ifdef VEC
#include "vec.glsl"
// four elements as one word, two or four words
#if ESIZE == 1
#define E_VT uint
#elif ESIZE == 2
#define E_VT uvec2
#else
#define E_VT uvec4
#endif
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
layout(std430, binding = 0) readonly buffer BX { E_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { E_T y[]; };
#ifdef VEC
layout(std430, binding = 0) readonly buffer BX4 { E_VT x4[]; };
layout(std430, binding = 1) writeonly buffer BY4 { E_VT y4[]; };
#endif

void main() {
#ifdef VEC
	EW_LOOP(base, pc.n) {
		E_VT v[EW_U];
		uint oy[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				v[u] = x4[o[0] >> 2];
				oy[u] = o[1] >> 2;
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) y4[oy[u]] = v[u];
		}
	}
	VEC_TAIL(i) y[VEC_TAIL_AT(1, i)] = x[VEC_TAIL_AT(0, i)];
#else
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
#endif
}
