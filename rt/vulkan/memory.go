//go:build cgo

package vulkan

import (
	"fmt"
	"time"
	"unsafe"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/rt"
)

// buffer is a VkBuffer with its own VkDeviceMemory.
type buffer struct {
	d      *device
	buf    uint64 // VkBuffer
	mem    uint64 // VkDeviceMemory
	size   int64  // as asked
	alloc  int64  // as created
	ptr    unsafe.Pointer
	mapped bool
	freed  bool
}

func (b *buffer) Size() int64 { return b.size }

func (b *buffer) Free() {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.freed || d.buffers == nil {
		return
	}
	delete(d.buffers, b)
	b.release()
}

// release destroys the Vulkan objects; d.mu is held.
func (b *buffer) release() {
	if b.freed {
		return
	}
	b.freed = true
	vd := b.d.vd
	if b.mapped {
		vd.unmapMemory(b.mem)
	}
	vd.destroyBuffer(b.buf)
	vd.freeMemory(b.mem)
}

// bytes returns the mapped memory of a host-visible buffer.
func (b *buffer) bytes() []byte {
	return unsafe.Slice((*byte)(b.ptr), b.alloc)
}

func (d *device) initMemory() error {
	p := d.phys
	const hv = vk.MemoryPropertyHostVisibleBit | vk.MemoryPropertyHostCoherentBit
	if p.unifiedTyp >= 0 && !forceStaging {
		d.bufType, d.bufMapped = p.unifiedTyp, true
	} else {
		for i, t := range p.memTypes {
			if vk.MemoryPropertyFlagBits(t.flags)&vk.MemoryPropertyDeviceLocalBit != 0 && int(t.heap) == p.heap {
				d.bufType = i
				break
			}
		}
	}
	// Staging: host-visible coherent, cached if possible.
	best := -1
	for i, t := range p.memTypes {
		f := vk.MemoryPropertyFlagBits(t.flags)
		if f&hv != hv {
			continue
		}
		if best < 0 || (f&vk.MemoryPropertyHostCachedBit != 0 && vk.MemoryPropertyFlagBits(p.memTypes[best].flags)&vk.MemoryPropertyHostCachedBit == 0) {
			best = i
		}
	}
	d.stageType = best
	if d.bufType < 0 || d.stageType < 0 {
		return fmt.Errorf("vulkan: %s: no usable memory types (device-local %d, host-visible %d): %w", p.info.Name, d.bufType, d.stageType, rt.ErrUnavailable)
	}
	return nil
}

func (d *device) heapName(typ int) string {
	p := d.phys
	t := p.memTypes[typ]
	return fmt.Sprintf("memory heap %d (%s%s)", t.heap, kib(p.memHeaps[t.heap].size), memFlags(vk.MemoryPropertyFlagBits(t.flags)))
}

// newBuffer creates a buffer of at least size bytes in memory type typ.
func (d *device) newBuffer(size int64, typ int, mapIt bool) (*buffer, error) {
	alloc := (size + 255) &^ 255
	if alloc == 0 {
		alloc = 256
	}
	if alloc > d.maxAlloc {
		return nil, fmt.Errorf("vulkan: buffer of %d bytes exceeds maxMemoryAllocationSize (%d bytes) of %s; split the allocation", size, d.maxAlloc, d.phys.info.Name)
	}
	vd := d.vd
	b := &buffer{d: d, size: size, alloc: alloc}
	usage := vk.BufferUsageStorageBufferBit | vk.BufferUsageTransferSrcBit | vk.BufferUsageTransferDstBit
	hb, r := vd.createBuffer(uint64(alloc), uint32(usage))
	if r != vk.Success {
		if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
			return nil, &rt.OOMError{Backend: backendName, Request: size, Heap: d.heapName(typ), Detail: "vkCreateBuffer: " + vkErr(r).Error()}
		}
		return nil, fmt.Errorf("vulkan: vkCreateBuffer(%d bytes): %v", size, vkErr(r))
	}
	b.buf = hb
	reqSize, typeBits := vd.bufferRequirements(hb)
	if typeBits&(1<<uint(typ)) == 0 {
		vd.destroyBuffer(hb)
		return nil, fmt.Errorf("vulkan: memory type %d not allowed for storage buffers (mask 0x%x)", typ, typeBits)
	}
	hm, r := vd.allocateMemory(reqSize, uint32(typ))
	if r != vk.Success {
		vd.destroyBuffer(hb)
		if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
			return nil, &rt.OOMError{Backend: backendName, Request: size, Heap: d.heapName(typ), Detail: "vkAllocateMemory: " + vkErr(r).Error()}
		}
		return nil, fmt.Errorf("vulkan: vkAllocateMemory(%d bytes): %v", size, vkErr(r))
	}
	b.mem = hm
	if r := vd.bindBufferMemory(hb, hm); r != vk.Success {
		vd.destroyBuffer(hb)
		vd.freeMemory(hm)
		return nil, fmt.Errorf("vulkan: vkBindBufferMemory: %v", vkErr(r))
	}
	if mapIt {
		ptr, r := vd.mapMemory(hm, uint64(alloc))
		if r != vk.Success {
			vd.destroyBuffer(hb)
			vd.freeMemory(hm)
			return nil, fmt.Errorf("vulkan: vkMapMemory: %v", vkErr(r))
		}
		b.ptr = ptr
		b.mapped = true
	}
	return b, nil
}

