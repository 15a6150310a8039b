//go:build cgo

package vulkan

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	vk "github.com/goki/vulkan"
	"github.com/vrun-go/vrun/internal/cmem"
	"github.com/vrun-go/vrun/rt"
)

// physInfo is what vrun needs to know about a physical device.
type physInfo struct {
	info       rt.DeviceInfo
	pd         unsafe.Pointer // VkPhysicalDevice
	props      devProps
	limits     devLimits
	memTypes   []memType
	memHeaps   []memHeap
	caps       caps
	exts       map[string]bool
	qfam       int    // compute queue family, -1 if none
	tsBits     uint32 // timestamp valid bits of qfam
	heap       int    // largest device-local heap
	heapSize   int64
	unifiedTyp int // DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT type on heap, or -1
	coopProps  []coopMatProp
	coop       coopShape // the f16 cooperative-matrix GEMM shape, if coopOK
	coopOK     bool
	coopPin    bool         // the KHR variants' pipelines require subgroups of coop.SGS
	coop2      []coop2Block // mmcm2.comp's blocks the device runs (none: no NV2 GEMM)
	flexProps  []coopFlexProp
	khrProps   []coopMatProp
}

// physInfo describes physical device index; the cooperative-matrix choice
// follows VRUN_VK_COOPMAT as set now.
func (in *instance) physInfo(index int) *physInfo {
	r := &in.phys[index]
	p := &physInfo{pd: in.pds[index], qfam: -1, unifiedTyp: -1, heap: -1,
		props: r.props, limits: r.limits, memTypes: r.memTypes, memHeaps: r.memHeaps,
		caps: r.caps, coopProps: r.coopProps}
	p.exts = map[string]bool{nvCoopExt: r.nvCoop, "VK_KHR_cooperative_matrix": r.khrCoop, "VK_NV_cooperative_matrix2": r.nvCoop2}
	p.flexProps, p.khrProps = r.flexProps, r.khrProps
	var nv, khr []coopMatProp
	if r.nvCoop {
		nv = p.coopProps
	}
	if r.khrCoop {
		khr = p.khrProps
	}
	p.coop, p.coopOK = pickCoopMat(nv, khr, p.caps, p.limits.MaxComputeSharedMemorySize,
		coopEnabled() && (p.props.DeviceType != vk.PhysicalDeviceTypeCpu || coopForced()))
	p.coopPin = p.coopOK && p.coop.KHR && canPinSubgroup(p.caps, p.coop.SGS)
	p.coop2 = pickCoop2(p.flexProps, p.caps, r.khrCoop && r.nvCoop2, min(in.api, p.props.ApiVersion),
		p.limits.MaxComputeSharedMemorySize, coopEnabled() && coop2Enabled())

	// Prefer a compute queue without graphics (async compute), else any.
	for pass := 0; pass < 2 && p.qfam < 0; pass++ {
		for i, q := range r.queues {
			fl := vk.QueueFlagBits(q.flags)
			if fl&vk.QueueComputeBit == 0 || q.count == 0 {
				continue
			}
			if pass == 0 && fl&vk.QueueGraphicsBit != 0 {
				continue
			}
			p.qfam, p.tsBits = i, q.tsBits
			break
		}
	}

	for i, h := range p.memHeaps {
		if vk.MemoryHeapFlagBits(h.flags)&vk.MemoryHeapDeviceLocalBit != 0 && int64(h.size) > p.heapSize {
			p.heap, p.heapSize = i, int64(h.size)
		}
	}
	const uni = vk.MemoryPropertyDeviceLocalBit | vk.MemoryPropertyHostVisibleBit | vk.MemoryPropertyHostCoherentBit
	for i, t := range p.memTypes {
		if vk.MemoryPropertyFlagBits(t.flags)&uni == uni && int(t.heap) == p.heap {
			p.unifiedTyp = i
			break
		}
	}

	kind := rt.KindOther
	switch p.props.DeviceType {
	case vk.PhysicalDeviceTypeCpu:
		kind = rt.KindCPU
	case vk.PhysicalDeviceTypeDiscreteGpu:
		kind = rt.KindDiscreteGPU
	case vk.PhysicalDeviceTypeIntegratedGpu:
		kind = rt.KindIntegratedGPU
	case vk.PhysicalDeviceTypeVirtualGpu:
		kind = rt.KindVirtualGPU
	}
	driver := p.caps.driverName
	if p.caps.driverInfo != "" {
		driver += " " + p.caps.driverInfo
	}
	if driver == "" {
		driver = fmt.Sprintf("driver 0x%x", p.props.DriverVersion)
	}
	p.info = rt.DeviceInfo{
		Backend: backendName,
		Index:   index,
		Name:    p.props.DeviceName,
		Kind:    kind,
		Driver:  strings.TrimSpace(driver),
		Memory:  p.heapSize,
		FP16:    p.caps.storage16,
		FP64:    p.caps.shaderFloat64,
		Unified: p.unifiedTyp >= 0,
		UUID:    rt.FormatUUID(p.caps.deviceUUID),
	}
	p.info.Physical = index
	p.info.Details = p.details()
	p.info.MaxAlloc, p.info.MaxRange = max(int64(p.caps.maxAlloc), 0), int64(p.limits.MaxStorageBufferRange)
	return p
}

