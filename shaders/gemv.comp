#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// gemv: matmul for M == 1 or N == 1, built for memory bandwidth. Push
// constants are matmul.comp's plus S, ks (column mode split-K). One
// operand is the vector V, the other the matrix W: V = A, W = B when
// M == 1; V = B, W = A otherwise (flags bit 4).
//
// Row mode (flags bit 3 clear) serves outputs whose two operands are both
// contiguous along K (x W^T with B transposed, the Linear layout; A x with
// A not transposed): lane groups (a subgroup in the gemvsg variants,
// LG invocations reducing through shared memory in the others) each own
// R consecutive rows of W and walk K together, with 128-bit loads (four
// elements: vec4 for f32, two packed half pairs for f16) where flags
// bit 5 says K and every row start are multiples of the chunk, scalar
// loads otherwise. A chunk is one 128-bit load: a vec4 of f32, or a uvec4
// holding eight f16 (four packed pairs). Lane l of a group reads chunks
// l, l + n, l + 2n, ... of each row (n lanes: a group reads 16n
// contiguous bytes of a row at a time), U of them per row per step, all
// loads of a step issued before its FMAs (R*U loads in flight per lane),
// into one vec4 accumulator per row (f32 arithmetic for f16 too); the
// group then sums each row with subgroupAdd (or a shared-memory tree).
//
// Column mode (bit 3 set) serves y[j] = sum_k v[k] * W[k*L + j], where W
// is contiguous along the outputs (x W with B not transposed, L = N; or
// A^T x, L = M): a workgroup owns CL lanes of consecutive outputs (four
// per lane with 128-bit loads, bit 5) and WG/CL rows of K that it walks
// with U independent accumulators (U loads in flight per lane), then sums
// its rows in shared memory in a fixed order: in sequence up to 8 rows,
// by halving (a tree) for more where their number is a power of two. With S > 1 the workgroups also split K into S slices
// of ks (gl_WorkGroupID.y); they write raw partials to the stream's
// scratch buffer (bound as Y), part[(bt*S + s)*L + j], which splitk.comp
// sums in order and finishes with alpha, beta*bias and the activation.
// Nothing uses atomics: results are deterministic.
#define RANK 1
#define NOPS 1
#include "common.glsl"
#ifdef CT_DOUBLE
#include "mathd.glsl"
#include "gen_act_d.glsl"
#else
#include "mathf.glsl"
#include "gen_act_f.glsl"
#endif

// R: rows per lane group (row mode, at most RMAX); CL: output lanes per
// workgroup (column mode, divides WG); LG: lanes per group where no
// subgroup arithmetic is used (a power of two dividing WG); U: loads per
// row and lane per step (both modes, at most UMAX).
layout(constant_id = 1) const uint R = 2;
layout(constant_id = 2) const uint CL = 64;
layout(constant_id = 3) const uint LG = 32;
layout(constant_id = 4) const uint U = 4;
#define RMAX 4u
#define UMAX 8u

layout(push_constant) uniform PC {
	uint M, N, K, flags;
	uint sA, sB, sY, act;
	uint offA, offB, offY, offBias;
	int bs0, bs1;
	uint batch, pad;
	uvec2 alpha, beta, actA, actB;
	uint S, ks;
} pc;
layout(std430, binding = 0) readonly buffer BA { X_T a[]; };
layout(std430, binding = 1) readonly buffer BB { W_T b[]; };
layout(std430, binding = 2) readonly buffer BC { X_T bias[]; };
layout(std430, binding = 3) writeonly buffer BY { Y_T y[]; };
layout(std430, binding = 3) writeonly buffer BP { CT part[]; };