// Alloc allocates a device buffer: zero-copy device-local host-visible
// memory when the device has it, else device-local memory.
func (d *device) Alloc(size int64) (rt.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("vulkan: Alloc of %d bytes", size)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	b, err := d.newBuffer(size, d.bufType, d.bufMapped)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.buffers == nil {
		b.release()
		return nil, fmt.Errorf("vulkan: Alloc: %w", rt.ErrClosed)
	}
	d.buffers[b] = struct{}{}
	return b, nil
}

func (d *device) own(x rt.Buffer) (*buffer, error) {
	b, ok := x.(*buffer)
	if !ok || b.d != d {
		return nil, fmt.Errorf("vulkan: buffer %T does not belong to this device", x)
	}
	if b.freed {
		return nil, fmt.Errorf("vulkan: buffer: %w", rt.ErrClosed)
	}
	return b, nil
}

// ---- synchronous transfers ----

func (d *device) initTransfer() error {
	vd := d.vd
	pool, r := vd.createCommandPool(uint32(d.phys.qfam))
	if r != vk.Success {
		return d.resultErr("vkCreateCommandPool", r)
	}
	d.xpool = pool
	cb, r := vd.allocateCommandBuffer(pool)
	if r != vk.Success {
		return d.resultErr("vkAllocateCommandBuffers", r)
	}
	d.xcb = cb
	ownHandle(d.valID, uint64(uintptr(cb)))
	fence, r := vd.createFence()
	if r != vk.Success {
		return d.resultErr("vkCreateFence", r)
	}
	d.xfence = fence
	return nil
}

func (d *device) destroyTransfer() {
	if d.xfence != 0 {
		d.vd.destroyFence(d.xfence)
		d.xfence = 0
	}
	if d.xpool != 0 {
		d.vd.destroyCommandPool(d.xpool)
		d.xpool = 0
		d.xcb = nil
	}
	if d.xstage != nil {
		d.xstage.release()
		d.xstage = nil
	}
}

const stageChunk = 16 << 20

// copySync runs one staging copy and waits for it.
func (d *device) copySync(src, dst uint64, srcOff, dstOff, n int64) error {
	vd, cb := d.vd, d.xcb
	vd.resetCommandBuffer(cb)
	if r := vd.beginCommandBuffer(cb, uint32(vk.CommandBufferUsageOneTimeSubmitBit)); r != vk.Success {
		return d.resultErr("vkBeginCommandBuffer", r)
	}
	vd.cmdCopyBuffer(cb, src, dst, srcOff, dstOff, n)
	hostBarrier(vd, cb)
	if r := vd.endCommandBuffer(cb); r != vk.Success {
		return d.resultErr("vkEndCommandBuffer", r)
	}
	return d.submitWait(cb, d.xfence)
}

func (d *device) submitWait(cb unsafe.Pointer, fence uint64) error {
	d.vd.resetFence(fence)
	d.qmu.Lock()
	r := d.vd.submit(cb, fence)
	d.qmu.Unlock()
	if r != vk.Success {
		return d.resultErr("vkQueueSubmit", r)
	}
	return d.waitFence(fence)
}

