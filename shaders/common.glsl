// Shared prelude of every kernel: extensions selected by the generator's
// NEED_* defines, dtype slot macros and the constant helpers.
#ifdef NEED_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef NEED_8BIT
#extension GL_EXT_shader_8bit_storage : require
#endif
#ifdef NEED_I64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#extension GL_EXT_control_flow_attributes : require
#include "gen_types.glsl"

// The weight slot W (B of matmul and gemv, W of the convolutions) has X's
// dtype, unless a variant sets W_DT: f16 weights with f32 activations
// (rt.HalfWeights, the *_f32w16 variants).
#ifndef W_DT
#define W_DT X_DT
#define W_T X_T
#define W_LD(e) X_LD(e)
#endif

// CT is the compute type of float kernels.
#ifdef CT_DOUBLE
#define CT double
#else
#define CT float
#endif

// The workgroup size is specialization constant 0 (local_size_x_id), or
// the constant LOCAL_SIZE where a kernel defines it (glslang 15 writes a
// specialized size for SPIR-V 1.6 as LocalSizeId, which needs
// maintenance4).
#ifdef LOCAL_SIZE
layout(local_size_x = LOCAL_SIZE) in;
#else
layout(local_size_x_id = 0) in;
#endif
#define WG gl_WorkGroupSize.x

// Elementwise kernels walk a rank-RANK index space; push constants carry
// the dims 1..RANK-1 (dim 0 is implied by the element count) and, per
// operand, an element offset and RANK strides (two's complement, so
// negative strides work with uint arithmetic). Size-1 dims cost nothing.
#if RANK > 1
uint ew_index(uint i, uint shape[RANK - 1], int st[NOPS * RANK], uint off[NOPS], out uint o[NOPS]) {
	for (int k = 0; k < NOPS; k++) o[k] = off[k];
	for (int d = RANK - 1; d >= 1; d--) {
		uint dim = shape[d - 1];
		if (dim == 1u) continue; // padding (uniform: push constants)
		uint c = i % dim;
		i /= dim;
		for (int k = 0; k < NOPS; k++) o[k] += c * uint(st[k * RANK + d]);
	}
	for (int k = 0; k < NOPS; k++) o[k] += i * uint(st[k * RANK]);
	return 0u;
}
#endif

// pc_real decodes a real parameter passed as raw bits in push constants:
// a float in .x, or a double in .xy (little-endian words).
#ifdef CT_DOUBLE
double pc_real(uvec2 v) { return packDouble2x32(v); }
#else
float pc_real(uvec2 v) { return uintBitsToFloat(v.x); }
#endif

// Grid-stride loop over n items with a 1-D dispatch.
#define GRID_LOOP(i, n) for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * WG)

// The elementwise kernels (unary, binary, cast, copy, where, fill) give
// each invocation EW_U items per pass, WG apart so that a subgroup's
// accesses stay coalesced, and load all of them before computing or
// storing any. One scalar load in flight per invocation is too little for
// a GPU's memory: it reached 0.15x of the H200's copy bandwidth. The
// lowering dispatches one workgroup per WG*EW_U items (rt/vulkan's
// ewUnroll, which must match). EW_ITEM(u) is item u of a pass at base.
#define EW_U 4u
#define EW_LOOP(base, n) for (uint base = gl_WorkGroupID.x * (WG * EW_U) + gl_LocalInvocationID.x; base < (n); base += gl_NumWorkGroups.x * (WG * EW_U))
#define EW_ITEM(base, u) ((base) + (u) * WG)
