//go:build cgo

package vulkan

/*
#include "vkshim.h"
*/
import "C"

import (
	"unsafe"

	vk "github.com/goki/vulkan"
)

// This file is the only place that calls Vulkan: every call goes through
// a static C function of vkshim.h that builds its create-info and other
// struct arguments itself. goki/vulkan is used for its types and constants
// only: its generated wrappers copy struct arguments into C memory that
// they free from finalizers (which can run while the call is still in
// progress) or never free at all.
//
// Non-dispatchable handles are their 64-bit values (0 is VK_NULL_HANDLE);
// dispatchable ones (physical device, command buffer) are C pointers.

// vkInst is a Vulkan instance with its entry points, in C memory.
type vkInst struct{ p *C.vr_inst }

// vkDev is a Vulkan device with its queue and entry points, in C memory.
type vkDev struct{ p *C.vr_dev }

func gipaFn() C.vr_gipa_t { return C.vr_gipa_t(gipa) }

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cBool32(b bool) C.uint32_t {
	if b {
		return 1
	}
	return 0
}

// vkInstanceVersion is the loader's instance version (1.0 for a loader
// without vkEnumerateInstanceVersion).
func vkInstanceVersion() uint32 { return uint32(C.vr_instance_version(gipaFn())) }

// vkHasLayer reports whether the named instance layer is installed.
func vkHasLayer(name string) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.vr_has_layer(gipaFn(), cs) != 0
}

// vkHasInstanceExt reports whether the named instance extension is there.
func vkHasInstanceExt(name string) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.vr_has_instance_ext(gipaFn(), cs) != 0
}

// vkCreateInstance creates an instance for api; see vr_create_instance.
func vkCreateInstance(api uint32, portability, validate bool) (vkInst, vk.Result) {
	var p *C.vr_inst
	r := C.vr_create_instance(gipaFn(), C.uint32_t(api), cBool(portability), cBool(validate), &p)
	return vkInst{p}, vk.Result(r)
}

func (in vkInst) destroy() { C.vr_destroy_instance(in.p) }

// physicalDevices lists the instance's physical devices.
func (in vkInst) physicalDevices() ([]unsafe.Pointer, vk.Result) {
	var buf [64]unsafe.Pointer
	var n C.uint32_t
	r := C.vr_physical_devices(in.p, &buf[0], C.uint32_t(len(buf)), &n)
	return append([]unsafe.Pointer(nil), buf[:n]...), vk.Result(r)
}

// memType and memHeap mirror VkMemoryType and VkMemoryHeap.
type memType struct{ flags, heap uint32 }
type memHeap struct {
	size  uint64
	flags uint32
}

// queueFamily is what vrun reads of a VkQueueFamilyProperties.
type queueFamily struct{ flags, count, tsBits uint32 }

// devLimits are the VkPhysicalDeviceLimits that vrun reads.
type devLimits struct {
	MaxStorageBufferRange           uint32
	MaxPushConstantsSize            uint32
	MaxComputeSharedMemorySize      uint32
	MaxComputeWorkGroupCount        [3]uint32
	MaxComputeWorkGroupInvocations  uint32
	MaxComputeWorkGroupSize         [3]uint32
	MinStorageBufferOffsetAlignment uint64
	TimestampPeriod                 float32
}

// devProps are the VkPhysicalDeviceProperties that vrun reads.
type devProps struct {
	ApiVersion, DriverVersion, VendorID, DeviceID uint32
	DeviceType                                    vk.PhysicalDeviceType
	DeviceName                                    string
	PipelineCacheUUID                             [16]byte
}

// rawPhys is everything vkDescribe reads about a physical device.
type rawPhys struct {
	props     devProps
	limits    devLimits
	memTypes  []memType
	memHeaps  []memHeap
	queues    []queueFamily
	nvCoop    bool // VK_NV_cooperative_matrix
	khrCoop   bool // VK_KHR_cooperative_matrix
	nvCoop2   bool // VK_NV_cooperative_matrix2
	caps      caps
	coopProps []coopMatProp
	khrProps  []coopMatProp  // VK_KHR_cooperative_matrix shapes
	flexProps []coopFlexProp // VK_NV_cooperative_matrix2 flexible-dimension shapes
}

