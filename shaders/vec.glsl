// 4-item vector views for the VEC variants of the elementwise kernels
// (unary, binary, cast, copy), which rt/vulkan's ew picks when every
// operand is contiguous along the innermost dim (or broadcast along it,
// stride 0) and the vector-loaded ones start at a multiple of 4 items:
// one 128-bit load (64-bit for f16) moves four items. Item counts that
// are not a multiple of 4 leave a scalar tail (rank 1 only).
//
// Push words 2 and 3 of these variants are the item count (word 0 is the
// vector count) and the mask of operands read as one scalar per vector
// (bit k: operand k's innermost stride is 0). ew_index then runs over
// vectors: its strides are in items, with the innermost one 4 for a
// vector operand and 0 for a broadcast one, so that o[k] is the item
// offset of a vector's first item (o[k] >> 2 its vector index).
#ifdef X_DT
#if X_DT == 1
#define X_VT vec4
#define X_VCT vec4
#elif X_DT == 2
#define X_VT f16vec4
#define X_VCT vec4
#elif X_DT == 4
#define X_VT ivec4
#define X_VCT ivec4
#endif
#define X_VLD(e) X_VCT(e)
#endif
#ifdef Y_DT
#if Y_DT == 1
#define Y_VT vec4
#define Y_VCT vec4
#elif Y_DT == 2
#define Y_VT f16vec4
#define Y_VCT vec4
#elif Y_DT == 4
#define Y_VT ivec4
#define Y_VCT ivec4
#endif
#define Y_VST(v) Y_VT(v)
#endif

// VEC_SPLAT(k) is true when operand k is broadcast along the innermost
// dim (uniform: push constants).
#define VEC_SPLAT(k) ((pc.mask & (1u << (k))) != 0u)

// VEC_TAIL(i) walks the scalar tail: items 4*pc.n .. pc.ntot-1, one per
// invocation of the first workgroups (rank 1: item i of operand k is at
// off[k] + i, or off[k] when broadcast).
#define VEC_TAIL(i) for (uint i = pc.n * 4u + gl_GlobalInvocationID.x; i < pc.ntot; i += gl_NumWorkGroups.x * WG)
#define VEC_TAIL_AT(k, i) (pc.off[k] + (VEC_SPLAT(k) ? 0u : (i)))
