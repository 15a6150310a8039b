// Package shaders holds the GLSL compute kernels of the Vulkan backend and
// their compiled SPIR-V.
//
// The sources are the *.comp files in this directory (with shared *.glsl
// includes). `go generate ./shaders` runs the program in ./gen, which calls
// glslc once per variant (dtype and tile configuration, selected with -D
// defines), writes the blobs to spv/ and regenerates shaders_gen.go, which
// embeds them. The output is deterministic, so CI can regenerate and check
// freshness with `git diff --exit-code shaders/`.
//
// Two compilers: a source that enables GL_KHR_cooperative_matrix or
// GL_NV_cooperative_matrix2 outside #if blocks (mmcm2.comp), and a variant
// that defines KHR=1 (mmcm.comp's and convcm.comp's KHR cooperative-matrix
// variants; coopmat.glsl), is compiled by glslangValidator 15, unoptimized,
// for Vulkan 1.3 (SPIR-V 1.6; the KHR=1 variants for Vulkan 1.2, SPIR-V
// 1.5, whose pipelines run with the device's default subgroup size, which
// their layout assumes), every other one by glslc
// (Debian 12's shaderc 2023.2) for Vulkan 1.2 with -O; Debian 12's glslc
// cannot compile those extensions. gen/glslang15.sh provides glslang 15 on
// Debian 12: on first use it downloads Debian 13's glslang-tools with its
// C and C++ runtime into ~/.cache/vrun-glslang15 (VRUN_GLSLANG15_DIR) with
// a private apt configuration and runs it through that runtime's loader,
// so the first `go generate` needs network access to deb.debian.org.
// GLSLANG15=/path/to/glslangValidator uses another glslang 15 build; the
// generator checks the version (another glslang writes other bytes). GLSLC
// overrides glslc's path.
//
// Variant names are "<kernel>_<suffix>", for example "unary_f32",
// "cast_f16_i32", "matmul_f32_r8"; [Names] lists them and [SPIRV] returns
// one blob.
package shaders