// caps are the Vulkan 1.1/1.2 capabilities read through the feature and
// property chains.
type caps struct {
	hasFeatures2, vk12                                                                bool
	coopMatrix, vkMemModel                                                            bool // VK_NV_cooperative_matrix feature, vulkanMemoryModel
	vkMemModelDeviceScope                                                             bool // vulkanMemoryModelDeviceScope (enabled with vkMemModel)
	sgsControl                                                                        bool // subgroupSizeControl (Vulkan 1.3)
	sgsMin, sgsMax, sgsMaxSubgroups, sgsStages                                        uint32
	coop2                                                                             coop2Caps
	storage16, shaderFloat16, storage8, shaderInt8, shaderInt64, shaderFloat64, int16 bool
	subgroupSize, subgroupOps, driverID                                               uint32
	maxAlloc                                                                          uint64
	driverName, driverInfo                                                            string
	deviceUUID                                                                        [16]byte
}

// describe reads pd's properties.
func (in vkInst) describe(pd unsafe.Pointer) rawPhys {
	var p C.vr_physinfo
	C.vr_describe(in.p, pd, &p)
	pr := &p.props
	l := &pr.limits
	var r rawPhys
	r.props = devProps{
		ApiVersion: uint32(pr.apiVersion), DriverVersion: uint32(pr.driverVersion),
		VendorID: uint32(pr.vendorID), DeviceID: uint32(pr.deviceID),
		DeviceType: vk.PhysicalDeviceType(pr.deviceType),
		DeviceName: C.GoString(&pr.deviceName[0]),
	}
	for i := range r.props.PipelineCacheUUID {
		r.props.PipelineCacheUUID[i] = byte(pr.pipelineCacheUUID[i])
	}
	r.limits = devLimits{
		MaxStorageBufferRange:           uint32(l.maxStorageBufferRange),
		MaxPushConstantsSize:            uint32(l.maxPushConstantsSize),
		MaxComputeSharedMemorySize:      uint32(l.maxComputeSharedMemorySize),
		MaxComputeWorkGroupInvocations:  uint32(l.maxComputeWorkGroupInvocations),
		MinStorageBufferOffsetAlignment: uint64(l.minStorageBufferOffsetAlignment),
		TimestampPeriod:                 float32(l.timestampPeriod),
	}
	for i := 0; i < 3; i++ {
		r.limits.MaxComputeWorkGroupCount[i] = uint32(l.maxComputeWorkGroupCount[i])
		r.limits.MaxComputeWorkGroupSize[i] = uint32(l.maxComputeWorkGroupSize[i])
	}
	for i := 0; i < int(p.mem.memoryTypeCount); i++ {
		t := p.mem.memoryTypes[i]
		r.memTypes = append(r.memTypes, memType{flags: uint32(t.propertyFlags), heap: uint32(t.heapIndex)})
	}
	for i := 0; i < int(p.mem.memoryHeapCount); i++ {
		h := p.mem.memoryHeaps[i]
		r.memHeaps = append(r.memHeaps, memHeap{size: uint64(h.size), flags: uint32(h.flags)})
	}
	for i := 0; i < int(p.queueFamilyCount); i++ {
		q := p.queueFamilies[i]
		r.queues = append(r.queues, queueFamily{flags: uint32(q.queueFlags), count: uint32(q.queueCount), tsBits: uint32(q.timestampValidBits)})
	}
	r.nvCoop, r.khrCoop = p.hasNVCoop != 0, p.hasKHRCoop != 0
	c := &p.caps
	r.caps = caps{
		hasFeatures2: c.hasFeatures2 != 0, vk12: c.vk12 != 0,
		coopMatrix: c.coopMatrix != 0, vkMemModel: c.vkMemModel != 0, vkMemModelDeviceScope: c.vkMemModelDeviceScope != 0,
		sgsControl: c.sgsControl != 0, sgsMin: uint32(c.sgsMin), sgsMax: uint32(c.sgsMax),
		sgsMaxSubgroups: uint32(c.sgsMaxSubgroups), sgsStages: uint32(c.sgsStages),
		storage16: c.storage16 != 0, shaderFloat16: c.shaderFloat16 != 0,
		storage8: c.storage8 != 0, shaderInt8: c.shaderInt8 != 0,
		shaderInt64: c.shaderInt64 != 0, shaderFloat64: c.shaderFloat64 != 0, int16: c.shaderInt16 != 0,
		subgroupSize: uint32(c.subgroupSize), subgroupOps: uint32(c.subgroupOps), driverID: uint32(c.driverID),
		maxAlloc:   uint64(c.maxMemoryAllocationSize),
		driverName: C.GoString(&c.driverName[0]), driverInfo: C.GoString(&c.driverInfo[0]),
	}
	for i := range r.caps.deviceUUID {
		r.caps.deviceUUID[i] = byte(c.deviceUUID[i])
	}
	for i := 0; i < int(p.coopCount); i++ {
		x := p.coop[i]
		r.coopProps = append(r.coopProps, coopMatProp{M: uint32(x.MSize), N: uint32(x.NSize), K: uint32(x.KSize),
			A: uint32(x.AType), B: uint32(x.BType), C: uint32(x.CType), D: uint32(x.DType), Scope: uint32(x.scope)})
	}
	r.nvCoop2 = p.hasNVCoop2 != 0
	r.caps.coop2 = coop2Caps{
		khrCoopMatrix: c.khrCoopMatrix != 0, workgroupScope: c.c2WorkgroupScope != 0,
		flexibleDimensions: c.c2FlexibleDimensions != 0, perElementOps: c.c2PerElementOperations != 0,
		tensorAddressing: c.c2TensorAddressing != 0, conversions: c.c2Conversions != 0,
		maxWorkgroupSize: uint32(c.c2MaxWorkgroupSize), maxDimension: uint32(c.c2MaxDimension),
		reservedShared: uint32(c.c2ReservedShared),
	}
	for i := 0; i < int(p.khrCount); i++ {
		x := p.khr[i]
		r.khrProps = append(r.khrProps, coopMatProp{M: uint32(x.MSize), N: uint32(x.NSize), K: uint32(x.KSize),
			A: uint32(x.AType), B: uint32(x.BType), C: uint32(x.CType), D: uint32(x.ResultType), Scope: uint32(x.scope)})
	}
	for i := 0; i < int(p.flexCount); i++ {
		x := p.flex[i]
		r.flexProps = append(r.flexProps, coopFlexProp{MGran: uint32(x.MGranularity), NGran: uint32(x.NGranularity), KGran: uint32(x.KGranularity),
			A: uint32(x.AType), B: uint32(x.BType), C: uint32(x.CType), D: uint32(x.ResultType), Scope: uint32(x.scope),
			Invocations: uint32(x.workgroupInvocations)})
	}
	return r
}

