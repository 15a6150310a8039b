//go:build cgo

package vulkan

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Minimal mirrors of the Vulkan structs that goki/vulkan does not wrap
// (Vulkan 1.1/1.2 feature and property chains, VK_EXT_debug_utils). The
// layouts follow vulkan_core.h exactly; the Go side only sees vr_caps.

typedef void (*vr_void_fn)(void);
typedef vr_void_fn (*vr_gipa_t)(void* instance, const char* name);

typedef struct { int32_t sType; void* pNext; uint32_t f[55]; } vr_features2;
typedef struct { int32_t sType; void* pNext; uint32_t f[12]; } vr_vk11features;
typedef struct { int32_t sType; void* pNext; uint32_t f[47]; } vr_vk12features;
typedef struct { int32_t sType; void* pNext; uint32_t subgroupSize, supportedStages, supportedOperations, quadOps; } vr_subgroupprops;
typedef struct { int32_t sType; void* pNext; uint32_t maxPerSetDescriptors; uint64_t maxMemoryAllocationSize; } vr_maint3props;
typedef struct { int32_t sType; void* pNext; uint32_t driverID; char driverName[256]; char driverInfo[256]; uint8_t conformance[4]; } vr_driverprops;
typedef struct { int32_t sType; void* pNext; uint8_t props[4096]; } vr_props2;

// Indices in VkPhysicalDeviceFeatures / Vulkan11 / Vulkan12 features.
enum {
	F_SHADER_FLOAT64 = 39, F_SHADER_INT64 = 40, F_SHADER_INT16 = 41,
	F11_STORAGE_BUFFER_16BIT = 0,
	F12_STORAGE_BUFFER_8BIT = 2, F12_SHADER_FLOAT16 = 7, F12_SHADER_INT8 = 8,
	F12_VULKAN_MEMORY_MODEL = 41
};

// VK_NV_cooperative_matrix.
typedef struct { int32_t sType; void* pNext; uint32_t cooperativeMatrix, robustBufferAccess; } vr_coopfeatures;
typedef struct { int32_t sType; void* pNext; uint32_t M, N, K, A, B, C, D, scope; } vr_coopprops;

typedef struct {
	uint32_t hasFeatures2, vk12, nvCoop; // nvCoop: in: the device has VK_NV_cooperative_matrix
	uint32_t coopMatrix, vkMemModel;
	uint32_t storage16, shaderFloat16, storage8, shaderInt8, shaderInt64, shaderFloat64, shaderInt16;
	uint32_t subgroupSize, subgroupOps, driverID;
	uint64_t maxMemoryAllocationSize;
	char driverName[256];
	char driverInfo[256];
} vr_caps;

static void vr_query_caps(void* gipa, void* inst, void* pd, uint32_t apiVersion, uint32_t nvCoop, vr_caps* out) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	memset(out, 0, sizeof(*out));
	out->nvCoop = nvCoop;
	void (*getF2)(void*, void*) = (void (*)(void*, void*))g(inst, "vkGetPhysicalDeviceFeatures2");
	void (*getP2)(void*, void*) = (void (*)(void*, void*))g(inst, "vkGetPhysicalDeviceProperties2");
	if (!getF2 || !getP2 || apiVersion < ((1u << 22) | (1u << 12))) return;
	out->hasFeatures2 = 1;
	out->vk12 = apiVersion >= ((1u << 22) | (2u << 12));
	vr_features2 f2; vr_vk11features f11; vr_vk12features f12; vr_coopfeatures cf;
	memset(&f2, 0, sizeof f2); memset(&f11, 0, sizeof f11); memset(&f12, 0, sizeof f12); memset(&cf, 0, sizeof cf);
	f2.sType = 1000059000; f11.sType = 49; f12.sType = 51; cf.sType = 1000249000;
	f2.pNext = &f11;
	if (out->vk12) f11.pNext = &f12;
	if (out->vk12 && nvCoop) f12.pNext = &cf;
	getF2(pd, &f2);
	out->coopMatrix = cf.cooperativeMatrix;
	out->vkMemModel = f12.f[F12_VULKAN_MEMORY_MODEL];
	out->storage16 = f11.f[F11_STORAGE_BUFFER_16BIT];
	out->storage8 = f12.f[F12_STORAGE_BUFFER_8BIT];
	out->shaderFloat16 = f12.f[F12_SHADER_FLOAT16];
	out->shaderInt8 = f12.f[F12_SHADER_INT8];
	out->shaderFloat64 = f2.f[F_SHADER_FLOAT64];
	out->shaderInt64 = f2.f[F_SHADER_INT64];
	out->shaderInt16 = f2.f[F_SHADER_INT16];

	vr_props2* p2 = (vr_props2*)calloc(1, sizeof(vr_props2));
	vr_subgroupprops sg; vr_maint3props m3; vr_driverprops drv;
	memset(&sg, 0, sizeof sg); memset(&m3, 0, sizeof m3); memset(&drv, 0, sizeof drv);
	p2->sType = 1000059001; sg.sType = 1000094000; m3.sType = 1000168000; drv.sType = 1000196000;
	p2->pNext = &sg; sg.pNext = &m3;
	if (out->vk12) m3.pNext = &drv;
	getP2(pd, p2);
	free(p2);
	out->subgroupSize = sg.subgroupSize;
	out->subgroupOps = sg.supportedOperations;
	out->maxMemoryAllocationSize = m3.maxMemoryAllocationSize;
	out->driverID = drv.driverID;
	memcpy(out->driverName, drv.driverName, 256); out->driverName[255] = 0;
	memcpy(out->driverInfo, drv.driverInfo, 256); out->driverInfo[255] = 0;
}

