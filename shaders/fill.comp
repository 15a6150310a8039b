#version 450
#extension GL_GOOGLE_include_directive : require
// fill: Y[i] = value (raw element bits in push constants).
#define RANK 6
#define NOPS 1
#include "common.glsl"
#include "bytes.glsl"

layout(push_constant) uniform PC {
	uint n;
	uint vlo, vhi, pad;
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
} pc;
layout(std430, binding = 0) buffer BY { E_T y[]; };

void main() {
#if ESIZE == 1
#define V uint8_t(pc.vlo)
#elif ESIZE == 2
#define V uint16_t(pc.vlo)
#elif ESIZE == 4
#define V pc.vlo
#else
#define V uvec2(pc.vlo, pc.vhi)
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
