#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// normalize: per row of [outer, n]: (x - mean) / sqrt(var + eps) * scale + bias,
// one workgroup per row, two passes (mean, then centered variance). With
// flags bit 2 a row of at most WG*CACHE elements is held in registers, so
// X is read once. The SUBGROUP variants reduce across the workgroup with
// subgroup arithmetic (two barriers, against 2 log2 WG), and with flags
// bit 3 give each row of at most CACHE*gl_SubgroupSize elements to one
// subgroup (sgrows).
#define RANK 1
#define NOPS 1
#include "common.glsl"

layout(push_constant) uniform PC {
	uint outer, n, flags, pad;
	uint offX, offS, offB, offY;
	uvec2 eps;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
layout(std430, binding = 1) readonly buffer BS { X_T sc[]; };
layout(std430, binding = 2) readonly buffer BB { X_T bi[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };

shared CT sv[WG];
#ifdef VROWS
#include "vrows.glsl"
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
layout(std430, binding = 1) readonly buffer BS4 { X_VT sc4[]; };
layout(std430, binding = 2) readonly buffer BB4 { X_VT bi4[]; };
layout(std430, binding = 3) writeonly buffer BY4 { Y_VT y4[]; };
#endif

#ifdef SUBGROUP
// Workgroup reductions of the SUBGROUP variants: subgroupAdd/Max, then
// every invocation folds the per-subgroup results in subgroup order.
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
	CT eps = pc_real(pc.eps);
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < pc.outer; r += nwg) {
		uint base = pc.offX + r * n;
		CT v[CACHE];
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) { // uniform: skip what a short row leaves empty
				uint k = t + j * WG;
				v[j] = k < n ? CT(X_LD(x[base + k])) : CT(0);
				acc += v[j];
			}
		}
		CT mean = wgsum(acc, t) / CT(n);
		acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) {
				v[j] -= mean;
				if (t + j * WG < n) acc += v[j] * v[j];
			}
		}
		CT inv = CT(1) / sqrt(wgsum(acc, t) / CT(n) + eps);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * WG < n) {
				uint k = t + j * WG;
				if (k < n) {
					CT w = v[j] * inv;
					if ((pc.flags & 1u) != 0u) w *= CT(X_LD(sc[pc.offS + k]));
					if ((pc.flags & 2u) != 0u) w += CT(X_LD(bi[pc.offB + k]));
					y[pc.offY + r * n + k] = Y_ST(w);
				}
			}
		}
	}
}

#ifdef SUBGROUP
// sgrows (flags bit 3): one subgroup per row of at most
// CACHE*gl_SubgroupSize elements, held in registers, reduced with
// subgroup arithmetic alone.
void sgrows() {
	uint lane = gl_SubgroupInvocationID, ns = gl_SubgroupSize, n = pc.n;
	uint sg = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * gl_NumSubgroups + gl_SubgroupID;
	uint nsg = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
	CT eps = pc_real(pc.eps);
	for (uint r = sg; r < pc.outer; r += nsg) {
		uint base = pc.offX + r * n;
		CT v[CACHE];
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) { // uniform: skip what a short row leaves empty
				uint k = lane + j * ns;
				v[j] = k < n ? CT(X_LD(x[base + k])) : CT(0);
				acc += v[j];
			}
		}
		CT mean = subgroupAdd(acc) / CT(n);
		acc = CT(0);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) {
				v[j] -= mean;
				if (lane + j * ns < n) acc += v[j] * v[j];
			}
		}
		CT inv = CT(1) / sqrt(subgroupAdd(acc) / CT(n) + eps);
		[[unroll]] for (uint j = 0u; j < CACHE; j++) {
			if (j * ns < n) {
				uint k = lane + j * ns;
				if (k < n) {
					CT w = v[j] * inv;
					if ((pc.flags & 1u) != 0u) w *= CT(X_LD(sc[pc.offS + k]));
					if ((pc.flags & 2u) != 0u) w += CT(X_LD(bi[pc.offB + k]));
					y[pc.offY + r * n + k] = Y_ST(w);
				}
			}
		}
	}
}
#endif