// createDevice creates a device with one queue of family qfam and en's
// features enabled (VK_NV_cooperative_matrix with en.coopMatrix;
// VK_KHR_cooperative_matrix with en.coop2.khrCoopMatrix; both
// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 with
// en.coop2.enable, with the NV2 features en.coop2 reports).
func (in vkInst) createDevice(pd unsafe.Pointer, qfam uint32, en caps) (vkDev, vk.Result) {
	var c C.vr_caps
	c.hasFeatures2, c.vk12 = cBool32(en.hasFeatures2), cBool32(en.vk12)
	c.storage16, c.shaderFloat16 = cBool32(en.storage16), cBool32(en.shaderFloat16)
	c.storage8, c.shaderInt8 = cBool32(en.storage8), cBool32(en.shaderInt8)
	c.shaderInt64, c.shaderFloat64, c.shaderInt16 = cBool32(en.shaderInt64), cBool32(en.shaderFloat64), cBool32(en.int16)
	c.coopMatrix, c.vkMemModel = cBool32(en.coopMatrix), cBool32(en.vkMemModel)
	c.vkMemModelDeviceScope = cBool32(en.vkMemModelDeviceScope)
	c.sgsControl = cBool32(en.sgsControl)
	c.khrCoopMatrix = cBool32(en.coop2.khrCoopMatrix)
	if en.coop2.enable {
		c.coop2 = 1
		c2 := &en.coop2
		c.c2WorkgroupScope, c.c2FlexibleDimensions = cBool32(c2.workgroupScope), cBool32(c2.flexibleDimensions)
		c.c2PerElementOperations, c.c2TensorAddressing = cBool32(c2.perElementOps), cBool32(c2.tensorAddressing)
		c.c2Conversions = cBool32(c2.conversions)
	}
	var p *C.vr_dev
	r := C.vr_create_device(in.p, pd, C.uint32_t(qfam), &c, &p)
	return vkDev{p}, vk.Result(r)
}

