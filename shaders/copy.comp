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
	GRID_LOOP(i, pc.n) {
		uint o[NOPS];
		ew_index(i, pc.shape, pc.st, pc.off, o);
		y[o[1]] = x[o[0]];
	}
}
