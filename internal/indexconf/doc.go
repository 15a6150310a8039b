// Package indexconf checks that a backend reports an index out of range
// of Gather, GatherElements and ScatterElements as ONNX requires: the run
// fails with an *rt.IndexError (errors.Is rt.ErrIndexOutOfRange) from
// Stream.Wait, naming the op, its launch and the index, while the op still
// writes zeros (skips the update) for that index and computes every other
// element; an op with AllowOutOfRange stays silent; the status is reset
// between runs of one recording; i64 indices beyond 32 bits are out of
// range (not wrapped). Every backend's tests call [Run].
package indexconf
