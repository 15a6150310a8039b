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
// Variant names are "<kernel>_<suffix>", for example "unary_f32",
// "cast_f16_i32", "matmul_f32_r8"; [Names] lists them and [SPIRV] returns
// one blob.
package shaders
