#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// reduce: Y[o, i] = fold_n X[o, n, i] for rt.ReduceFn fn over a contiguous
// [outer, n, inner] view. Mode 0: one workgroup per output (UNR
// accumulators per invocation, then a shared-memory tree); mode 1: one
// invocation per output (serial loop, coalesced over inner). With ARG, Y
// is i64 indices written as two words.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#if X_ISFLOAT
#ifdef CT_DOUBLE
#include "mathd.glsl"
#else
#include "mathf.glsl"
#endif
#define AT CT
#else
#define AT X_CT
#endif

#if X_ISFLOAT
#ifdef CT_DOUBLE
#define AT_LOW (-double(uintBitsToFloat(0x7f800000u)))
#define AT_HIGH double(uintBitsToFloat(0x7f800000u))
#else
#define AT_LOW uintBitsToFloat(0xff800000u)
#define AT_HIGH uintBitsToFloat(0x7f800000u)
#endif
#elif X_DT == 5
#define AT_LOW (-9223372036854775807L - 1L)
#define AT_HIGH 9223372036854775807L
#else
#define AT_LOW int(0x80000000u)
#define AT_HIGH 2147483647
#endif

layout(push_constant) uniform PC {
	uint outer, n, inner, fn;
	uint selectLast, offX, offY, mode;
} pc;
layout(std430, binding = 0) readonly buffer BX { X_T x[]; };
#ifdef VROWS
#extension GL_KHR_shader_subgroup_basic : require
#include "vrows.glsl"
layout(std430, binding = 0) readonly buffer BX4 { X_VT x4[]; };
#endif
#ifdef ARG
layout(std430, binding = 1) writeonly buffer BY { uint y[]; };
#else
layout(std430, binding = 1) writeonly buffer BY { Y_T y[]; };
#endif

// UNR: loads in flight per invocation in mode 0
#define UNR 8u

shared AT sv[WG];
#ifdef ARG
shared uint si[WG];
#endif

AT amax(AT a, AT b) { return a > b ? a : b; }
AT amin(AT a, AT b) { return a < b ? a : b; }
AT rinit(uint fn) {
	switch (fn) {
	case 2u: case 8u: case 9u: return AT_LOW;
	case 3u: case 10u: return AT_HIGH;
	case 4u: return AT(1);
	}
	return AT(0);
}
AT rmap(uint fn, AT v) {
	switch (fn) {
	case 5u: case 7u: return v * v;
	case 6u: return v < AT(0) ? -v : v;
	}
	return v;
}
AT rcomb(uint fn, AT a, AT b) {
	switch (fn) {
	case 2u: case 8u: return amax(a, b);
	case 3u: return amin(a, b);
	case 4u: return a * b;
	}
	return a + b;
}
// better reports whether candidate (v, i) beats (w, j) for ArgMax/ArgMin.
bool better(uint fn, AT v, uint i, AT w, uint j) {
	if (v == w) return pc.selectLast != 0u ? i > j : i < j;
	return fn == 9u ? v > w : v < w;
}

AT load(uint o, uint k, uint i) { return AT(X_LD(x[pc.offX + (o * pc.n + k) * pc.inner + i])); }

#ifdef ARG
void store(uint r, uint idx) {
	y[pc.offY + 2u * r] = idx;
	y[pc.offY + 2u * r + 1u] = 0u;
}
#else
void store(uint r, AT s, AT m) {
	AT v = s;
#if X_ISFLOAT
	if (pc.fn == 1u) v = s / AT(pc.n);
	if (pc.fn == 7u) v = sqrt(s);
	if (pc.fn == 8u) v = isinf(m) ? m : m + M_LOG(s);
#endif
	y[pc.offY + r] = Y_ST(v);
}
#endif

#ifdef VROWS
layout(constant_id = 2) const uint VU = 8u;

