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
var _ rt.MemoryDevice = (*device)(nil)

// Copy copies n bytes of src at srcOff into dst at dstOff and waits.
func (d *device) Copy(dst rt.Buffer, dstOff int64, src rt.Buffer, srcOff, n int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return rt.CopyBuffers(BackendName, d.check, d.memOf, dst, dstOff, src, srcOff, n, func(dm, sm clMem) error {
		if err := copySync(d.queue, sm, dm, srcOff, dstOff, n); err != nil {
			return fmt.Errorf("opencl: Copy: %w", mapExecErr(err))
		}
		return nil
	})
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

// Size is the size asked of AllocHost (MemoryUsage counts it).
func (h *hostBuf) Size() int64 { return h.size }

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
	return rt.CountMemory(d.bufs, d.hosts)
}
