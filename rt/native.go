package rt

// Optional capabilities for collective libraries (NCCL) that work on a
// backend's own device memory and queues. A backend implements them on its
// Buffer and Stream types where it has a native address and queue (the
// CUDA backend: a CUdeviceptr and a CUstream); callers test for them with
// a type assertion and fall back to host transfers otherwise.

// NativeBuffer is a Buffer with a device address.
type NativeBuffer interface {
	// DeviceAddr returns the buffer's device address (a CUdeviceptr), or
	// an error after Free.
	DeviceAddr() (uintptr, error)
}

// NativeStream is a Stream backed by a native queue.
type NativeStream interface {
	// Enqueue calls f with the stream's native queue (a CUstream) while
	// the device's context is current on the calling thread, so that f
	// can enqueue work of another library after the commands of the last
	// Submit; Wait then also waits for that work. Call it between Submit
	// and Wait. f must not call the stream's own methods.
	Enqueue(f func(queue uintptr) error) error
}

// OrderedStream is a Stream whose work can be ordered after another
// stream's on the device, with no host synchronisation in between (the
// CUDA backend: an event recorded on the other CUstream that this one
// waits for). A data-parallel trainer uses it to start the next segment
// of backward while a collective (enqueued with NativeStream.Enqueue on
// the previous segment's stream) reduces the gradients that segment
// finished.
type OrderedStream interface {
	// After makes the stream's next Submit start on the device only once
	// the work submitted to prev so far is done: prev's last Submit, and
	// what was enqueued on prev before the call, but not what is enqueued
	// on prev after it. prev must be another stream of the same device.
	// It applies to the next Submit only.
	After(prev Stream) error
}
