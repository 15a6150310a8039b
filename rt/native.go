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
