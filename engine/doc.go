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
// Concurrency: a Session may be used from many goroutines. Each Run takes an
// execution context (an arena plus a stream); with Options.Parallel = n
// (default 1) at most n contexts exist, so at most n runs execute at once
// and further calls wait their turn. Parallel = 1 therefore serialises runs
// on one arena.
package engine
