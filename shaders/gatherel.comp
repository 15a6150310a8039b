#version 450
#extension GL_GOOGLE_include_directive : require
// gatherel: GatherElements, Y[o, j, i] = X[o, Idx[o, j, i], i], with a
// strided [outer, n, inner] Idx (i32, or i64 read as word pairs: offI is
// then in words) and zero for indices outside [-axis, axis), which are
// flagged in the status words when tag != 0 (indexstatus.glsl).
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "bytes.glsl"
#include "indexstatus.glsl"

layout(push_constant) uniform PC {
	uint outer, axis, n, inner;
	uint offX, offI, offY, idx64;
	int is0, is1, is2;
	uint tag;
} pc;
layout(std430, binding = 0) readonly buffer BX { E_T x[]; };
layout(std430, binding = 1) readonly buffer BI { int idx[]; };
layout(std430, binding = 2) writeonly buffer BY { E_T y[]; };

void main() {
	uint total = pc.outer * pc.n * pc.inner;
	GRID_LOOP(t, total) {
		uint i = t % pc.inner;
		uint r = t / pc.inner;
		uint j = r % pc.n;
		uint o = r / pc.n;
		uint e = o * uint(pc.is0) + j * uint(pc.is1) + i * uint(pc.is2);
		int k, lo, hi;
		bool ok = true;
		if (pc.idx64 != 0u) {
			lo = idx[pc.offI + 2u * e];
			hi = idx[pc.offI + 2u * e + 1u];
			ok = (hi == 0 && lo >= 0) || (hi == -1 && lo < 0);
		} else {
			lo = idx[pc.offI + e];
			hi = lo < 0 ? -1 : 0;
		}
		k = lo;
		if (k < 0) k += int(pc.axis);
		ok = ok && k >= 0 && k < int(pc.axis);
		y[pc.offY + t] = ok ? x[pc.offX + (o * pc.axis + uint(k)) * pc.inner + i] : E_T(0);
		if (!ok) flag_index(pc.tag, lo, hi, pc.axis);
	}
}
