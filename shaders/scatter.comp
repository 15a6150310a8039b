#version 450
#extension GL_GOOGLE_include_directive : require
// scatter: ScatterElements in place on Y ([outer, axis, inner]),
//   Y[o, Idx[o, j, i], i] = fn(Y[o, Idx[o, j, i], i], Upd[o, j, i]),
// with strided [outer, n, inner] Idx (i32, or i64 as word pairs; offI in
// words) and Upd. One invocation per (o, i) column walks j in order: two
// columns never touch the same element of Y, so the result is the
// sequential one (the last duplicate wins for Set) and deterministic.
// fn: 0 Set (raw copy), 1 Add, 2 Mul, 3 Max, 4 Min (floats: NaN
// propagates, max(-0, +0) = +0, min = -0, as Go's math.Max/Min). An index
// outside [-axis, axis) is skipped and flagged in the status words when
// tag != 0 (indexstatus.glsl).
#define RANK 1
#define NOPS 1
#include "common.glsl"
#include "indexstatus.glsl"

layout(push_constant) uniform PC {
	uint outer, axis, n, inner;
	uint offY, offI, offU, idx64;
	int is0, is1, is2, fn;
	int us0, us1, us2;
	uint tag;
} pc;
layout(std430, binding = 0) readonly buffer BI { int idx[]; };
layout(std430, binding = 1) readonly buffer BU { X_T upd[]; };
layout(std430, binding = 2) buffer BY { X_T y[]; };

X_CT combine(int fn, X_CT a, X_CT u) {
#if X_ISFLOAT
	if (fn != 1 && fn != 2 && (isnan(a) || isnan(u))) return a + u;
#endif
	switch (fn) {
	case 1: return a + u;
	case 2: return a * u;
	case 3:
#if X_ISFLOAT
		if (a == u && a == X_CT(0)) return a + u; // +0 unless both are -0
#endif
		return a > u ? a : u;
	default:
#if X_ISFLOAT
		if (a == u && a == X_CT(0)) return -((-a) + (-u)); // -0 unless both are +0
#endif
		return a < u ? a : u;
	}
}

void main() {
	uint cols = pc.outer * pc.inner;
	GRID_LOOP(c, cols) {
		uint o = c / pc.inner, i = c % pc.inner;
		for (uint j = 0u; j < pc.n; j++) {
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
			if (!ok || k < 0 || k >= int(pc.axis)) {
				flag_index(pc.tag, lo, hi, pc.axis);
				continue;
			}
			uint ye = pc.offY + (o * pc.axis + uint(k)) * pc.inner + i;
			uint ue = pc.offU + o * uint(pc.us0) + j * uint(pc.us1) + i * uint(pc.us2);
			if (pc.fn == 0) y[ye] = upd[ue];
			else y[ye] = X_ST(combine(pc.fn, X_CT(X_LD(y[ye])), X_CT(X_LD(upd[ue]))));
		}
	}
}
