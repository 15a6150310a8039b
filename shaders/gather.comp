#version 450
#extension GL_GOOGLE_include_directive : require
// gather: Y[o, j, i] = X[o, Idx[j], i]; Idx is i32 or i64 (read as word
// pairs). An index outside [-axis, axis) gives zero and is flagged in the
// status words when tag != 0 (indexstatus.glsl).
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "bytes.glsl"
#include "indexstatus.glsl"

layout(push_constant) uniform PC {
	uint outer, axis, inner, nidx;
	uint offX, offI, offY, idx64;
	uint tag;
} pc;
layout(std430, binding = 0) readonly buffer BX { E_T x[]; };
layout(std430, binding = 1) readonly buffer BI { int idx[]; };
layout(std430, binding = 2) writeonly buffer BY { E_T y[]; };

void main() {
	uint n = pc.outer * pc.nidx * pc.inner;
	GRID_LOOP(t, n) {
		uint i = t % pc.inner;
		uint r = t / pc.inner;
		uint j = r % pc.nidx;
		uint o = r / pc.nidx;
		int k, lo, hi;
		bool ok;
		if (pc.idx64 != 0u) {
			lo = idx[pc.offI + 2u * j];
			hi = idx[pc.offI + 2u * j + 1u];
			ok = (hi == 0 && lo >= 0) || (hi == -1 && lo < 0);
		} else {
			lo = idx[pc.offI + j];
			hi = lo < 0 ? -1 : 0;
			ok = true;
		}
		k = lo;
		if (k < 0) k += int(pc.axis);
		ok = ok && k >= 0 && k < int(pc.axis);
		if (ok) y[pc.offY + t] = x[pc.offX + (o * pc.axis + uint(k)) * pc.inner + i];
		else {
			y[pc.offY + t] = E_T(0);
			// One flag per index, not per copied element.
			if (o == 0u && i == 0u) flag_index(pc.tag, lo, hi, pc.axis);
		}
	}
}
