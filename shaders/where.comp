#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_8bit_storage : require
// where: Y[i] = Cond[i] ? A[i] : B[i]; rank 5 so 4 operands fit in 128 bytes.
#define RANK 5
#define NOPS 4
#include "common.glsl"
#include "bytes.glsl"

layout(push_constant) uniform PC {
	uint n;
	uint shape[RANK - 1];
	uint off[NOPS];
	int st[NOPS * RANK];
	uint pad[3];
} pc;
layout(std430, binding = 0) readonly buffer BC { uint8_t c[]; };
layout(std430, binding = 1) readonly buffer BA { E_T a[]; };
layout(std430, binding = 2) readonly buffer BB { E_T b[]; };
layout(std430, binding = 3) writeonly buffer BY { E_T y[]; };

void main() {
	EW_LOOP(base, pc.n) {
		// The conditions first, then the moves; if/else rather than ?: so
		// 8/16-bit values are never held in registers (that would need the
		// Int8/Int16 capabilities).
		uint o[EW_U][NOPS];
		bool take[EW_U];
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			uint i = EW_ITEM(base, u);
			if (i < pc.n) {
				ew_index(i, pc.shape, pc.st, pc.off, o[u]);
				take[u] = uint(c[o[u][0]]) != 0u;
			}
		}
		[[unroll]] for (uint u = 0u; u < EW_U; u++) {
			if (EW_ITEM(base, u) < pc.n) {
				if (take[u]) y[o[u][3]] = a[o[u][1]];
				else y[o[u][3]] = b[o[u][2]];
			}
		}
	}
}
