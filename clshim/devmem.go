//go:build cgo

package clshim

import (
	"fmt"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// The OpenCL device implements the optional memory interfaces of rt:
//   - Copy is clEnqueueCopyBuffer on the device's queue, waited for;
//   - AllocHost makes a CL_MEM_ALLOC_HOST_PTR buffer and maps it: the
//     driver's pinned host memory on GPU drivers, which its
//     clEnqueueWriteBuffer and clEnqueueReadBuffer (and so the stream's
//     copies) use for DMA without a staging copy;
//   - Map returns nil: buffers are not mapped (pocl's memory is host
//     memory, but mapping would need clEnqueueMapBuffer around each use).
var (
	_ rt.Copier         = (*device)(nil)
	_ rt.Mapper         = (*device)(nil)
	_ rt.HostAllocator  = (*device)(nil)
	_ rt.MemoryReporter = (*device)(nil)
)

// Copy copies n bytes of src at srcOff into dst at dstOff and waits.
func (d *device) Copy(dst rt.Buffer, dstOff int64, src rt.Buffer, srcOff, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return fmt.Errorf("opencl: Copy: %w", err)
	}
	sm, err := d.memOf(src)
	if err != nil {
		return fmt.Errorf("opencl: Copy: %w", err)
	}
	dm, err := d.memOf(dst)
	if err != nil {
		return fmt.Errorf("opencl: Copy: %w", err)
	}
	if err := rt.CheckCopy(dst.Size(), dstOff, src.Size(), srcOff, n); err != nil {
		return fmt.Errorf("opencl: Copy: %w", err)
	}
	if n == 0 {
		return nil
	}
	if err := copySync(d.queue, sm, dm, srcOff, dstOff, n); err != nil {
		return fmt.Errorf("opencl: Copy: %w", mapExecErr(err))
	}
	return nil
}

// Map returns nil: OpenCL buffers are not kept mapped.
func (d *device) Map(rt.Buffer) []byte { return nil }

// hostBuf is a mapped CL_MEM_ALLOC_HOST_PTR buffer.
type hostBuf struct {
	d    *device
	mem  clMem
	ptr  unsafe.Pointer
	size int64
}

func (h *hostBuf) Bytes() []byte {
	if h.mem == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.ptr), h.size)
}

func (h *hostBuf) Free() {
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.mem == nil {
		return
	}
	if !d.closed {
		unmapRelease(d.queue, h.mem, h.ptr)
	}
	delete(d.hosts, h)
	h.mem = nil
}

// AllocHost allocates size bytes of driver-allocated host memory, mapped.
func (d *device) AllocHost(size int64) (rt.HostBuffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("opencl: AllocHost: negative size %d", size)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("opencl: AllocHost: %w", err)
	}
	m, p, code := hostBuffer(d.ctx, d.queue, max(size, 4))
	if code != 0 {
		switch code {
		case clMemObjectAllocationFailure, clOutOfResources, clOutOfHostMemory, clInvalidBufferSize:
			return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: "host memory of " + d.ent.info.Name,
				Detail: (&clError{"clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)", code}).Error()}
		}
		return nil, fmt.Errorf("opencl: AllocHost(%d): %w", size, &clError{"clCreateBuffer/clEnqueueMapBuffer", code})
	}
	h := &hostBuf{d: d, mem: m, ptr: p, size: size}
	d.hosts[h] = struct{}{}
	return h, nil
}

// MemoryUsage counts the live buffers and host buffers.
func (d *device) MemoryUsage() rt.MemoryUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	var u rt.MemoryUsage
	for b := range d.bufs {
		u.Buffers++
		u.Bytes += b.size
	}
	for h := range d.hosts {
		u.HostBuffers++
		u.HostBytes += h.size
	}
	return u
}