#ifdef VROWS
// vrows (the VROWS variants, rows of a multiple of 4 items at offsets
// that are multiples of 4): vrows.glsl's teams of pc.pad lanes.
void vrows() {
	uint L = pc.pad, n = pc.n, n4 = n >> 2, t = gl_LocalInvocationID.x;
	uint team, lane, nteams;
	vrows_team(L, team, lane, nteams);
	CT eps = pc_real(pc.eps);
	for (uint r = team; r < pc.outer; r += nteams) {
		uint bx = (pc.offX >> 2) + r * n4, by = (pc.offY >> 2) + r * n4;
		vec4 v[VC];
		CT acc = CT(0);
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			if (j * L < n4) { // uniform
				uint k = lane + j * L;
				v[j] = k < n4 ? vec4(X_VLD(x4[bx + k])) : vec4(0);
				acc += vrows_hsum(v[j]);
			}
		}
		if (L >= WG) acc = wgsum(acc, t);
		else VROWS_REDUCE(acc, L, vrows_add);
		CT mean = acc / CT(n);
		acc = CT(0);
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			if (j * L < n4) {
				v[j] -= vec4(mean);
				if (lane + j * L < n4) acc += vrows_hsum(v[j] * v[j]);
			}
		}
		if (L >= WG) acc = wgsum(acc, t);
		else VROWS_REDUCE(acc, L, vrows_add);
		CT inv = CT(1) / sqrt(acc / CT(n) + eps);
		[[unroll]] for (uint j = 0u; j < VC; j++) {
			uint k = lane + j * L;
			if (j * L < n4 && k < n4) {
				vec4 w = v[j] * inv;
				if ((pc.flags & 1u) != 0u) w *= vec4(X_VLD(sc4[(pc.offS >> 2) + k]));
				if ((pc.flags & 2u) != 0u) w += vec4(X_VLD(bi4[(pc.offB >> 2) + k]));
				y4[by + k] = Y_VST(w);
			}
		}
	}
}
#endif

void main() {
#ifdef VROWS
	vrows();
	return;
#endif
#ifdef SUBGROUP
	if ((pc.flags & 8u) != 0u) {
		sgrows();
		return;
	}
#endif
	if ((pc.flags & 4u) != 0u) {
		cached();
		return;
	}
	uint t = gl_LocalInvocationID.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	CT eps = pc_real(pc.eps);
	// each pass keeps UNR loads of X in flight per invocation
	uint n = pc.n, kend = n >= (UNR - 1u) * WG ? n - (UNR - 1u) * WG : 0u;
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < pc.outer; r += nwg) {
		uint base = pc.offX + r * n;
		CT a[UNR], b[UNR];
		[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] = CT(0);
		uint k = t;
		for (; k < kend; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = CT(X_LD(x[base + k + j * WG]));
			[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] += a[j];
		}
		for (; k < n; k += WG) b[0] += CT(X_LD(x[base + k]));
		CT mean = wgsum((b[0] + b[1]) + (b[2] + b[3]), t) / CT(n);
		[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] = CT(0);
		for (k = t; k < kend; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = CT(X_LD(x[base + k + j * WG])) - mean;
			[[unroll]] for (uint j = 0u; j < UNR; j++) b[j] += a[j] * a[j];
		}
		for (; k < n; k += WG) {
			CT d = CT(X_LD(x[base + k])) - mean;
			b[0] += d * d;
		}
		CT var = wgsum((b[0] + b[1]) + (b[2] + b[3]), t) / CT(n);
		CT inv = CT(1) / sqrt(var + eps);
		for (k = t; k < n; k += UNR * WG) {
			[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = k + j * WG < n ? CT(X_LD(x[base + k + j * WG])) : CT(0);
			[[unroll]] for (uint j = 0u; j < UNR; j++) {
				uint kj = k + j * WG;
				if (kj < n) {
					CT v = (a[j] - mean) * inv;
					if ((pc.flags & 1u) != 0u) v *= CT(X_LD(sc[pc.offS + kj]));
					if ((pc.flags & 2u) != 0u) v += CT(X_LD(bi[pc.offB + kj]));
					y[pc.offY + r * n + kj] = Y_ST(v);
				}
			}
		}
	}
}
