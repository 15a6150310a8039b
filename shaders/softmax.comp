#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// softmax: stable (log-)softmax over the middle axis of [outer, n, inner].
// Mode 0: one workgroup per (outer, inner) row (UNR loads in flight per
// invocation in each of its three passes); mode 1: one invocation per row;
// mode 2: one workgroup per contiguous row (inner == 1) of at most
// WG*CACHE elements, held in registers, so X is read once (and exp
// computed once per element). The SUBGROUP variants reduce across the
// workgroup with subgroup arithmetic (two barriers, against 2 log2 WG),
// and have mode 3: one subgroup per contiguous row of at most
// CACHE*gl_SubgroupSize elements (sgrows).
#define RANK 1
#define NOPS 1
#include "common.glsl"
#ifdef CT_DOUBLE
#include "mathd.glsl"
#else
#include "mathf.glsl"
#endif

layout(push_constant) uniform PC {
	uint outer, n, inner, logsm;
	uint offX, offY, mode, pad;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };

shared CT sv[WG];
#ifdef VROWS
#include "vrows.glsl"
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
layout(std430, binding = 1) writeonly buffer BY4 { Y_VT y4[]; };
#endif

uint at(uint o, uint k, uint i) { return (o * pc.n + k) * pc.inner + i; }
CT load(uint o, uint k, uint i) { return CT(X_LD(x[pc.offX + at(o, k, i)])); }
void put(uint o, uint k, uint i, CT v, CT m, CT s) {
	CT r = pc.logsm != 0u ? v - m - M_LOG(s) : M_EXP(v - m) / s;
	y[pc.offY + at(o, k, i)] = Y_ST(r);
}

#ifdef SUBGROUP
// Workgroup reductions of the SUBGROUP variants: subgroupAdd/Max, then
// every invocation folds the per-subgroup results in subgroup order.
CT wgmax(CT v, uint t) {
	v = subgroupMax(v);
	if (subgroupElect()) sv[gl_SubgroupID] = v;
	barrier();
	CT r = sv[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++) r = max(r, sv[i]);
	barrier();
	return r;
}

CT wgsum(CT v, uint t) {
	v = subgroupAdd(v);
	if (subgroupElect()) sv[gl_SubgroupID] = v;
	barrier();
	CT r = sv[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++) r += sv[i];
	barrier();
	return r;
}
#else
CT wgmax(CT v, uint t) {
	sv[t] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (t < s) sv[t] = max(sv[t], sv[t + s]);
		barrier();
	}
	CT r = sv[0];
	barrier();
	return r;
}

CT wgsum(CT v, uint t) {
	sv[t] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (t < s) sv[t] += sv[t + s];
		barrier();
	}
	CT r = sv[0];
	barrier();
	return r;
}
#endif

#define CACHE 32u
#define UNR 4u

void cached() {
	uint t = gl_LocalInvocationID.x, n = pc.n;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	CT low = -CT(M_INF);
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < pc.outer; r += nwg) {
		uint bx = pc.offX + r * n, by = pc.offY + r * n;
		CT v[CACHE];
		CT m = low;
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) { // uniform: skip what a short row leaves empty
				uint k = t + j * WG;
				v[j] = k < n ? CT(X_LD(x[bx + k])) : low;
				m = max(m, v[j]);
			}
		}
		m = wgmax(m, t);
		// softmax keeps exp(v - m) in v; log-softmax keeps v - m
		bool lg = pc.logsm != 0u;
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) {
				v[j] -= m;
				CT e = M_EXP(v[j]);
				if (t + j * WG < n) acc += e;
				if (!lg) v[j] = e;
			}
		}
		CT s = wgsum(acc, t);
		CT ls = lg ? M_LOG(s) : CT(0), inv = CT(1) / s;
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) {
				uint k = t + j * WG;
				if (k < n) y[by + k] = Y_ST(lg ? v[j] - ls : v[j] * inv);
			}
		}
	}
}

#ifdef SUBGROUP
// sgrows (mode 3): one subgroup per contiguous row of at most
// CACHE*gl_SubgroupSize elements, held in registers, reduced with
// subgroup arithmetic alone (no barriers; rows shorter than a workgroup
// no longer leave most of it idle).
void sgrows() {
	uint lane = gl_SubgroupInvocationID, ns = gl_SubgroupSize, n = pc.n;
	uint sg = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * gl_NumSubgroups + gl_SubgroupID;
	uint nsg = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
	CT low = -CT(M_INF);
	bool lg = pc.logsm != 0u;
	for (uint r = sg; r < pc.outer; r += nsg) {
		uint bx = pc.offX + r * n, by = pc.offY + r * n;
		CT v[CACHE];
		CT m = low;
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) { // uniform: skip what a short row leaves empty
				uint k = lane + j * ns;
				v[j] = k < n ? CT(X_LD(x[bx + k])) : low;
				m = max(m, v[j]);
			}
		}
		m = subgroupMax(m);
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) {
				v[j] -= m;
				CT e = M_EXP(v[j]);
				if (lane + j * ns < n) acc += e;
				if (!lg) v[j] = e;
			}
		}
		CT s = subgroupAdd(acc);
		CT ls = lg ? M_LOG(s) : CT(0), inv = CT(1) / s;
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) {
				uint k = lane + j * ns;
				if (k < n) y[by + k] = Y_ST(lg ? v[j] - ls : v[j] * inv);
			}
		}
	}
}
#endif

