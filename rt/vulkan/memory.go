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
	buf    vk.Buffer
	mem    vk.DeviceMemory
	size   int64 // as asked
	alloc  int64 // as created
	ptr    unsafe.Pointer
	mapped bool
	freed  bool
}

func (b *buffer) Size() int64 { return b.size }

func (b *buffer) Free() {
	defer noGC()()
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
	if b.mapped {
		vk.UnmapMemory(b.d.dev, b.mem)
	}
	vk.DestroyBuffer(b.d.dev, b.buf, nil)
	vk.FreeMemory(b.d.dev, b.mem, nil)
}

// bytes returns the mapped memory of a host-visible buffer.
func (b *buffer) bytes() []byte {
	return unsafe.Slice((*byte)(b.ptr), b.alloc)
}

func (d *device) initMemory() error {
	p := d.phys
	const hv = vk.MemoryPropertyHostVisibleBit | vk.MemoryPropertyHostCoherentBit
	if p.unifiedTyp >= 0 {
		d.bufType, d.bufMapped = p.unifiedTyp, true
	} else {
		for i := 0; i < int(p.mem.MemoryTypeCount); i++ {
			t := p.mem.MemoryTypes[i]
			if vk.MemoryPropertyFlagBits(t.PropertyFlags)&vk.MemoryPropertyDeviceLocalBit != 0 && int(t.HeapIndex) == p.heap {
				d.bufType = i
				break
			}
		}
	}
	// Staging: host-visible coherent, cached if possible.
	best := -1
	for i := 0; i < int(p.mem.MemoryTypeCount); i++ {
		f := vk.MemoryPropertyFlagBits(p.mem.MemoryTypes[i].PropertyFlags)
		if f&hv != hv {
			continue
		}
		if best < 0 || (f&vk.MemoryPropertyHostCachedBit != 0 && vk.MemoryPropertyFlagBits(p.mem.MemoryTypes[best].PropertyFlags)&vk.MemoryPropertyHostCachedBit == 0) {
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
	h := p.mem.MemoryTypes[typ].HeapIndex
	return fmt.Sprintf("memory heap %d (%s%s)", h, kib(uint64(p.mem.MemoryHeaps[h].Size)), memFlags(vk.MemoryPropertyFlagBits(p.mem.MemoryTypes[typ].PropertyFlags)))
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
	bci := vk.BufferCreateInfo{
		SType:       vk.StructureTypeBufferCreateInfo,
		Size:        vk.DeviceSize(alloc),
		Usage:       vk.BufferUsageFlags(vk.BufferUsageStorageBufferBit | vk.BufferUsageTransferSrcBit | vk.BufferUsageTransferDstBit),
		SharingMode: vk.SharingModeExclusive,
	}
	b := &buffer{d: d, size: size, alloc: alloc}
	var hb vk.Buffer
	r := vk.CreateBuffer(d.dev, &bci, nil, &hb)
	b.buf = hb
	if r != vk.Success {
		if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
			return nil, &rt.OOMError{Backend: backendName, Request: size, Heap: d.heapName(typ), Detail: "vkCreateBuffer: " + vkErr(r).Error()}
		}
		return nil, fmt.Errorf("vulkan: vkCreateBuffer(%d bytes): %v", size, vkErr(r))
	}
	var req vk.MemoryRequirements
	vk.GetBufferMemoryRequirements(d.dev, b.buf, &req)
	req.Deref()
	if req.MemoryTypeBits&(1<<uint(typ)) == 0 {
		vk.DestroyBuffer(d.dev, b.buf, nil)
		return nil, fmt.Errorf("vulkan: memory type %d not allowed for storage buffers (mask 0x%x)", typ, req.MemoryTypeBits)
	}
	mai := vk.MemoryAllocateInfo{
		SType:           vk.StructureTypeMemoryAllocateInfo,
		AllocationSize:  req.Size,
		MemoryTypeIndex: uint32(typ),
	}
	var hm vk.DeviceMemory
	r = vk.AllocateMemory(d.dev, &mai, nil, &hm)
	b.mem = hm
	if r != vk.Success {
		vk.DestroyBuffer(d.dev, b.buf, nil)
		if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
			return nil, &rt.OOMError{Backend: backendName, Request: size, Heap: d.heapName(typ), Detail: "vkAllocateMemory: " + vkErr(r).Error()}
		}
		return nil, fmt.Errorf("vulkan: vkAllocateMemory(%d bytes): %v", size, vkErr(r))
	}
	if r := vk.BindBufferMemory(d.dev, b.buf, b.mem, 0); r != vk.Success {
		vk.DestroyBuffer(d.dev, b.buf, nil)
		vk.FreeMemory(d.dev, b.mem, nil)
		return nil, fmt.Errorf("vulkan: vkBindBufferMemory: %v", vkErr(r))
	}
	if mapIt {
		var ptr unsafe.Pointer
		r := vk.MapMemory(d.dev, b.mem, 0, vk.DeviceSize(alloc), 0, &ptr)
		b.ptr = ptr
		if r != vk.Success {
			vk.DestroyBuffer(d.dev, b.buf, nil)
			vk.FreeMemory(d.dev, b.mem, nil)
			return nil, fmt.Errorf("vulkan: vkMapMemory: %v", vkErr(r))
		}
		b.mapped = true
	}
	return b, nil
}

