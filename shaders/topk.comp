#version 450
#extension GL_GOOGLE_include_directive : require
// topk: TopK along the middle axis of X [outer, n, inner] into Values and
// Indices (i64, written as word pairs; offI in words), both
// [outer, k, inner]. One workgroup per (o, i) row runs k selection
// rounds: round q finds, by a strided scan and a shared-memory tree, the
// first element in rank order among those ranked after round q-1's pick.
// Rank order: by value (descending when largest, else ascending; NaN is
// larger than every number), equal values by lower index. O(k * n) per
// row, which suits the small k of ONNX models.
#define RANK 1
#define NOPS 1
#include "common.glsl"

layout(push_constant) uniform PC {
	uint outer, n, inner, k;
	uint offX, offV, offI, largest;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BV { X_T vals[]; };
layout(std430, binding = 2) writeonly buffer BI { int inds[]; };

shared X_CT sv[WG];
shared uint si[WG];

const uint NONE = 0xffffffffu;

// gt: a > b with NaN above every number.
bool gt(X_CT a, X_CT b) {
#if X_ISFLOAT
	bool na = isnan(a), nb = isnan(b);
	if (na || nb) return na && !nb;
#endif
	return a > b;
}

// before: (av, ai) ranks before (bv, bi).
bool before(X_CT av, uint ai, X_CT bv, uint bi) {
	bool lg = pc.largest != 0u;
	if (lg ? gt(av, bv) : gt(bv, av)) return true;
	if (lg ? gt(bv, av) : gt(av, bv)) return false;
	return ai < bi;
}

void main() {
	uint t = gl_LocalInvocationID.x;
	uint rows = pc.outer * pc.inner;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < rows; r += nwg) {
		uint o = r / pc.inner, i = r % pc.inner;
		uint base = pc.offX + o * pc.n * pc.inner + i;
		X_CT pv = X_CT(0);
		uint pi = NONE;
		for (uint q = 0u; q < pc.k; q++) {
			X_CT bv = X_CT(0);
			uint bi = NONE;
			for (uint j = t; j < pc.n; j += WG) {
				X_CT v = X_CT(X_LD(x[base + j * pc.inner]));
				if (pi != NONE && !before(pv, pi, v, j)) continue;
				if (bi == NONE || before(v, j, bv, bi)) {
					bv = v;
					bi = j;
				}
			}
			sv[t] = bv;
			si[t] = bi;
			barrier();
			for (uint s = WG / 2u; s > 0u; s >>= 1) {
				if (t < s) {
					uint oi = si[t + s];
					if (oi != NONE && (si[t] == NONE || before(sv[t + s], oi, sv[t], si[t]))) {
						sv[t] = sv[t + s];
						si[t] = oi;
					}
				}
				barrier();
			}
			pv = sv[0];
			pi = si[0];
			if (t == 0u) {
				uint d = (o * pc.k + q) * pc.inner + i;
				vals[pc.offV + d] = x[base + pi * pc.inner];
				inds[pc.offI + 2u * d] = int(pi);
				inds[pc.offI + 2u * d + 1u] = 0;
			}
			barrier();
		}
	}
}