// vr_device_chain allocates the pNext chain for vkCreateDevice enabling the
// given features. Free it with free() after the device is created.
static void* vr_device_chain(const vr_caps* en) {
	struct chain { vr_features2 f2; vr_vk11features f11; vr_vk12features f12; vr_coopfeatures cf; };
	struct chain* c = (struct chain*)calloc(1, sizeof(struct chain));
	c->f2.sType = 1000059000; c->f11.sType = 49; c->f12.sType = 51; c->cf.sType = 1000249000;
	c->f2.pNext = &c->f11;
	if (en->vk12) c->f11.pNext = &c->f12;
	if (en->vk12 && en->coopMatrix) {
		c->f12.pNext = &c->cf;
		c->cf.cooperativeMatrix = 1;
	}
	c->f12.f[F12_VULKAN_MEMORY_MODEL] = en->vkMemModel;
	c->f2.f[F_SHADER_FLOAT64] = en->shaderFloat64;
	c->f2.f[F_SHADER_INT64] = en->shaderInt64;
	c->f2.f[F_SHADER_INT16] = en->shaderInt16;
	c->f11.f[F11_STORAGE_BUFFER_16BIT] = en->storage16;
	c->f12.f[F12_STORAGE_BUFFER_8BIT] = en->storage8;
	c->f12.f[F12_SHADER_FLOAT16] = en->shaderFloat16;
	c->f12.f[F12_SHADER_INT8] = en->shaderInt8;
	return c;
}

// vr_coop_props lists up to max VkCooperativeMatrixPropertiesNV of pd.
static uint32_t vr_coop_props(void* gipa, void* inst, void* pd, vr_coopprops* out, uint32_t max) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	int32_t (*f)(void*, uint32_t*, vr_coopprops*) = (int32_t (*)(void*, uint32_t*, vr_coopprops*))g(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	if (!f) return 0;
	uint32_t n = 0;
	if (f(pd, &n, NULL) != 0 && n == 0) return 0;
	if (n > max) n = max;
	for (uint32_t i = 0; i < n; i++) { memset(&out[i], 0, sizeof out[i]); out[i].sType = 1000249001; }
	int32_t r = f(pd, &n, out);
	if (r != 0 && r != 5) return 0; // VK_INCOMPLETE is fine
	return n;
}

static uint32_t vr_instance_version(void* gipa) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	int32_t (*ev)(uint32_t*) = (int32_t (*)(uint32_t*))g(NULL, "vkEnumerateInstanceVersion");
	uint32_t v = 1u << 22;
	if (ev) ev(&v);
	return v;
}

// VK_EXT_debug_utils.
typedef struct { int32_t sType; const void* pNext; uint32_t flags; const char* pMessageIdName; int32_t messageIdNumber; const char* pMessage; } vr_dbg_data;
typedef uint32_t (*vr_dbg_cb_t)(uint32_t, uint32_t, const vr_dbg_data*, void*);
typedef struct { int32_t sType; const void* pNext; uint32_t flags; uint32_t severity; uint32_t types; vr_dbg_cb_t cb; void* user; } vr_dbg_info;

extern uint32_t vrunDebugCallback(uint32_t severity, uint32_t types, char* msg, uintptr_t user);

