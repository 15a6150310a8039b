// Package rt is the core of the vrun runtime: dtypes, the backend contract
// that every device implements, the primitive op set those devices execute,
// the registry of compiled-in backends, and the arena planner.
//
// A backend (cpu, vulkan, cuda, opencl) knows nothing about models. It
// allocates [Buffer]s on a [Device], records primitive [Op]s into a [Stream],
// and replays that stream on each Submit. Model-level operators (ONNX-style
// Conv, Gemm, LayerNormalization, ...) are lowered by the engine into this
// small primitive set, so a new backend needs only a few kernels to run every
// model; see ../shared/ARCHITECTURE.md and docs/design.md.
//
// Backends register themselves from their package's init function, as
// database/sql drivers do; [Open] selects one by name ("cpu", "vulkan:1",
// "auto").
package rt
