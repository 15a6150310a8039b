// Package engine plans and runs a model graph on one device.
//
// [New] turns a [model.Model] into a plan: nodes in topological order,
// shapes and dtypes inferred with errors that name the node, every
// model-level op lowered to the backend's primitive ops (package rt), tensor
// lifetimes analysed, and every intermediate tensor given a fixed offset in
// one arena per device (best fit, with in-place reuse for elementwise ops
// and zero-copy views for reshapes). Weights are uploaded once, into one
// weight buffer shared by all runs.
//
// [Session.Run] records the whole run (input copies, every op, output
// copies) into one rt.Stream the first time, then replays it: one submit
// and one wait per run.
//
// Limits: a plan is checked against the device's memory, largest buffer
// and operand range (rt.DeviceInfo) and the host's memory before anything
// is allocated (rt.ErrTooLarge); a batch that exceeds them runs in chunks
// of rows through one recording when the model keeps rows apart
// (Info.ChunkRows). Dynamic dims plan as 1 unless Options.Shapes or
// Options.Dims bind them. Run returns ctx.Err() as soon as its context
// ends, and Close waits for the runs in flight.
//
// Values the plan needs (a Reshape's shape, a Slice's axes) may come as
// graph inputs: the session then plans by value, at the first Run, for the
// values each run gives, one plan per value (Session.ValueInputs).
//
// Concurrency: a Session may be used from many goroutines. Each Run takes an
// execution context (an arena plus a stream); with Options.Parallel = n
// (default 1) at most n contexts exist, so at most n runs execute at once
// and further calls wait their turn. Parallel = 1 therefore serialises runs
// on one arena.
package engine
