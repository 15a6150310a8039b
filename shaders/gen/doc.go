// Command gen compiles the compute shaders of package shaders into SPIR-V.
//
// It runs glslc once per variant (a kernel source plus -D defines for the
// dtypes and tile sizes), writes spv/<variant>.spv, removes stale blobs and
// regenerates shaders_gen.go and gen_types.glsl. Run it from the shaders
// directory (go generate does): go run ./gen. GLSLC overrides the compiler
// path. Sources that enable GL_KHR_cooperative_matrix or
// GL_NV_cooperative_matrix2 outside #if blocks, and variants that define
// KHR=1, go to glslangValidator 15 instead (glslang15.sh here, or
// $GLSLANG15; see package shaders).
package main