func (d vkDev) destroy() { C.vr_destroy_device(d.p) }

// handles returns the VkDevice and VkQueue as 64-bit values (validation
// messages name them).
func (d vkDev) handles() (dev, queue uint64) {
	return uint64(uintptr(d.p.device)), uint64(uintptr(d.p.queue))
}

func (d vkDev) waitIdle() vk.Result { return vk.Result(C.vr_device_wait_idle(d.p)) }

// ---- memory ----

func (d vkDev) createBuffer(size uint64, usage uint32) (uint64, vk.Result) {
	var b C.uint64_t
	r := C.vr_create_buffer(d.p, C.uint64_t(size), C.uint32_t(usage), &b)
	return uint64(b), vk.Result(r)
}

func (d vkDev) destroyBuffer(b uint64) { C.vr_destroy_buffer(d.p, C.uint64_t(b)) }

// bufferRequirements returns the memory size and type bits of b.
func (d vkDev) bufferRequirements(b uint64) (size uint64, typeBits uint32) {
	var s C.uint64_t
	var t C.uint32_t
	C.vr_buffer_requirements(d.p, C.uint64_t(b), &s, &t)
	return uint64(s), uint32(t)
}

func (d vkDev) allocateMemory(size uint64, typ uint32) (uint64, vk.Result) {
	var m C.uint64_t
	r := C.vr_allocate_memory(d.p, C.uint64_t(size), C.uint32_t(typ), &m)
	return uint64(m), vk.Result(r)
}

func (d vkDev) freeMemory(m uint64) { C.vr_free_memory(d.p, C.uint64_t(m)) }

func (d vkDev) bindBufferMemory(b, m uint64) vk.Result {
	return vk.Result(C.vr_bind_buffer_memory(d.p, C.uint64_t(b), C.uint64_t(m)))
}

// mapMemory maps the first size bytes of m.
func (d vkDev) mapMemory(m, size uint64) (unsafe.Pointer, vk.Result) {
	var p unsafe.Pointer
	r := C.vr_map_memory(d.p, C.uint64_t(m), C.uint64_t(size), &p)
	return p, vk.Result(r)
}

func (d vkDev) unmapMemory(m uint64) { C.vr_unmap_memory(d.p, C.uint64_t(m)) }

// ---- command buffers and synchronisation ----

// createCommandPool creates a pool whose command buffers can be reset one
// by one.
func (d vkDev) createCommandPool(qfam uint32) (uint64, vk.Result) {
	var p C.uint64_t
	r := C.vr_create_command_pool(d.p, C.uint32_t(qfam), &p)
	return uint64(p), vk.Result(r)
}

func (d vkDev) destroyCommandPool(p uint64) { C.vr_destroy_command_pool(d.p, C.uint64_t(p)) }

// allocateCommandBuffer allocates one primary command buffer from pool.
func (d vkDev) allocateCommandBuffer(pool uint64) (unsafe.Pointer, vk.Result) {
	var cb unsafe.Pointer
	r := C.vr_allocate_command_buffer(d.p, C.uint64_t(pool), &cb)
	return cb, vk.Result(r)
}

func (d vkDev) resetCommandBuffer(cb unsafe.Pointer) vk.Result {
	return vk.Result(C.vr_reset_command_buffer(d.p, cb))
}

func (d vkDev) beginCommandBuffer(cb unsafe.Pointer, flags uint32) vk.Result {
	return vk.Result(C.vr_begin_command_buffer(d.p, cb, C.uint32_t(flags)))
}

func (d vkDev) endCommandBuffer(cb unsafe.Pointer) vk.Result {
	return vk.Result(C.vr_end_command_buffer(d.p, cb))
}

func (d vkDev) createFence() (uint64, vk.Result) {
	var f C.uint64_t
	r := C.vr_create_fence(d.p, &f)
	return uint64(f), vk.Result(r)
}

