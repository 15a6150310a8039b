// Package dist spreads tensors over several devices: an [Array] is a
// tensor split along one dimension over a list of devices, or replicated
// on each of them, with the collectives data parallelism needs — scatter,
// gather, broadcast, reduce and all-reduce (sum, mean, weighted mean).
//
// Every backend takes the single-host path: each device's part is read
// into host memory, combined there in float64, and written back. The
// reads, the reduction and the writes of successive buckets (slices of
// [ReduceOptions.BucketBytes]) overlap through one goroutine per device.
// The staging buffers are Go memory handed to rt.Device.Read and Write;
// a backend that stages through pinned or host-visible memory (CUDA
// cuMemHostAlloc, Vulkan host-cached memory) does so inside those calls.
// Reductions are deterministic: shards are always summed in device
// order, so a result does not depend on timing.
//
// NCCL, the multi-GPU engine for CUDA, lives in the nccl subpackage.
package dist
