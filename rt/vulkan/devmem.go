//go:build cgo

package vulkan

import (
	"fmt"
	"unsafe"

	"github.com/vrun-go/vrun/rt"
)

// The Vulkan device implements the optional memory interfaces of rt:
//   - Copy records vkCmdCopyBuffer on the device's transfer command buffer
//     and waits (a memmove when both buffers are mapped and host-readable);
//   - Map returns the mapped memory of buffers in device-local
//     host-visible memory (DeviceInfo.Unified) where the host reads it at
//     memory speed (lavapipe, integrated GPUs), not a discrete GPU's
//     ReBAR memory, which Read and Copy reach through GPU copies;
//   - AllocHost makes a buffer in the staging memory type (host-visible,
//     host-cached where the device has it) and maps it; Write, Read and
//     the stream's copies from or to its bytes copy from that buffer
//     directly, without the staging copy.
var _ rt.MemoryDevice = (*device)(nil)

// forceStaging makes Alloc use device-local memory that is not mapped
// even on unified devices, so that tests on lavapipe exercise the staging
// and pinned paths of discrete GPUs.
var forceStaging bool

// Copy copies n bytes of src at srcOff into dst at dstOff.
func (d *device) Copy(dst rt.Buffer, dstOff int64, src rt.Buffer, srcOff, n int64) error {
	return rt.CopyBuffers(backendName, d.check, d.own, dst, dstOff, src, srcOff, n, func(t, s *buffer) error {
		if s.mapped && t.mapped && d.hostReadable() {
			copy(t.bytes()[dstOff:dstOff+n], s.bytes()[srcOff:srcOff+n])
			return nil
		}
		d.xmu.Lock()
		defer d.xmu.Unlock()
		if err := d.copySync(s.buf, t.buf, srcOff, dstOff, n); err != nil {
			return err
		}
		return d.valErr()
	})
}

// Map returns the mapped memory of a host-visible device buffer, or nil.
func (d *device) Map(x rt.Buffer) []byte {
	b, ok := x.(*buffer)
	if !ok || b.d != d || b.freed || !b.mapped || !d.hostReadable() {
		return nil
	}
	return b.bytes()[:b.size]
}

// forceDiscrete (tests) treats every device as a discrete GPU with ReBAR
// memory in hostReadable: mapped buffers, GPU copies for reads.
var forceDiscrete bool

// hostReadable reports whether the host reads the device's mapped buffers
// at memory speed: on a CPU device (lavapipe) or an integrated GPU. A
// discrete GPU's host-visible device-local memory (ReBAR, as on the H200)
// is mapped for fast writes, but host reads of it cross the bus uncached
// (tens of MB/s): Read, Copy and Map then go through GPU copies instead.
func (d *device) hostReadable() bool {
	if forceDiscrete {
		return false
	}
	k := d.phys.info.Kind
	return k == rt.KindCPU || k == rt.KindIntegratedGPU
}

// hostBuffer is pinned host memory: a mapped buffer of the staging type.
type hostBuffer struct {
	b    *buffer
	size int64
}

func (h *hostBuffer) Bytes() []byte {
	if h.b == nil || h.b.freed {
		return nil
	}
	return h.b.bytes()[:h.size]
}

func (h *hostBuffer) Free() {
	if h.b == nil {
		return
	}
	d := h.b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts != nil {
		delete(d.hosts, h.b)
		h.b.release()
	}
	h.b = nil
}

// AllocHost allocates size bytes of host-visible memory in the staging
// memory type, mapped.
func (d *device) AllocHost(size int64) (rt.HostBuffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("vulkan: AllocHost of %d bytes", size)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	b, err := d.newBuffer(size, d.stageType, true)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts == nil {
		b.release()
		return nil, fmt.Errorf("vulkan: AllocHost: %w", rt.ErrClosed)
	}
	d.hosts[b] = struct{}{}
	return &hostBuffer{b: b, size: size}, nil
}

// hostOf returns the host buffer that holds all of p, and p's offset in
// it, or nil when p is not pinned memory of this device.
func (d *device) hostOf(p []byte) (*buffer, int64) {
	if len(p) == 0 {
		return nil, 0
	}
	lo := uintptr(unsafe.Pointer(&p[0]))
	hi := lo + uintptr(len(p))
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.hosts {
		base := uintptr(b.ptr)
		if lo >= base && hi <= base+uintptr(b.alloc) {
			return b, int64(lo - base)
		}
	}
	return nil, 0
}

// MemoryUsage counts the live buffers of Alloc and AllocHost.
func (d *device) MemoryUsage() rt.MemoryUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return rt.CountMemory(d.buffers, d.hosts)
}