func (d vkDev) destroyFence(f uint64) { C.vr_destroy_fence(d.p, C.uint64_t(f)) }

func (d vkDev) resetFence(f uint64) vk.Result { return vk.Result(C.vr_reset_fence(d.p, C.uint64_t(f))) }

func (d vkDev) fenceStatus(f uint64) vk.Result {
	return vk.Result(C.vr_fence_status(d.p, C.uint64_t(f)))
}

func (d vkDev) waitFence(f uint64, timeoutNs uint64) vk.Result {
	return vk.Result(C.vr_wait_fence(d.p, C.uint64_t(f), C.uint64_t(timeoutNs)))
}

// submit submits cb to the device's queue, signalling fence. The caller
// serialises submissions.
func (d vkDev) submit(cb unsafe.Pointer, fence uint64) vk.Result {
	return vk.Result(C.vr_queue_submit(d.p, cb, C.uint64_t(fence)))
}

// ---- commands ----

func (d vkDev) cmdCopyBuffer(cb unsafe.Pointer, src, dst uint64, srcOff, dstOff, size int64) {
	C.vr_cmd_copy_buffer(d.p, cb, C.uint64_t(src), C.uint64_t(dst), C.uint64_t(srcOff), C.uint64_t(dstOff), C.uint64_t(size))
}

// cmdBarrier records one global memory barrier.
func (d vkDev) cmdBarrier(cb unsafe.Pointer, srcStage, dstStage vk.PipelineStageFlagBits, srcAccess, dstAccess vk.AccessFlagBits) {
	C.vr_cmd_barrier(d.p, cb, C.uint32_t(srcStage), C.uint32_t(dstStage), C.uint32_t(srcAccess), C.uint32_t(dstAccess))
}

// cmdDispatch binds pipeline, set and push constants and dispatches.
func (d vkDev) cmdDispatch(cb unsafe.Pointer, pipeline, layout, set uint64, push []byte, groups [3]uint32) {
	var pp unsafe.Pointer
	if len(push) > 0 {
		pp = unsafe.Pointer(&push[0])
	}
	C.vr_cmd_dispatch(d.p, cb, C.uint64_t(pipeline), C.uint64_t(layout), C.uint64_t(set), pp, C.uint32_t(len(push)),
		C.uint32_t(groups[0]), C.uint32_t(groups[1]), C.uint32_t(groups[2]))
}

func (d vkDev) cmdWriteTimestamp(cb unsafe.Pointer, stage vk.PipelineStageFlagBits, pool uint64, q uint32) {
	C.vr_cmd_write_timestamp(d.p, cb, C.uint32_t(stage), C.uint64_t(pool), C.uint32_t(q))
}

func (d vkDev) cmdResetQueryPool(cb unsafe.Pointer, pool uint64, n uint32) {
	C.vr_cmd_reset_query_pool(d.p, cb, C.uint64_t(pool), C.uint32_t(n))
}

// ---- pipelines ----

// createLayouts creates the descriptor-set layout of n storage buffers
// and the pipeline layout over it with pushSize bytes of push constants.
func (d vkDev) createLayouts(n, pushSize uint32) (dsl, pl uint64, r vk.Result) {
	var a, b C.uint64_t
	res := C.vr_create_layouts(d.p, C.uint32_t(n), C.uint32_t(pushSize), &a, &b)
	return uint64(a), uint64(b), vk.Result(res)
}

func (d vkDev) destroyLayouts(dsl, pl uint64) {
	C.vr_destroy_layouts(d.p, C.uint64_t(dsl), C.uint64_t(pl))
}

// createPipeline creates a compute pipeline from SPIR-V code with
// specialization constants spec (constant_id i = spec[i]).
// createPipeline creates a compute pipeline from code with the
// specialization constants spec and, with sgs > 0, that required
// subgroup size.
func (d vkDev) createPipeline(cache uint64, code []uint32, layout uint64, spec []uint32, sgs uint32) (uint64, vk.Result) {
	if len(code) == 0 || len(spec) > 32 {
		return 0, vk.ErrorInitializationFailed
	}
	var sp *C.uint32_t
	if len(spec) > 0 {
		sp = (*C.uint32_t)(unsafe.Pointer(&spec[0]))
	}
	var p C.uint64_t
	r := C.vr_create_pipeline(d.p, C.uint64_t(cache), (*C.uint32_t)(unsafe.Pointer(&code[0])), C.size_t(4*len(code)),
		C.uint64_t(layout), sp, C.uint32_t(len(spec)), C.uint32_t(sgs), &p)
	return uint64(p), vk.Result(r)
}