#ifdef VROWS
// vrows (the VROWS variants, contiguous rows of a multiple of 4 items at
// offsets that are multiples of 4): vrows.glsl's teams of pc.pad lanes.
void vrows() {
	uint L = pc.pad, n4 = pc.n >> 2, t = gl_LocalInvocationID.x;
	uint team, lane, nteams;
	vrows_team(L, team, lane, nteams);
	CT low = -CT(M_INF);
	bool lg = pc.logsm != 0u;
	for (uint r = team; r < pc.outer; r += nteams) {
		uint bx = (pc.offX >> 2) + r * n4, by = (pc.offY >> 2) + r * n4;
		vec4 v[VC];
		CT m = low;
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			if (j * L < n4) { // uniform
				uint k = lane + j * L;
				v[j] = k < n4 ? vec4(X_VLD(x4[bx + k])) : vec4(low);
				m = max(m, vrows_hmax(v[j]));
			}
		}
		if (L >= WG) m = wgmax(m, t);
		else VROWS_REDUCE(m, L, max);
		// softmax keeps exp(v - m) in v; log-softmax keeps v - m
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			if (j * L < n4) {
				v[j] -= vec4(m);
				vec4 e = exp(v[j]);
				if (lane + j * L < n4) acc += vrows_hsum(e);
				if (!lg) v[j] = e;
			}
		}
		CT s = acc;
		if (L >= WG) s = wgsum(acc, t);
		else VROWS_REDUCE(s, L, vrows_add);
		CT ls = lg ? M_LOG(s) : CT(0), inv = CT(1) / s;
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			uint k = lane + j * L;
			if (j * L < n4 && k < n4) y4[by + k] = Y_VST(lg ? v[j] - vec4(ls) : v[j] * inv);
		}
	}
}
#endif

void main() {
#ifdef VROWS
	vrows();
#else
	uint total = pc.outer * pc.inner;
	CT low = -CT(M_INF);
	if (pc.mode == 2u) {
		cached();
		return;
	}
#ifdef SUBGROUP
	if (pc.mode == 3u) {
		sgrows();
		return;
	}
#endif
	if (pc.mode == 1u) {
		GRID_LOOP(r, total) {
			uint o = r / pc.inner, i = r % pc.inner;
			CT m = low;
			for (uint k = 0u; k < pc.n; k++) m = max(m, load(o, k, i));
			CT s = CT(0);
			for (uint k = 0u; k < pc.n; k++) s += M_EXP(load(o, k, i) - m);
			for (uint k = 0u; k < pc.n; k++) put(o, k, i, load(o, k, i), m, s);
		}
		return;
	}
	uint t = gl_LocalInvocationID.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	// each pass keeps UNR loads in flight per invocation
	uint n = pc.n, kend = n >= (UNR - 1u) * WG ? n - (UNR - 1u) * WG : 0u;
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < total; r += nwg) {
		uint o = r / pc.inner, i = r % pc.inner;
		CT a[UNR], b[UNR];
		[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] = low;
		uint k = t;
		for (; k < kend; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = load(o, k + j * WG, i);
			[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] = max(b[j], a[j]);
		}
		for (; k < n; k += WG) b[0] = max(b[0], load(o, k, i));
		CT m = b[0];
		[[unroll]] for (uint j = 1u; j < UNR; j++) m = max(m, b[j]);
		m = wgmax(m, t);
		[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] = CT(0);
		for (k = t; k < kend; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = load(o, k + j * WG, i);
			[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] += M_EXP(a[j] - m);
		}
		for (; k < n; k += WG) b[0] += M_EXP(load(o, k, i) - m);
		CT acc = (b[0] + b[1]) + (b[2] + b[3]);
		CT sum = wgsum(acc, t);
		for (k = t; k < kend; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = load(o, k + j * WG, i);
			[[unroll]] for (uint j = 0u; j < UNR; j++) put(o, k + j * WG, i, a[j], m, sum);
		}
		for (; k < n; k += WG) put(o, k, i, load(o, k, i), m, sum);
	}
#endif
}