// Alloc allocates a device buffer: zero-copy device-local host-visible
// memory when the device has it, else device-local memory.
func (d *device) Alloc(size int64) (rt.Buffer, error) {
	defer noGC()()
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

func checkRange(b *buffer, off, n int64) error {
	if off < 0 || n < 0 || off+n > b.size {
		return fmt.Errorf("vulkan: range [%d,%d) outside buffer of %d bytes", off, off+n, b.size)
	}
	return nil
}

// ---- synchronous transfers ----

func (d *device) initTransfer() error {
	pci := vk.CommandPoolCreateInfo{
		SType:            vk.StructureTypeCommandPoolCreateInfo,
		Flags:            vk.CommandPoolCreateFlags(vk.CommandPoolCreateResetCommandBufferBit),
		QueueFamilyIndex: uint32(d.phys.qfam),
	}
	var pool vk.CommandPool
	r := vk.CreateCommandPool(d.dev, &pci, nil, &pool)
	d.xpool = pool
	if r != vk.Success {
		return d.resultErr("vkCreateCommandPool", r)
	}
	cbs := make([]vk.CommandBuffer, 1)
	if r := vk.AllocateCommandBuffers(d.dev, &vk.CommandBufferAllocateInfo{
		SType: vk.StructureTypeCommandBufferAllocateInfo, CommandPool: d.xpool,
		Level: vk.CommandBufferLevelPrimary, CommandBufferCount: 1,
	}, cbs); r != vk.Success {
		return d.resultErr("vkAllocateCommandBuffers", r)
	}
	d.xcb = cbs[0]
	var fence vk.Fence
	r = vk.CreateFence(d.dev, &vk.FenceCreateInfo{SType: vk.StructureTypeFenceCreateInfo}, nil, &fence)
	d.xfence = fence
	if r != vk.Success {
		return d.resultErr("vkCreateFence", r)
	}
	return nil
}

func (d *device) destroyTransfer() {
	if d.xfence != nil {
		vk.DestroyFence(d.dev, d.xfence, nil)
		d.xfence = nil
	}
	if d.xpool != nil {
		vk.DestroyCommandPool(d.dev, d.xpool, nil)
		d.xpool = nil
	}
	if d.xstage != nil {
		d.xstage.release()
		d.xstage = nil
	}
}

const stageChunk = 16 << 20

// copySync runs one staging copy and waits for it.
func (d *device) copySync(src, dst vk.Buffer, srcOff, dstOff, n int64) error {
	cb := d.xcb
	vk.ResetCommandBuffer(cb, 0)
	if r := vk.BeginCommandBuffer(cb, &vk.CommandBufferBeginInfo{SType: vk.StructureTypeCommandBufferBeginInfo, Flags: vk.CommandBufferUsageFlags(vk.CommandBufferUsageOneTimeSubmitBit)}); r != vk.Success {
		return d.resultErr("vkBeginCommandBuffer", r)
	}
	vk.CmdCopyBuffer(cb, src, dst, 1, []vk.BufferCopy{{SrcOffset: vk.DeviceSize(srcOff), DstOffset: vk.DeviceSize(dstOff), Size: vk.DeviceSize(n)}})
	hostBarrier(cb)
	if r := vk.EndCommandBuffer(cb); r != vk.Success {
		return d.resultErr("vkEndCommandBuffer", r)
	}
	return d.submitWait(cb, d.xfence)
}

func (d *device) submitWait(cb vk.CommandBuffer, fence vk.Fence) error {
	vk.ResetFences(d.dev, 1, []vk.Fence{fence})
	d.qmu.Lock()
	r := vk.QueueSubmit(d.queue, 1, []vk.SubmitInfo{{SType: vk.StructureTypeSubmitInfo, CommandBufferCount: 1, PCommandBuffers: []vk.CommandBuffer{cb}}}, fence)
	d.qmu.Unlock()
	if r != vk.Success {
		return d.resultErr("vkQueueSubmit", r)
	}
	return d.waitFence(fence)
}

func (d *device) waitFence(fence vk.Fence) error {
	// A short run is over sooner than a blocking wait's wake-up takes on a
	// discrete GPU (tens of microseconds): poll the fence for up to
	// spinWait first. CPU drivers (lavapipe) need the core: block at once.
	if d.phys.info.Kind != rt.KindCPU {
		for start := time.Now(); time.Since(start) < spinWait; {
			switch r := vk.GetFenceStatus(d.dev, fence); r {
			case vk.Success:
				return nil
			case vk.NotReady:
			default:
				return d.resultErr("vkGetFenceStatus", r)
			}
		}
	}
	r := vk.WaitForFences(d.dev, 1, []vk.Fence{fence}, vk.True, uint64(waitTimeout().Nanoseconds()))
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

// hostBarrier makes transfer writes visible to host reads.
func hostBarrier(cb vk.CommandBuffer) {
	vk.CmdPipelineBarrier(cb, vk.PipelineStageFlags(vk.PipelineStageTransferBit|vk.PipelineStageComputeShaderBit),
		vk.PipelineStageFlags(vk.PipelineStageHostBit), 0,
		1, []vk.MemoryBarrier{{SType: vk.StructureTypeMemoryBarrier,
			SrcAccessMask: vk.AccessFlags(vk.AccessTransferWriteBit | vk.AccessShaderWriteBit),
			DstAccessMask: vk.AccessFlags(vk.AccessHostReadBit)}}, 0, nil, 0, nil)
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
	defer noGC()()
	if err := d.check(); err != nil {
		return err
	}
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if err := checkRange(b, off, int64(len(src))); err != nil {
		return err
	}
	if b.mapped {
		copy(b.bytes()[off:], src)
		return nil
	}
	d.xmu.Lock()
	defer d.xmu.Unlock()
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
	defer noGC()()
	if err := d.check(); err != nil {
		return err
	}
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if err := checkRange(b, off, int64(len(dst))); err != nil {
		return err
	}
	if b.mapped {
		copy(dst, b.bytes()[off:])
		return nil
	}
	d.xmu.Lock()
	defer d.xmu.Unlock()
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