static uint32_t vr_dbg_cb(uint32_t sev, uint32_t types, const vr_dbg_data* d, void* user) {
	vrunDebugCallback(sev, types, (char*)(d && d->pMessage ? d->pMessage : ""), (uintptr_t)user);
	return 0;
}

// vr_messenger_info allocates a messenger create-info reporting warnings
// and errors; it also serves as the pNext of VkInstanceCreateInfo.
static void* vr_messenger_info(uintptr_t user) {
	vr_dbg_info* i = (vr_dbg_info*)calloc(1, sizeof(vr_dbg_info));
	i->sType = 1000128004;
	i->severity = 0x100 | 0x1000; // WARNING | ERROR
	i->types = 0x1 | 0x2 | 0x4;   // GENERAL | VALIDATION | PERFORMANCE
	i->cb = vr_dbg_cb;
	i->user = (void*)user;
	return i;
}

static int32_t vr_create_messenger(void* gipa, void* inst, void* info, uint64_t* out) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	int32_t (*f)(void*, const void*, const void*, uint64_t*) = (int32_t (*)(void*, const void*, const void*, uint64_t*))g(inst, "vkCreateDebugUtilsMessengerEXT");
	if (!f) return -7; // VK_ERROR_EXTENSION_NOT_PRESENT
	return f(inst, info, NULL, out);
}

// vr_create_pipeline creates one compute pipeline, building the
// specialization map in C memory (no Go pointers inside C structs).
typedef struct { int32_t sType; const void* pNext; uint32_t flags; uint32_t stage; uint64_t module; const char* pName; const void* pSpec; } vr_stage_info;
typedef struct { int32_t sType; const void* pNext; uint32_t flags; vr_stage_info stage; uint64_t layout; uint64_t base; int32_t baseIndex; } vr_pipe_info;
typedef struct { uint32_t id, offset; size_t size; } vr_spec_entry;
typedef struct { uint32_t count; const vr_spec_entry* entries; size_t dataSize; const void* data; } vr_spec_info;

static int32_t vr_create_pipeline(void* gipa, void* inst, void* dev, uint64_t cache, uint64_t module, uint64_t layout,
		const uint32_t* spec, uint32_t nspec, uint64_t* out) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	vr_void_fn (*gdpa)(void*, const char*) = (vr_void_fn (*)(void*, const char*))g(inst, "vkGetDeviceProcAddr");
	if (!gdpa) return -3;
	int32_t (*create)(void*, uint64_t, uint32_t, const vr_pipe_info*, const void*, uint64_t*) =
		(int32_t (*)(void*, uint64_t, uint32_t, const vr_pipe_info*, const void*, uint64_t*))gdpa(dev, "vkCreateComputePipelines");
	if (!create) return -3;
	vr_spec_entry entries[16];
	if (nspec > 16) nspec = 16;
	for (uint32_t i = 0; i < nspec; i++) { entries[i].id = i; entries[i].offset = 4 * i; entries[i].size = 4; }
	vr_spec_info si = { nspec, entries, 4 * (size_t)nspec, spec };
	vr_pipe_info pi;
	memset(&pi, 0, sizeof pi);
	pi.sType = 29; // VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO
	pi.stage.sType = 18; // VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO
	pi.stage.stage = 0x20; // VK_SHADER_STAGE_COMPUTE_BIT
	pi.stage.module = module;
	pi.stage.pName = "main";
	pi.stage.pSpec = nspec ? &si : NULL;
	pi.layout = layout;
	pi.baseIndex = -1;
	return create(dev, cache, 1, &pi, NULL, out);
}

static void vr_destroy_messenger(void* gipa, void* inst, uint64_t m) {
	vr_gipa_t g = (vr_gipa_t)gipa;
	void (*f)(void*, uint64_t, const void*) = (void (*)(void*, uint64_t, const void*))g(inst, "vkDestroyDebugUtilsMessengerEXT");
	if (f) f(inst, m, NULL);
}
*/
import "C"

import (
	"unsafe"
)

// caps are the Vulkan 1.1/1.2 capabilities that goki/vulkan cannot query.
type caps struct {
	hasFeatures2, vk12                                                                bool
	coopMatrix, vkMemModel                                                            bool // VK_NV_cooperative_matrix feature, vulkanMemoryModel
	storage16, shaderFloat16, storage8, shaderInt8, shaderInt64, shaderFloat64, int16 bool
	subgroupSize, subgroupOps, driverID                                               uint32
	maxAlloc                                                                          uint64
	driverName, driverInfo                                                            string
}

