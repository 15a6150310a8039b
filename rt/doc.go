// Package rt is the core of the vrun runtime: dtypes, the backend contract
// that every device implements, the primitive op set those devices execute,
// the registry of compiled-in backends, and the arena planner.
//
// A backend (cpu, vulkan, cuda, opencl) knows nothing about models. It
// allocates [Buffer]s on a [Device], records primitive [Op]s into a [Stream],
// and replays that stream on each Submit. Model-level operators (ONNX-style
// Conv, Gemm, LayerNormalization, ...) are lowered by the engine into this
// small primitive set, so a new backend needs only a few kernels to run every
// model; docs/design.md at the root of the module describes the design.
//
// The package's files: ops.go defines the primitive ops (optim.go the
// fused optimizer update [OptimStep]), operands.go the
// table of their operands ([Operands]) that check.go's [CheckOp] and the
// backends share, refmath.go the float64 reference math of the elementwise
// functions, support.go the reference dtype rules ([ReferenceSupport]),
// and coalesce.go the dimension merging of elementwise iteration spaces.
//
// Backends register themselves from their package's init function, as
// database/sql drivers do; [Open] selects one by name ("cpu", "vulkan:1",
// "auto").
package rt