vec4 rcomb4(uint fn, vec4 a, vec4 b) {
	switch (fn) {
	case 2u: return max(a, b);
	case 3u: return min(a, b);
	case 4u: return a * b;
	}
	return a + b;
}
vec4 rmap4(uint fn, vec4 v) {
	switch (fn) {
	case 5u: case 7u: return v * v;
	case 6u: return abs(v);
	}
	return v;
}

// vrows (the VROWS variants: float functions but LogSumExp, contiguous
// rows): vrows.glsl's teams of pc.selectLast lanes. With pc.mode 0 the
// rows hold a multiple of 4 items at offsets that are multiples of 4 and
// each lane keeps VU vector loads in flight (spec constant 2, rt/vulkan's
// reduceVecLoads) and as many vector accumulators; with pc.mode 1 (any
// row length and offset) VU scalar loads, coalesced across the team. The
// team combines them with subgroupShuffleXor (and, for a workgroup per
// row, through shared memory).
AT vrow_vec(uint r, uint lane, uint L, uint fn) {
	uint n4 = pc.n >> 2, bx = (pc.offX >> 2) + r * n4;
	vec4 a[VU];
	[[unroll]] for (uint j = 0u; j < VU; j++) a[j] = vec4(rinit(fn));
	uint k = lane;
	for (; k + (VU - 1u) * L < n4; k += VU * L) {
		vec4 v[VU];
		[[unroll]] for (uint j = 0u; j < VU; j++) v[j] = vec4(X_VLD(x4[bx + k + j * L]));
		[[unroll]] for (uint j = 0u; j < VU; j++) a[j] = rcomb4(fn, a[j], rmap4(fn, v[j]));
	}
	for (; k < n4; k += L) a[0] = rcomb4(fn, a[0], rmap4(fn, vec4(X_VLD(x4[bx + k]))));
	[[unroll]] for (uint j = 1u; j < VU; j++) a[0] = rcomb4(fn, a[0], a[j]);
	return rcomb(fn, rcomb(fn, AT(a[0].x), AT(a[0].y)), rcomb(fn, AT(a[0].z), AT(a[0].w)));
}

AT vrow_scalar(uint r, uint lane, uint L, uint fn) {
	AT a[VU];
	[[unroll]] for (uint j = 0u; j < VU; j++) a[j] = rinit(fn);
	uint k = lane;
	for (; k + (VU - 1u) * L < pc.n; k += VU * L) {
		AT v[VU];
		[[unroll]] for (uint j = 0u; j < VU; j++) v[j] = load(r, k + j * L, 0u);
		[[unroll]] for (uint j = 0u; j < VU; j++) a[j] = rcomb(fn, a[j], rmap(fn, v[j]));
	}
	for (; k < pc.n; k += L) a[0] = rcomb(fn, a[0], rmap(fn, load(r, k, 0u)));
	[[unroll]] for (uint j = 1u; j < VU; j++) a[0] = rcomb(fn, a[0], a[j]);
	return a[0];
}

void vrows() {
	uint L = pc.selectLast, fn = pc.fn;
	uint team, lane, nteams;
	vrows_team(L, team, lane, nteams);
	uint w = min(L, gl_SubgroupSize);
	for (uint r = team; r < pc.outer; r += nteams) {
		AT acc = pc.mode == 1u ? vrow_scalar(r, lane, L, fn) : vrow_vec(r, lane, L, fn);
		for (uint s = w >> 1; s > 0u; s >>= 1) acc = rcomb(fn, acc, subgroupShuffleXor(acc, s));
		if (L >= WG) {
			if (gl_SubgroupInvocationID == 0u) sv[gl_SubgroupID] = acc;
			barrier();
			acc = sv[0];
			for (uint i = 1u; i < gl_NumSubgroups; i++) acc = rcomb(fn, acc, sv[i]);
			barrier();
		}
		if (lane == 0u) store(r, acc, AT(0));
	}
}
#endif

