// coopmat.glsl: subgroup-scope cooperative matrices in one spelling for
// GL_NV_cooperative_matrix (the default, compiled by glslc) and
// GL_KHR_cooperative_matrix (-D KHR=1, compiled by glslang 15; the source
// enables the extension under #ifdef KHR). MS x NS x KS is the fragment
// shape (-D MS, NS, KS); SGS the subgroup size the variant is laid out
// for (-D SGS, default 32). Loads and stores take element offsets and
// strides in units of the array they read (shared uvec4 tiles), as both
// extensions do.
//
//   MATA, MATB   f16 A (MS x KS) and B (KS x NS) fragments
//   MATC, MATH   f32 and f16 accumulators (MS x NS)
//   CM_LOAD      a row-major load, CM_LOADT column-major
//   CM_STORE     a row-major store
//   CM_MULADD    c + a*b
#ifndef SGS
#define SGS 32
#endif
#ifdef KHR
#define MATA coopmat<float16_t, gl_ScopeSubgroup, MS, KS, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, KS, NS, gl_MatrixUseB>
#define MATC coopmat<float, gl_ScopeSubgroup, MS, NS, gl_MatrixUseAccumulator>
#define MATH coopmat<float16_t, gl_ScopeSubgroup, MS, NS, gl_MatrixUseAccumulator>
#define CM_LOAD(m, buf, e, ld) coopMatLoad(m, buf, e, ld, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOADT(m, buf, e, ld) coopMatLoad(m, buf, e, ld, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_STORE(m, buf, e, ld) coopMatStore(m, buf, e, ld, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MULADD(a, b, c) coopMatMulAdd(a, b, c)
#else
#define MATA fcoopmatNV<16, gl_ScopeSubgroup, MS, KS>
#define MATB fcoopmatNV<16, gl_ScopeSubgroup, KS, NS>
#define MATC fcoopmatNV<32, gl_ScopeSubgroup, MS, NS>
#define MATH fcoopmatNV<16, gl_ScopeSubgroup, MS, NS>
#define CM_LOAD(m, buf, e, ld) coopMatLoadNV(m, buf, e, ld, false)
#define CM_LOADT(m, buf, e, ld) coopMatLoadNV(m, buf, e, ld, true)
#define CM_STORE(m, buf, e, ld) coopMatStoreNV(m, buf, e, ld, false)
#define CM_MULADD(a, b, c) coopMatMulAddNV(a, b, c)
#endif
