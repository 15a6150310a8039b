//go:build cgo

package cudashim

/*
#include "cuda_shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// The CUDA device implements the optional memory interfaces of rt
// (untested on hardware in the session that wrote them):
//   - Copy is cuMemcpyDtoDAsync on the device's transfer stream, waited
//     for;
//   - AllocHost is cuMemHostAlloc (portable, page-locked): Write, Read
//     and the stream's copies from or to it are one DMA each, without the
//     staging copy (a stream's graph captures the pointer itself);
//   - Map returns nil: device memory is not host-visible through the
//     driver API.
var _ rt.MemoryDevice = (*Device)(nil)

// Copy copies n bytes of src at srcOff into dst at dstOff and waits.
func (d *Device) Copy(dst rt.Buffer, dstOff int64, src rt.Buffer, srcOff, n int64) error {
	return rt.CopyBuffers(BackendName, d.check, d.bufferOf, dst, dstOff, src, srcOff, n, func(db, sb *Buffer) error {
		leave, ptrs, err := d.enterIO("Copy", sb, db)
		if err != nil {
			return err
		}
		defer leave()
		sp, dp := ptrs[0], ptrs[1]
		err = check(C.vr_cuMemcpyDtoDAsync(C.CUdeviceptr(dp+uint64(dstOff)), C.CUdeviceptr(sp+uint64(srcOff)), C.size_t(n), d.ioStream), "cuMemcpyDtoDAsync_v2")
		return d.syncIO("Copy", err)
	})
}

// Map returns nil: CUDA device memory is not host-visible here.
func (d *Device) Map(rt.Buffer) []byte { return nil }

// hostBuf is page-locked host memory from cuMemHostAlloc.
type hostBuf struct {
	d    *Device
	ptr  unsafe.Pointer
	size int64
}

// Size is the size asked of AllocHost (MemoryUsage counts it).
func (h *hostBuf) Size() int64 { return h.size }

func (h *hostBuf) Bytes() []byte {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	if h.ptr == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.ptr), h.size)
}

func (h *hostBuf) Free() {
	d := h.d
	d.mu.Lock()
	p := h.ptr
	h.ptr = nil
	delete(d.hosts, h)
	closed := d.closed
	d.mu.Unlock()
	if p == nil || closed {
		return
	}
	if leave, err := d.enter(); err == nil {
		C.vr_cuMemFreeHost(p)
		leave()
	}
}

// AllocHost allocates size bytes of page-locked host memory.
func (d *Device) AllocHost(size int64) (rt.HostBuffer, error) {
	leave, err := d.beginAlloc("AllocHost", size)
	if err != nil {
		return nil, err
	}
	defer leave()
	var p unsafe.Pointer
	if err := check(C.vr_cuMemHostAlloc(&p, C.size_t(max(size, 1))), "cuMemHostAlloc"); err != nil {
		if errors.Is(err, rt.ErrOutOfMemory) {
			return nil, &rt.OOMError{Backend: BackendName, Request: size, Heap: "pinned host memory", Detail: err.Error()}
		}
		return nil, d.noteErr(err)
	}
	h := &hostBuf{d: d, ptr: p, size: size}
	if err := d.adopt("AllocHost", func() { d.hosts[h] = struct{}{} }, func() { C.vr_cuMemFreeHost(p) }); err != nil {
		return nil, err
	}
	return h, nil
}

// hostOf returns host itself when it lies within one AllocHost buffer of
// d, or nil.
func (d *Device) hostOf(host []byte) unsafe.Pointer {
	if len(host) == 0 {
		return nil
	}
	lo := uintptr(unsafe.Pointer(&host[0]))
	hi := lo + uintptr(len(host))
	d.mu.Lock()
	defer d.mu.Unlock()
	for h := range d.hosts {
		base := uintptr(h.ptr)
		if h.ptr != nil && lo >= base && hi <= base+uintptr(h.size) {
			return unsafe.Pointer(&host[0])
		}
	}
	return nil
}

// MemoryUsage counts the live buffers and host buffers.
func (d *Device) MemoryUsage() rt.MemoryUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return rt.CountMemory(d.bufs, d.hosts)
}
