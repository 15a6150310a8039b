package rt

import (
	"fmt"
)

// Optional Device capabilities. A backend implements them on its Device
// type where it can do better than the fallbacks of [CopyBuffer],
// [MapBuffer] and [AllocHost]; callers test for them with a type
// assertion or, better, call those functions. Every backend of this
// module implements all four (see docs/memory.md for what each one does).

// Copier is a Device that copies between two of its buffers without a
// trip through host memory.
type Copier interface {
	// Copy copies n bytes of src at srcOff into dst at dstOff and returns
	// when done. The ranges may belong to one buffer but must not overlap.
	// It is ordered after every Submit that has been waited for; work still
	// in flight on a stream must be waited for first.
	Copy(dst Buffer, dstOff int64, src Buffer, srcOff, n int64) error
}

// Mapper is a Device whose buffers may be host-visible (the CPU, unified
// memory, a CPU Vulkan driver, ReBAR).
type Mapper interface {
	// Map returns the host view of b (len(view) == b.Size()) when b's memory
	// is visible to the host, or nil. Reads and writes through the view are
	// coherent with the device, but are not ordered with streams: the host
	// may touch it only while no submitted work uses b (after Wait). The
	// view is valid until b is freed or the device closes.
	Map(b Buffer) []byte
}

// HostAllocator is a Device that allocates page-locked (pinned) host
// memory that its copies read and write without a staging copy: CUDA's
// cuMemHostAlloc, a host-visible Vulkan buffer (host-cached where the
// device has it).
type HostAllocator interface {
	// AllocHost allocates size bytes of pinned host memory. Device.Write
	// and Device.Read, Stream.Write and Stream.Read called with a slice of
	// its Bytes skip their staging copy. Failure wraps ErrOutOfMemory.
	AllocHost(size int64) (HostBuffer, error)
}

// HostBuffer is a block of host memory from [HostAllocator.AllocHost] or
// [AllocHost].
type HostBuffer interface {
	// Bytes is the memory: size bytes, as asked, or nil after Free.
	Bytes() []byte
	// Free releases it. It is safe to call more than once; host buffers
	// still alive when the device closes are freed by Close.
	Free()
}

// MemoryUsage is what a device has allocated and not yet freed.
type MemoryUsage struct {
	Buffers     int   // live device buffers
	Bytes       int64 // their sizes, as asked of Alloc
	HostBuffers int   // live pinned host buffers
	HostBytes   int64 // their sizes
}

// MemoryReporter is a Device that counts its live allocations. Tests use
// it to check that memory returns to its baseline after Close.
type MemoryReporter interface {
	MemoryUsage() MemoryUsage
}

// MemoryDevice is a Device with every optional memory interface. Each
// backend of this module asserts that its device is one.
type MemoryDevice interface {
	Device
	Copier
	Mapper
	HostAllocator
	MemoryReporter
}

// Sized is a buffer or host buffer that knows its size in bytes, as asked
// of the allocation.
type Sized interface {
	comparable
	Size() int64
}

// CountMemory is [MemoryReporter.MemoryUsage] for a backend that keeps its
// live buffers and host buffers in two sets.
func CountMemory[B, H Sized](bufs map[B]struct{}, hosts map[H]struct{}) MemoryUsage {
	u := MemoryUsage{Buffers: len(bufs), HostBuffers: len(hosts)}
	for b := range bufs {
		u.Bytes += b.Size()
	}
	for h := range hosts {
		u.HostBytes += h.Size()
	}
	return u
}

// CopyBuffers is the frame of a backend's [Copier.Copy]: it checks the
// device with check, resolves src and dst to the backend's buffer type B
// with own, checks n and the ranges against the buffers' sizes
// ([CheckCopy]) and, unless n is 0, calls copy with the resolved buffers.
// The errors of check, own and the range check are wrapped as
// "<backend>: Copy: ..."; those of copy are returned as they are.
func CopyBuffers[B any](backend string, check func() error, own func(Buffer) (B, error),
	dst Buffer, dstOff int64, src Buffer, srcOff, n int64, copy func(dst, src B) error) error {
	err := check()
	var s, d B
	if err == nil {
		s, err = own(src)
	}
	if err == nil {
		d, err = own(dst)
	}
	if err == nil {
		err = CheckCopy(dst.Size(), dstOff, src.Size(), srcOff, n)
	}
	if err != nil {
		return fmt.Errorf("%s: Copy: %w", backend, err)
	}
	if n == 0 {
		return nil
	}
	return copy(d, s)
}

// CheckRange returns an error unless the n bytes at off lie within a
// buffer of size bytes. Backends check the ranges of Write, Read and Copy
// with it.
func CheckRange(size, off, n int64) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("range [%d,%d) outside buffer of %d bytes", off, off+n, size)
	}
	return nil
}

// CheckCopy returns an error unless n, a size that fits in an int, and the
// n bytes at srcOff of a buffer of srcSize bytes and at dstOff of one of
// dstSize bytes lie within their buffers: the argument check of
// [Copier.Copy].
func CheckCopy(dstSize, dstOff, srcSize, srcOff, n int64) error {
	if n < 0 || int64(int(n)) != n {
		return fmt.Errorf("bad size %d", n)
	}
	if err := CheckRange(srcSize, srcOff, n); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if err := CheckRange(dstSize, dstOff, n); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	return nil
}

// CopyBuffer copies n bytes from src at srcOff to dst at dstOff, both
// buffers of dev, through [Copier] when dev has it and through host
// memory otherwise. It returns when done.
func CopyBuffer(dev Device, dst Buffer, dstOff int64, src Buffer, srcOff, n int64) error {
	if n < 0 || srcOff < 0 || dstOff < 0 || srcOff+n > src.Size() || dstOff+n > dst.Size() {
		return fmt.Errorf("rt: copy of %d bytes from [%d) of a %d-byte buffer to [%d) of a %d-byte buffer out of range", n, srcOff, src.Size(), dstOff, dst.Size())
	}
	if n == 0 {
		return nil
	}
	if c, ok := dev.(Copier); ok {
		return c.Copy(dst, dstOff, src, srcOff, n)
	}
	const chunk = 16 << 20
	tmp := make([]byte, min(n, chunk))
	for done := int64(0); done < n; {
		k := min(n-done, chunk)
		if err := dev.Read(tmp[:k], src, srcOff+done); err != nil {
			return err
		}
		if err := dev.Write(dst, dstOff+done, tmp[:k]); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// MapBuffer returns the host view of b (see [Mapper]), or nil when dev
// does not map it.
func MapBuffer(dev Device, b Buffer) []byte {
	if m, ok := dev.(Mapper); ok {
		return m.Map(b)
	}
	return nil
}

// AllocHost allocates size bytes of host memory for transfers to and from
// dev: pinned memory through [HostAllocator] when dev has it, else
// ordinary Go memory.
func AllocHost(dev Device, size int64) (HostBuffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("rt: AllocHost of %d bytes", size)
	}
	if h, ok := dev.(HostAllocator); ok {
		return h.AllocHost(size)
	}
	if size > MaxTensorBytes {
		return nil, &OOMError{Backend: dev.Info().Backend, Request: size, Heap: "host memory"}
	}
	return &goHost{b: make([]byte, size)}, nil
}

// Pinned reports whether hb is pinned memory of a backend rather than
// ordinary Go memory.
func Pinned(hb HostBuffer) bool {
	_, ok := hb.(*goHost)
	return !ok
}

type goHost struct{ b []byte }

func (g *goHost) Bytes() []byte { return g.b }
func (g *goHost) Free()         { g.b = nil }