func (d vkDev) destroyPipeline(p uint64) { C.vr_destroy_pipeline(d.p, C.uint64_t(p)) }

// createPipelineCache creates a pipeline cache seeded with data.
func (d vkDev) createPipelineCache(data []byte) (uint64, vk.Result) {
	var dp unsafe.Pointer
	if len(data) > 0 {
		dp = unsafe.Pointer(&data[0])
	}
	var c C.uint64_t
	r := C.vr_create_pipeline_cache(d.p, dp, C.size_t(len(data)), &c)
	return uint64(c), vk.Result(r)
}

func (d vkDev) destroyPipelineCache(c uint64) { C.vr_destroy_pipeline_cache(d.p, C.uint64_t(c)) }

// pipelineCacheData returns the cache's contents.
func (d vkDev) pipelineCacheData(c uint64) ([]byte, vk.Result) {
	var n C.size_t
	if r := C.vr_pipeline_cache_data(d.p, C.uint64_t(c), &n, nil); r != C.VR_SUCCESS || n == 0 {
		return nil, vk.Result(r)
	}
	buf := make([]byte, n)
	r := C.vr_pipeline_cache_data(d.p, C.uint64_t(c), &n, unsafe.Pointer(&buf[0]))
	if r != C.VR_SUCCESS {
		return nil, vk.Result(r)
	}
	return buf[:n], vk.Success
}

// ---- descriptors ----

// createDescriptorPool creates a pool for maxSets sets of nbuffers storage
// buffers in all.
func (d vkDev) createDescriptorPool(maxSets, nbuffers uint32) (uint64, vk.Result) {
	var p C.uint64_t
	r := C.vr_create_descriptor_pool(d.p, C.uint32_t(maxSets), C.uint32_t(nbuffers), &p)
	return uint64(p), vk.Result(r)
}

func (d vkDev) destroyDescriptorPool(p uint64) { C.vr_destroy_descriptor_pool(d.p, C.uint64_t(p)) }

// bufRange is one storage-buffer binding (VkDescriptorBufferInfo).
type bufRange struct{ buf, off, rng uint64 }

// writeSet allocates a set of layout dsl from pool and binds bufs to its
// bindings 0..len(bufs)-1.
func (d vkDev) writeSet(pool, dsl uint64, bufs []bufRange) (uint64, vk.Result) {
	ci := make([]C.vr_DescriptorBufferInfo, len(bufs))
	for i, b := range bufs {
		ci[i] = C.vr_DescriptorBufferInfo{buffer: C.uint64_t(b.buf), offset: C.uint64_t(b.off), _range: C.uint64_t(b.rng)}
	}
	var bp *C.vr_DescriptorBufferInfo
	if len(ci) > 0 {
		bp = &ci[0]
	}
	var set C.uint64_t
	r := C.vr_write_set(d.p, C.uint64_t(pool), C.uint64_t(dsl), C.uint32_t(len(ci)), bp, &set)
	return uint64(set), vk.Result(r)
}

// ---- timestamps ----

func (d vkDev) createQueryPool(n uint32) (uint64, vk.Result) {
	var p C.uint64_t
	r := C.vr_create_query_pool(d.p, C.uint32_t(n), &p)
	return uint64(p), vk.Result(r)
}

func (d vkDev) destroyQueryPool(p uint64) { C.vr_destroy_query_pool(d.p, C.uint64_t(p)) }

// queryResults waits for and returns len(out) 64-bit timestamps.
func (d vkDev) queryResults(pool uint64, out []uint64) vk.Result {
	if len(out) == 0 {
		return vk.Success
	}
	return vk.Result(C.vr_query_results(d.p, C.uint64_t(pool), C.uint32_t(len(out)), (*C.uint64_t)(unsafe.Pointer(&out[0]))))
}