// ld_a4, ld_b4: four elements as a vec4 (index in units of four);
// ld_ac, ld_bc: one chunk of CHUNK elements (index in chunks, of type
// ACH_T and BCH_T), which chdot multiplies into a vec4 accumulator.
#if X_DT == 1 && W_DT == 2
// f32 A with f16 weights B: a chunk is eight elements, two vec4s of A
// (an F8) against one uvec4 of B (eight halves, one 128-bit load).
#define VEC 1
#define CHUNK 8u
#define ACH_T F8
#define BCH_T uvec4
struct F8 { vec4 lo, hi; };
layout(std430, binding = 0) readonly buffer BA4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer BB4 { uvec2 b4[]; };
layout(std430, binding = 1) readonly buffer BB8 { uvec4 b8[]; };
vec4 h4(uvec2 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
vec4 ld_a4(uint i) { return a4[i]; }
vec4 ld_b4(uint i) { return h4(b4[i]); }
F8 ld_ac(uint i) { return F8(a4[2u * i], a4[2u * i + 1u]); }
uvec4 ld_bc(uint i) { return b8[i]; }
vec4 chdot(vec4 s, uvec4 w, F8 x) { return fma(h4(w.zw), x.hi, fma(h4(w.xy), x.lo, s)); }
vec4 chdot(vec4 s, F8 w, uvec4 x) { return fma(w.hi, h4(x.zw), fma(w.lo, h4(x.xy), s)); }
#elif X_DT == 1
#define VEC 1
#define CHUNK 4u
#define ACH_T vec4
#define BCH_T vec4
layout(std430, binding = 0) readonly buffer BA4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer BB4 { vec4 b4[]; };
vec4 ld_a4(uint i) { return a4[i]; }
vec4 ld_b4(uint i) { return b4[i]; }
vec4 ld_ac(uint i) { return a4[i]; }
vec4 ld_bc(uint i) { return b4[i]; }
vec4 chdot(vec4 s, vec4 w, vec4 x) { return fma(w, x, s); }
#elif X_DT == 2
#define VEC 1
#define CHUNK 8u
#define ACH_T uvec4
#define BCH_T uvec4
layout(std430, binding = 0) readonly buffer BA4 { uvec2 a4[]; };
layout(std430, binding = 1) readonly buffer BB4 { uvec2 b4[]; };
layout(std430, binding = 0) readonly buffer BA8 { uvec4 a8[]; };
layout(std430, binding = 1) readonly buffer BB8 { uvec4 b8[]; };
vec4 h4(uvec2 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
vec4 ld_a4(uint i) { return h4(a4[i]); }
vec4 ld_b4(uint i) { return h4(b4[i]); }
uvec4 ld_ac(uint i) { return a8[i]; }
uvec4 ld_bc(uint i) { return b8[i]; }
vec4 chdot(vec4 s, uvec4 w, uvec4 x) { return fma(h4(w.zw), h4(x.zw), fma(h4(w.xy), h4(x.xy), s)); }
#endif

CT ld_a(uint i) { return CT(X_LD(a[i])); }
CT ld_b(uint i) { return CT(W_LD(b[i])); }

// column mode: 4 partial sums per invocation
shared CT sv[WG * 4u];

void epilogue(uint bt, uint gm, uint gn, CT acc) {
	CT v = pc_real(pc.alpha) * acc;
	if ((pc.flags & 4u) != 0u) v += pc_real(pc.beta) * CT(X_LD(bias[pc.offBias + gm * uint(pc.bs0) + gn * uint(pc.bs1)]));
	if (pc.act != 0u) v = act_apply(pc.act, v, pc_real(pc.actA), pc_real(pc.actB));
	y[pc.offY + bt * pc.sY + gm * pc.N + gn] = Y_ST(v);
}

// lane groups of row mode: this invocation's lane and the group size, its
// group and the number of groups in the workgroup.
#ifdef SUBGROUP
void lanes(out uint lane, out uint nl, out uint gid, out uint ng) {
	lane = subgroupExclusiveAdd(1u);
	nl = subgroupAdd(1u);
	gid = gl_SubgroupID;
	ng = gl_NumSubgroups;
}

CT lgsum(CT v, uint lane) { return subgroupAdd(v); }
#else
shared CT red[WG];

void lanes(out uint lane, out uint nl, out uint gid, out uint ng) {
	uint t = gl_LocalInvocationID.x;
	lane = t % LG;
	nl = LG;
	gid = t / LG;
	ng = WG / LG;
}

// lgsum sums v over the lane group; call in workgroup-uniform control flow.
CT lgsum(CT v, uint lane) {
	uint t = gl_LocalInvocationID.x;
	barrier();
	red[t] = v;
	barrier();
	for (uint s = LG / 2u; s > 0u; s >>= 1) {
		if (lane < s) red[t] += red[t + s];
		barrier();
	}
	return red[t - lane];
}
#endif

// V = A, W = B
#define WISA 0
#define ROWS rows_vw
#define COLS cols_vw
#define LDV ld_a
#define LDW ld_b
#define LDV4 ld_a4
#define LDW4 ld_b4
#define LDVC ld_ac
#define LDWC ld_bc
#define VCH_T ACH_T
#define VOFF(bt) (pc.offA + (bt) * pc.sA)
#define WOFF(bt) (pc.offB + (bt) * pc.sB)
#include "gemv_body.glsl"
#undef WISA
#undef ROWS
#undef COLS
#undef LDV
#undef LDW
#undef LDV4
#undef LDW4
#undef LDVC
#undef LDWC
#undef VCH_T
#undef VOFF
#undef WOFF

// V = B, W = A
#define WISA 1
#define ROWS rows_wv
#define COLS cols_wv
#define LDV ld_b
#define LDW ld_a
#define LDV4 ld_b4
#define LDW4 ld_a4
#define LDVC ld_bc
#define LDWC ld_ac
#define VCH_T BCH_T
#define VOFF(bt) (pc.offB + (bt) * pc.sB)
#define WOFF(bt) (pc.offA + (bt) * pc.sA)
#include "gemv_body.glsl"

void main() {
	bool wa = (pc.flags & 16u) != 0u;
	if ((pc.flags & 8u) != 0u) {
		if (wa) cols_wv();
		else cols_vw();
	} else {
		if (wa) rows_wv();
		else rows_vw();
	}
}