func (d *device) waitFence(fence uint64) error {
	// A short run is over sooner than a blocking wait's wake-up takes on a
	// discrete GPU (tens of microseconds): poll the fence for up to
	// spinWait first. CPU drivers (lavapipe) need the core: block at once.
	if d.phys.info.Kind != rt.KindCPU {
		for start := time.Now(); time.Since(start) < spinWait; {
			switch r := d.vd.fenceStatus(fence); r {
			case vk.Success:
				return nil
			case vk.NotReady:
			default:
				return d.resultErr("vkGetFenceStatus", r)
			}
		}
	}
	r := d.vd.waitFence(fence, uint64(waitTimeout().Nanoseconds()))
	if r == vk.Timeout {
		return fmt.Errorf("vulkan: %s did not finish within %v (set VRUN_VK_TIMEOUT to wait longer)", d.phys.info.Name, waitTimeout())
	}
	if r != vk.Success {
		return d.resultErr("vkWaitForFences", r)
	}
	return nil
}

// spinWait is how long waitFence polls before it blocks.
const spinWait = 2 * time.Millisecond

// hostBarrier makes transfer and shader writes visible to host reads.
func hostBarrier(vd vkDev, cb unsafe.Pointer) {
	vd.cmdBarrier(cb, vk.PipelineStageTransferBit|vk.PipelineStageComputeShaderBit, vk.PipelineStageHostBit,
		vk.AccessTransferWriteBit|vk.AccessShaderWriteBit, vk.AccessHostReadBit)
}

func (d *device) stage(n int64) (*buffer, error) {
	if d.xstage != nil && d.xstage.alloc >= n {
		return d.xstage, nil
	}
	if d.xstage != nil {
		d.xstage.release()
		d.xstage = nil
	}
	b, err := d.newBuffer(n, d.stageType, true)
	if err != nil {
		return nil, err
	}
	d.xstage = b
	return b, nil
}

func (d *device) Write(dst rt.Buffer, off int64, src []byte) error {
	if err := d.check(); err != nil {
		return err
	}
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if err := rt.CheckRange(b.size, off, int64(len(src))); err != nil {
		return fmt.Errorf("vulkan: Write: %w", err)
	}
	if b.mapped {
		copy(b.bytes()[off:], src)
		return nil
	}
	d.xmu.Lock()
	defer d.xmu.Unlock()
	if hb, hOff := d.hostOf(src); hb != nil {
		// Pinned memory of AllocHost: copy from it, no staging copy.
		if err := d.copySync(hb.buf, b.buf, hOff, off, int64(len(src))); err != nil {
			return err
		}
		return d.valErr()
	}
	for len(src) > 0 {
		n := min(int64(len(src)), stageChunk)
		st, err := d.stage(n)
		if err != nil {
			return err
		}
		copy(st.bytes(), src[:n])
		if err := d.copySync(st.buf, b.buf, 0, off, n); err != nil {
			return err
		}
		src, off = src[n:], off+n
	}
	return d.valErr()
}

func (d *device) Read(dst []byte, src rt.Buffer, off int64) error {
	if err := d.check(); err != nil {
		return err
	}
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if err := rt.CheckRange(b.size, off, int64(len(dst))); err != nil {
		return fmt.Errorf("vulkan: Read: %w", err)
	}
	if b.mapped && d.hostReadable() {
		copy(dst, b.bytes()[off:])
		return nil
	}
	d.xmu.Lock()
	defer d.xmu.Unlock()
	if hb, hOff := d.hostOf(dst); hb != nil {
		if err := d.copySync(b.buf, hb.buf, off, hOff, int64(len(dst))); err != nil {
			return err
		}
		return d.valErr()
	}
	for len(dst) > 0 {
		n := min(int64(len(dst)), stageChunk)
		st, err := d.stage(n)
		if err != nil {
			return err
		}
		if err := d.copySync(b.buf, st.buf, off, 0, n); err != nil {
			return err
		}
		copy(dst[:n], st.bytes())
		dst, off = dst[n:], off+n
	}
	return d.valErr()
}