func queryCaps(gipa, inst, pd unsafe.Pointer, apiVersion uint32, nvCoop bool) caps {
	var c C.vr_caps
	nc := C.uint32_t(0)
	if nvCoop {
		nc = 1
	}
	C.vr_query_caps(gipa, inst, pd, C.uint32_t(apiVersion), nc, &c)
	return caps{
		hasFeatures2: c.hasFeatures2 != 0, vk12: c.vk12 != 0,
		coopMatrix: c.coopMatrix != 0, vkMemModel: c.vkMemModel != 0,
		storage16: c.storage16 != 0, shaderFloat16: c.shaderFloat16 != 0,
		storage8: c.storage8 != 0, shaderInt8: c.shaderInt8 != 0,
		shaderInt64: c.shaderInt64 != 0, shaderFloat64: c.shaderFloat64 != 0, int16: c.shaderInt16 != 0,
		subgroupSize: uint32(c.subgroupSize), subgroupOps: uint32(c.subgroupOps), driverID: uint32(c.driverID),
		maxAlloc:   uint64(c.maxMemoryAllocationSize),
		driverName: C.GoString(&c.driverName[0]), driverInfo: C.GoString(&c.driverInfo[0]),
	}
}

// deviceChain returns a C-allocated feature chain enabling c's features;
// the caller frees it with cFree.
func deviceChain(c caps) unsafe.Pointer {
	b := func(v bool) C.uint32_t {
		if v {
			return 1
		}
		return 0
	}
	var en C.vr_caps
	en.vk12 = b(c.vk12)
	en.storage16, en.shaderFloat16 = b(c.storage16), b(c.shaderFloat16)
	en.storage8, en.shaderInt8 = b(c.storage8), b(c.shaderInt8)
	en.shaderInt64, en.shaderFloat64, en.shaderInt16 = b(c.shaderInt64), b(c.shaderFloat64), b(c.int16)
	en.coopMatrix, en.vkMemModel = b(c.coopMatrix), b(c.vkMemModel)
	return C.vr_device_chain(&en)
}

// coopProps returns the VkCooperativeMatrixPropertiesNV of pd.
func coopProps(inst, pd unsafe.Pointer) []coopMatProp {
	var buf [64]C.vr_coopprops
	n := int(C.vr_coop_props(gipa, inst, pd, &buf[0], 64))
	out := make([]coopMatProp, n)
	for i := range out {
		p := buf[i]
		out[i] = coopMatProp{M: uint32(p.M), N: uint32(p.N), K: uint32(p.K), A: uint32(p.A), B: uint32(p.B), C: uint32(p.C), D: uint32(p.D), Scope: uint32(p.scope)}
	}
	return out
}

func cFree(p unsafe.Pointer) { C.free(p) }

// createPipeline calls vkCreateComputePipelines for one pipeline. The
// handles are passed as their 64-bit values.
func createPipeline(inst, dev unsafe.Pointer, cache, module, layout uint64, spec []uint32) (uint64, int32) {
	cs := (*C.uint32_t)(C.calloc(C.size_t(len(spec)+1), 4))
	defer C.free(unsafe.Pointer(cs))
	copy(unsafe.Slice((*uint32)(unsafe.Pointer(cs)), len(spec)), spec)
	var out C.uint64_t
	r := C.vr_create_pipeline(gipa, inst, dev, C.uint64_t(cache), C.uint64_t(module), C.uint64_t(layout), cs, C.uint32_t(len(spec)), &out)
	return uint64(out), int32(r)
}

// cAlloc returns zeroed C memory holding a copy of b (never nil).
func cAlloc(b []byte) unsafe.Pointer {
	p := C.calloc(1, C.size_t(len(b)+1))
	if len(b) > 0 {
		copy(unsafe.Slice((*byte)(p), len(b)), b)
	}
	return p
}

func instanceVersion(gipa unsafe.Pointer) uint32 { return uint32(C.vr_instance_version(gipa)) }

func messengerInfo(id uintptr) unsafe.Pointer { return C.vr_messenger_info(C.uintptr_t(id)) }

func createMessenger(gipa, inst, info unsafe.Pointer) (uint64, int32) {
	var m C.uint64_t
	r := C.vr_create_messenger(gipa, inst, info, &m)
	return uint64(m), int32(r)
}

func destroyMessenger(gipa, inst unsafe.Pointer, m uint64) {
	C.vr_destroy_messenger(gipa, inst, C.uint64_t(m))
}