func kib(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func (p *physInfo) details() [][2]string {
	l := p.limits
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	d := [][2]string{
		{"api version", versionString(p.props.ApiVersion)},
		{"driver version", fmt.Sprintf("0x%x", p.props.DriverVersion)},
		{"vendor/device id", fmt.Sprintf("0x%04x/0x%04x", p.props.VendorID, p.props.DeviceID)},
		{"subgroup size", subgroupSizes(p.caps)},
		{"max shared memory", kib(uint64(l.MaxComputeSharedMemorySize))},
		{"max storage buffer range", kib(uint64(l.MaxStorageBufferRange))},
		{"max allocation size", kib(p.caps.maxAlloc)},
		{"max push constants", fmt.Sprintf("%d B", l.MaxPushConstantsSize)},
		{"max workgroup invocations", fmt.Sprint(l.MaxComputeWorkGroupInvocations)},
		{"f16 storage / arithmetic", yes(p.caps.storage16) + " / " + yes(p.caps.shaderFloat16)},
		{"8-bit storage", yes(p.caps.storage8)},
		{"int64 / float64", yes(p.caps.shaderInt64) + " / " + yes(p.caps.shaderFloat64)},
		{"timestamps", yes(p.tsBits > 0)},
		{"compute queue family", fmt.Sprint(p.qfam)},
	}
	for i, h := range p.memHeaps {
		fl := ""
		if vk.MemoryHeapFlagBits(h.flags)&vk.MemoryHeapDeviceLocalBit != 0 {
			fl = " device-local"
		}
		d = append(d, [2]string{fmt.Sprintf("memory heap %d", i), kib(h.size) + fl})
	}
	for i, t := range p.memTypes {
		d = append(d, [2]string{fmt.Sprintf("memory type %d", i), fmt.Sprintf("heap %d%s", t.heap, memFlags(vk.MemoryPropertyFlagBits(t.flags)))})
	}
	var cm []string
	for _, e := range []string{"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix", "VK_NV_cooperative_matrix2"} {
		if p.exts[e] {
			cm = append(cm, e)
		}
	}
	if len(cm) == 0 {
		cm = []string{"none"}
	}
	if p.coopOK {
		cm = append(cm, "f16 GEMM "+p.coop.String())
	}
	if len(p.khrProps) > 0 {
		var ks []string
		for _, s := range p.khrProps {
			if s.A == coopF16 && s.C == coopF32 && s.Scope == coopSubgroup {
				ks = append(ks, coopShape{M: s.M, N: s.N, K: s.K}.String())
			}
		}
		cm = append(cm, fmt.Sprintf("KHR: %d shapes (f16->f32 subgroup %s)", len(p.khrProps), strings.Join(ks, " ")))
	}
	d = append(d, [2]string{"cooperative matrix", strings.Join(cm, ", ")})
	if p.exts["VK_NV_cooperative_matrix2"] {
		c2 := p.caps.coop2
		d = append(d, [2]string{"cooperative matrix 2", fmt.Sprintf("workgroup scope %s (max %d invocations, %s reserved shared), flexible dimensions %s (max %d, %d shapes), per-element %s, tensor addressing %s",
			yes(c2.workgroupScope), c2.maxWorkgroupSize, kib(uint64(c2.reservedShared)), yes(c2.flexibleDimensions), c2.maxDimension, len(p.flexProps),
			yes(c2.perElementOps), yes(c2.tensorAddressing))})
	}
	d = append(d, [2]string{"f16 GEMM", p.gemmPath()})
	return d
}

// subgroupSizes is the device's default subgroup size, with the range a
// compute pipeline can require where it has subgroup size control.
func subgroupSizes(c caps) string {
	if c.sgsControl && c.sgsStages&computeStage != 0 {
		return fmt.Sprintf("%d (compute pipelines can require %d-%d)", c.subgroupSize, c.sgsMin, c.sgsMax)
	}
	return fmt.Sprint(c.subgroupSize)
}

func memFlags(f vk.MemoryPropertyFlagBits) string {
	s := ""
	for _, x := range []struct {
		b vk.MemoryPropertyFlagBits
		n string
	}{{vk.MemoryPropertyDeviceLocalBit, "device-local"}, {vk.MemoryPropertyHostVisibleBit, "host-visible"},
		{vk.MemoryPropertyHostCoherentBit, "host-coherent"}, {vk.MemoryPropertyHostCachedBit, "host-cached"}} {
		if f&x.b != 0 {
			s += " " + x.n
		}
	}
	return s
}

// device is an opened Vulkan device.
type device struct {
	phys  *physInfo
	in    *instance
	vd    vkDev      // the VkDevice, its queue and entry points
	valID uintptr    // validation message list, 0 without validation
	qmu   sync.Mutex // guards queue submission

	minAlign  int64 // binding offset alignment (>= 16)
	maxRange  int64 // maxStorageBufferRange
	maxAlloc  int64
	maxGroups [3]uint32

	bufType   int // memory type for Buffers
	bufMapped bool
	stageType int // host-visible coherent type for staging

	coopFailed  atomic.Bool // the cooperative-matrix pipeline could not be created
	coop2Failed atomic.Bool // an mmcm2.comp pipeline could not be created

	mu      sync.Mutex
	buffers map[*buffer]struct{}
	hosts   map[*buffer]struct{} // AllocHost buffers
	streams map[*stream]struct{}
	pipes   map[string]*pipeline
	layouts map[int]*layout
	pcache  uint64 // VkPipelineCache

	building  sync.WaitGroup // pipelines being created (getPipeline)
	pipesMade atomic.Int64   // pipelines created
	noPrepare bool           // tests: Prepare does nothing
	tune      tuner          // the GEMM autotuner (tune.go)

	// synchronous copies for non-host-visible buffers
	xmu     sync.Mutex
	xpool   uint64         // VkCommandPool
	xcb     unsafe.Pointer // VkCommandBuffer
	xfence  uint64         // VkFence
	xstage  *buffer
	lost    bool
	closed  bool
	closeMu sync.Mutex
}

func openDevice(index int) (rt.Device, error) {
	in, err := sharedInstance()
	if err != nil {
		return nil, err
	}
	if index >= len(in.phys) {
		return nil, fmt.Errorf("vulkan: device %d disappeared", index)
	}
	p := in.physInfo(index)
	if p.props.ApiVersion < vk.MakeVersion(1, 2, 0) {
		return nil, fmt.Errorf("vulkan: %s supports Vulkan %s, vrun needs 1.2: %w", p.info.Name, versionString(p.props.ApiVersion), rt.ErrUnavailable)
	}
	if p.qfam < 0 {
		return nil, fmt.Errorf("vulkan: %s has no compute queue: %w", p.info.Name, rt.ErrUnavailable)
	}
	d := &device{
		phys: p, in: in,
		buffers: map[*buffer]struct{}{}, hosts: map[*buffer]struct{}{}, streams: map[*stream]struct{}{},
		pipes: map[string]*pipeline{}, layouts: map[int]*layout{},
		bufType: -1, stageType: -1,
	}
	if in.validate {
		// Messages about the device's creation go to it too (they name no
		// object of it yet, so they go to every open device).
		d.valID = newValidationID()
	}
	en := p.caps
	en.coopMatrix, en.vkMemModel = p.coopOK && !p.coop.KHR, p.coopOK || len(p.coop2) > 0
	en.coop2.khrCoopMatrix = p.coopOK && p.coop.KHR
	en.sgsControl = p.coopPin
	en.coop2.enable = len(p.coop2) > 0
	vd, r := in.h.createDevice(p.pd, uint32(p.qfam), en)
	if r != vk.Success && en.coop2.enable {
		// A driver that lists VK_NV_cooperative_matrix2 but cannot create
		// a device with it: without it (mmcm.comp or matmul.comp).
		if d.valID != 0 {
			_ = d.valErr() // the failed attempt's messages
		}
		p.coop2 = nil
		p.info.Details = p.details()
		en.coop2.enable, en.vkMemModel = false, p.coopOK
		vd, r = in.h.createDevice(p.pd, uint32(p.qfam), en)
	}
	if r != vk.Success {
		err := fmt.Errorf("vulkan: vkCreateDevice on %s: %v: %w", p.info.Name, vkErr(r), rt.ErrUnavailable)
		if verr := d.valErr(); verr != nil {
			err = fmt.Errorf("%w\n%v", err, verr)
		}
		if d.valID != 0 {
			dropValidationID(d.valID)
		}
		return nil, err
	}
	d.vd = vd
	in.acquire()
	if d.valID != 0 {
		dh, qh := vd.handles()
		ownHandle(d.valID, dh)
		ownHandle(d.valID, qh)
	}
	d.minAlign = int64(p.limits.MinStorageBufferOffsetAlignment)
	if d.minAlign < 16 {
		d.minAlign = 16
	}
	d.maxRange = int64(p.limits.MaxStorageBufferRange)
	d.maxAlloc = int64(p.caps.maxAlloc)
	if d.maxAlloc <= 0 {
		d.maxAlloc = 1 << 30
	}
	d.maxGroups = p.limits.MaxComputeWorkGroupCount
	if err := d.initMemory(); err != nil {
		d.Close()
		return nil, err
	}
	d.loadPipelineCache()
	if err := d.initTransfer(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *device) Info() rt.DeviceInfo { return d.phys.info }

// check returns an error when the device is closed or lost.
func (d *device) check() error {
	if d.closed {
		return fmt.Errorf("vulkan: device: %w", rt.ErrClosed)
	}
	if d.lost {
		return fmt.Errorf("vulkan: %s: %w", d.phys.info.Name, rt.ErrDeviceLost)
	}
	return nil
}

// resultErr converts a failed VkResult into an error, marking the device
// lost on VK_ERROR_DEVICE_LOST.
func (d *device) resultErr(what string, r vk.Result) error {
	if r == vk.ErrorDeviceLost {
		d.lost = true
		return fmt.Errorf("vulkan: %s: %w", what, rt.ErrDeviceLost)
	}
	if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
		return &rt.OOMError{Backend: backendName, Heap: what, Detail: vkErr(r).Error()}
	}
	return fmt.Errorf("vulkan: %s: %v", what, vkErr(r))
}

// valErr returns the validation messages reported since the last call.
func (d *device) valErr() error {
	if d.valID == 0 {
		return nil
	}
	return validationError(takeValidation(d.valID))
}

// Close destroys everything the device created and the VkDevice, and
// releases the shared instance (which stays: see instance).
func (d *device) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return nil
	}
	if d.vd.p != nil {
		d.vd.waitIdle()
	}
	d.mu.Lock()
	streams := make([]*stream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	d.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
	d.closed = true
	if d.vd.p != nil {
		d.destroyTransfer()
		d.mu.Lock()
		pipes := d.pipes
		d.pipes = nil // no pipeline is claimed from here on
		d.mu.Unlock()
		d.building.Wait()
		d.mu.Lock()
		for b := range d.buffers {
			b.release()
		}
		d.buffers = nil
		for b := range d.hosts {
			b.release()
		}
		d.hosts = nil
		d.savePipelineCache()
		for _, p := range pipes {
			if p.pl != 0 {
				d.vd.destroyPipeline(p.pl)
			}
		}
		for _, l := range d.layouts {
			d.vd.destroyLayouts(l.dsl, l.pl)
		}
		d.layouts = nil
		if d.pcache != 0 {
			d.vd.destroyPipelineCache(d.pcache)
			d.pcache = 0
		}
		d.mu.Unlock()
		d.vd.destroy()
		d.vd = vkDev{}
		d.in.release()
		// The driver frees the device's memory and compiled pipelines to
		// the C heap; give it back to the system (see package cmem).
		cmem.Trim()
	}
	err := d.valErr()
	if d.valID != 0 {
		dropValidationID(d.valID)
	}
	return err
}
