// Package vulkan is vrun's Vulkan compute backend, registered as "vulkan".
//
// It needs cgo and a Vulkan 1.2 device. The loader (libvulkan.so.1,
// vulkan-1.dll, libvulkan.1.dylib or libMoltenVK.dylib) is opened lazily
// on the first Devices call; without it, or without devices, Devices
// returns an error wrapping rt.ErrUnavailable. Built without cgo the
// backend still registers and says so.
//
// # Design
//
//   - Every Vulkan call goes through vkshim.h, vrun's own C shim (wrapped
//     in vkapi.go): it builds create-infos and other struct arguments on
//     the C stack from scalar arguments and calls the entry points it
//     loaded into per-instance and per-device tables. No struct argument
//     is ever Go memory or C memory owned by a Go finalizer, so the garbage
//     collector cannot free one during a call (goki/vulkan's wrappers did,
//     and leaked the rest); github.com/goki/vulkan is used for its types
//     and constants only. TestShimLayouts checks the shim's struct mirrors
//     against vulkan_core.h, and TestStressGC runs Open/Run/Close cycles
//     under GOGC=1.
//   - One VkInstance serves the whole process: created on first use,
//     shared and reference-counted by open devices, and never destroyed, so
//     the driver is loaded once (NVIDIA's cannot be loaded again into the
//     same process: its static TLS is not given back). Each Open creates
//     its own VkDevice; Close destroys it and everything on it.
//   - Buffers are one VkBuffer + VkDeviceMemory each, in device-local
//     memory; where a DEVICE_LOCAL|HOST_VISIBLE type covers the largest
//     device-local heap (UMA, ReBAR, lavapipe) they are mapped and
//     Device.Write/Read are plain copies, else they go through a staging
//     buffer. A Buffer may be as large as maxMemoryAllocationSize; each op
//     operand binds only its byte range, which must fit
//     maxStorageBufferRange.
//   - A Stream keeps a Go-side command list. The first Submit after a
//     change records one VkCommandBuffer (staging copies for Write/Read,
//     one descriptor set and push constants per dispatch, and a pipeline
//     barrier only where a command touches a byte range that an earlier,
//     unbarriered command wrote, or writes one it read); later Submits
//     replay it with one vkQueueSubmit and one fence.
//   - Kernels are GLSL in ../../shaders, compiled to SPIR-V per dtype
//     variant and embedded. Operands are bound at aligned offsets and the
//     element offset of each view is a push constant, so views need no
//     alignment beyond their dtype. Pipelines are created lazily per
//     (variant, specialization constants) and persisted through a
//     VkPipelineCache file in $VRUN_CACHE_DIR or os.UserCacheDir()/vrun.
//   - MatMul runs matmul.comp, a register-blocked GEMM with two
//     shared-memory stages, in one of four compile-time tiles chosen by
//     shape and device limits (128x128, 128x64, 64x64, 32x32; see
//     gemmTiles and pickTile), or gemv.comp for M == 1 or N == 1 and
//     K >= 128: rows of W per subgroup with subgroupAdd (gemvsg_*
//     variants, where the device has subgroup arithmetic; a shared-memory
//     reduction otherwise) when both operands run along K, coalesced
//     columns with K split across workgroups (splitk.comp sums the
//     partials in order) when W runs along the outputs, 128-bit loads
//     (four f32, or eight f16 in row mode) where K, offsets and strides
//     are multiples of them, several per lane in flight (see gemv.go). f16
//     MatMul runs mmcm.comp on subgroup-scope cooperative matrices (NV's,
//     else KHR's; f32 accumulate; see coopmat.go for the shapes;
//     128x256 or 128x128 blocks, 4x4 or 4x2 16x16 fragments per subgroup,
//     uvec4 global loads where aligned, fragments stored straight to Y
//     for full blocks without bias/activation) where the device lists an
//     f16xf16->f32 subgroup shape, and so do the deeper f16-weight
//     convolutions (convcm.comp, convcm.go; the shallower ones are refused
//     their f16 weights there, so that the engine keeps f32 ones);
//     the extension and its features are enabled at device creation only
//     then, and VRUN_VK_COOPMAT=0 turns that off (CPU devices need
//     VRUN_VK_COOPMAT=1). Where the
//     device (Vulkan 1.3) has VK_KHR_cooperative_matrix and
//     VK_NV_cooperative_matrix2 with workgroup scope, flexible dimensions,
//     per-element operations and tensor addressing, f16 MatMul runs
//     mmcm2.comp instead: one workgroup-scope f32 accumulator per
//     128x128 block, or 64x64 where that gives too few workgroups (K
//     slices of 64; coop2Rule, other blocks for the sweep), operands loaded
//     by coopMatLoadTensorNV through tensor layouts (clamped at the edges,
//     transposes as tensor views), bias and activation per element
//     (coopMatPerElementNV); see coopmat2.go. VRUN_VK_COOPMAT2=0 turns it
//     off; DeviceInfo's details name the f16 GEMM kernel in use.
//   - Bandwidth-bound kernels move 128-bit vectors where the layout lets
//     them (vec.glsl, vrows.glsl). Unary, Binary and Copy (and casts
//     between f32, f16 and i32) take their 4-item vector variants
//     (unaryv_, binaryv_, copyv_, castv_) when every operand runs
//     contiguously along the innermost dim, or an input is broadcast
//     along it (read as one scalar per vector), the vector operands start
//     at multiples of 4 items and the innermost dim is a multiple of 4 (or
//     the view is 1-D: a scalar tail); see ew and vecLayout. Softmax,
//     layer norm and Reduce over contiguous rows of a multiple of 4 items
//     run softmaxv_, normalizev_ and reducev_: a team of lanes per row
//     (a power of two up to the subgroup, several rows per subgroup,
//     reduced with subgroupShuffleXor) or a workgroup per long row, rows
//     held in registers for softmax and layer norm (up to 8192 items);
//     see vrowLanes. Everything else takes the scalar kernels.
//   - Conv runs convgemm.comp, an implicit GEMM with matmul.comp's tiling
//     whose B loader computes im2col elements on the fly (per group, one
//     workgroup z slice each; bias and activation in the epilogue; 1x1
//     convolutions read X directly), dwconv.comp for depthwise
//     convolutions, or the direct conv.comp where the GEMM tile would be
//     mostly empty (fewer than 8 output channels per group); see conv.go.
//     A 3x3 stride-1 f32 convolution of at least 2^28 multiply-adds with
//     32 or more channels in and out (resnet's layers from batch 8) on a
//     GPU runs Winograd F(4,3) instead: wino.comp's weight and input
//     transforms into the stream's scratch buffer, 36 GEMMs in one
//     matmul.comp batch, and the output transform with the bias, residual
//     and activation; see wino.go (VRUN_VK_WINO sets the least number of
//     multiply-adds, 0 turns it off).
//   - Split-K: where the tiled GEMM of a MatMul or Conv (matmul.comp,
//     convgemm.comp) gives fewer than gemmTarget workgroups (256 on
//     GPUs; never on CPU devices), the SPLITK variants (matmulk_*,
//     convgemmk_*) compute S partial tiles per output tile over K slices
//     of at least 256 (tiles*S ~ 256) into a scratch buffer the stream
//     owns (allocated at Launch to the largest size recorded, freed on
//     Reset/Close), and splitk.comp sums them in a fixed order and applies
//     alpha, beta*bias and the activation. Scratch writes and reads are
//     tracked by the stream's barrier logic like any operand.
//   - Autotuner (tune.go): with VRUN_VK_TUNE=1 (vrun -tune) a device
//     times the tiles, K splits and, for matmul.comp, the fixed load path
//     (specialization constant FIXED) of each tiled GEMM shape it lowers,
//     the Winograd path of 3x3 convolutions and the GEMV geometry,
//     on buffers of its own, and keeps the fastest where it beats the
//     rules above by 2 %; the picks are cached per device beside the
//     pipeline cache and used by later runs (VRUN_VK_TUNE=0: not).
//   - VRUN_VK_VALIDATION=1 (read when the instance is created) enables
//     VK_LAYER_KHRONOS_validation with a VK_EXT_debug_utils messenger;
//     warnings and errors are returned from Submit, Wait,
//     Device.Write/Read and Close of the device whose objects they name,
//     and kept for [ValidationMessages]. VRUN_VK_TIMEOUT (a Go duration, default 5m)
//     bounds Wait.
//
// Nothing falls back to the CPU: an op the kernels cannot run returns an
// *rt.UnsupportedError from Supports and Launch.
//
// # Adding a kernel
//
//  1. Write shaders/<name>.comp. Start with
//     `#version 450`, `#extension GL_GOOGLE_include_directive : require`,
//     define RANK/NOPS (1 if unused) and `#include "common.glsl"`, which
//     gives the dtype slot macros (X_T, X_CT, X_LD, Y_ST, ... selected by
//     -DX_DT=<rt.DType>), CT (float or double), the spec-constant
//     workgroup size WG (constant_id 0) and GRID_LOOP. Declare operands as
//     std430 buffers at bindings 0..n-1 (output last by convention) and
//     the push-constant block (at most 128 bytes; reals as uvec2 raw bits
//     decoded with pc_real).
//  2. Add its variants to variants() in shaders/gen/main.go and run
//     `go generate ./shaders` (needs glslc).
//  3. Lower the op in its family's file (elementwise.go, reduce.go,
//     matmul.go, conv.go, pool.go, indexed.go or optim.go) and add it to
//     lowerOp in lower.go: check dtypes (needDType), bind operands with
//     bindElems/bindRef (which also give the byte spans used for barrier
//     tracking), pack the push words in the shader's order and append a
//     dispatch.
//  4. Add a test against a float64 reference in the family's _test.go file.
package vulkan
