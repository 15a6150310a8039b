// Package checkpoint saves and restores a training run: the weights
// (trained parameters and BatchNorm running statistics), the optimizer
// state (moments, step count), the learning rate, the Dropout generator
// state, the epoch, the data loader's position and the learning-rate
// scheduler's state (an opaque JSON value of the caller's).
//
// Capture takes a checkpoint from an engine.Trainer and Restore puts it
// into a new one: the run then continues bit for bit as if it had never
// stopped (on the same device). Write stores a checkpoint atomically
// (a temporary file in the same folder, synced, then renamed over the
// target, on Windows too); Read and Decode validate it, and a damaged or
// truncated file is an error wrapping ErrCorrupt. The file format is
// versioned and described in docs/checkpoint.md.
package checkpoint