void main() {
#ifdef VROWS
	vrows();
	return;
#endif
	uint total = pc.outer * pc.inner;
	uint fn = pc.fn;
	if (pc.mode == 1u) {
		GRID_LOOP(r, total) {
			uint o = r / pc.inner, i = r % pc.inner;
#ifdef ARG
			AT best = rinit(fn);
			uint bi = 0u;
			for (uint k = 0u; k < pc.n; k++) {
				AT v = load(o, k, i);
				if (k == 0u || better(fn, v, k, best, bi)) { best = v; bi = k; }
			}
			store(r, bi);
#else
			AT m = AT(0);
			if (fn == 8u) {
				m = rinit(fn);
				for (uint k = 0u; k < pc.n; k++) m = amax(m, load(o, k, i));
			}
			AT s = fn == 8u ? AT(0) : rinit(fn);
			for (uint k = 0u; k < pc.n; k++) {
				AT v = load(o, k, i);
#if X_ISFLOAT
				if (fn == 8u) { s += M_EXP(v - m); continue; }
#endif
				s = rcomb(fn, s, rmap(fn, v));
			}
			store(r, s, m);
#endif
		}
		return;
	}
	uint t = gl_LocalInvocationID.x;
	uint nwg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
	for (uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; r < total; r += nwg) {
		uint o = r / pc.inner, i = r % pc.inner;
#ifdef ARG
		AT best = rinit(fn);
		uint bi = 0xffffffffu;
		for (uint k = t; k < pc.n; k += WG) {
			AT v = load(o, k, i);
			if (bi == 0xffffffffu || better(fn, v, k, best, bi)) { best = v; bi = k; }
		}
		sv[t] = best;
		si[t] = bi;
		barrier();
		for (uint s = WG / 2u; s > 0u; s >>= 1) {
			if (t < s) {
				uint j = si[t + s];
				if (j != 0xffffffffu && (si[t] == 0xffffffffu || better(fn, sv[t + s], j, sv[t], si[t]))) {
					sv[t] = sv[t + s];
					si[t] = j;
				}
			}
			barrier();
		}
		if (t == 0u) store(r, si[0] == 0xffffffffu ? 0u : si[0]);
		barrier();
#else
		AT m = AT(0);
		if (fn == 8u) {
			AT lm = rinit(fn);
			for (uint k = t; k < pc.n; k += WG) lm = amax(lm, load(o, k, i));
			sv[t] = lm;
			barrier();
			for (uint s = WG / 2u; s > 0u; s >>= 1) {
				if (t < s) sv[t] = amax(sv[t], sv[t + s]);
				barrier();
			}
			m = sv[0];
			barrier();
		}
		// UNR independent accumulators, UNR loads in flight per
		// invocation; combined in a fixed order
		AT a[UNR];
		[[unroll]] for (uint j = 0u; j < UNR; j++) a[j] = fn == 8u ? AT(0) : rinit(fn);
		uint k = t;
		for (; k + (UNR - 1u) * WG < pc.n; k += UNR * WG) {
			AT v[UNR];
			[[unroll]] for (uint j = 0u; j < UNR; j++) v[j] = load(o, k + j * WG, i);
			[[unroll]] for (uint j = 0u; j < UNR; j++) {
#if X_ISFLOAT
				if (fn == 8u) {
					a[j] += M_EXP(v[j] - m);
					continue;
				}
#endif
				a[j] = rcomb(fn, a[j], rmap(fn, v[j]));
			}
		}
		for (; k < pc.n; k += WG) {
			AT v = load(o, k, i);
#if X_ISFLOAT
			if (fn == 8u) { a[0] += M_EXP(v - m); continue; }
#endif
			a[0] = rcomb(fn, a[0], rmap(fn, v));
		}
		uint cf = fn == 8u ? 0u : fn;
		AT acc = a[0];
		[[unroll]] for (uint j = 1u; j < UNR; j++) acc = rcomb(cf, acc, a[j]);
		sv[t] = acc;
		barrier();
		for (uint s = WG / 2u; s > 0u; s >>= 1) {
			if (t < s) sv[t] = rcomb(cf, sv[t], sv[t + s]);
			barrier();
		}
		if (t == 0u) store(r, sv[0], m);
		barrier();
#endif
	}
}
