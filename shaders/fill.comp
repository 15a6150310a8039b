#version 450
#extension GL_GOOGLE_include_directive : require
// fill: Y[i] = value (raw element bits in push constants).
#define RANK 6
#define NOPS 1
#include "common.glsl"
#include "bytes.glsl"

#ifdef VEC
#include "vec.glsl"
#endif

layout(push_constant) uniform PC {
	uint n;
#ifdef VEC
	uint vlo, ntot, mask; // vec.glsl's words
#else
	uint vlo, vhi, pad;
#endif
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
} pc;
layout(std430, binding = 0) buffer BY { E_T y[]; };
#ifdef VEC
// four elements as one word, two or four words
#if ESIZE == 1
layout(std430, binding = 0) buffer BY4 { uint y4[]; };
#define V4 ((pc.vlo & 0xffu) * 0x01010101u)
#elif ESIZE == 2
layout(std430, binding = 0) buffer BY4 { uvec2 y4[]; };
#define V4 uvec2((pc.vlo & 0xffffu) * 0x00010001u)
#else
layout(std430, binding = 0) buffer BY4 { uvec4 y4[]; };
#define V4 uvec4(pc.vlo)
#endif
#endif

void main() {
#if ESIZE == 1
#define V uint8_t(pc.vlo)
#elif ESIZE == 2
#define V uint16_t(pc.vlo)
#elif ESIZE == 4
#define V pc.vlo
#elif !defined(VEC)
#define V uvec2(pc.vlo, pc.vhi)
#endif
#ifdef VEC
	EW_LOOP(base, pc.n) {
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				y4[o[0] >> 2] = V4;
			}
		}
	}
	VEC_TAIL(i) y[VEC_TAIL_AT(0, i)] = V;
	return;
#endif
	EW_LOOP(base, pc.n) {
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				uint o[NOPS];
				ew_index(i, pc.shape, pc.st, pc.off, o);
				y[o[0]] = V;
			}
		}
	}
}
