// vkshim.h: vrun's own C calls into Vulkan.
//
// Every Vulkan function that rt/vulkan calls goes through a static function
// here. Create-infos and other struct arguments are built on the C stack
// (or in C memory freed before returning) from plain scalar arguments, so
// no struct argument is ever owned by Go: neither a Go finalizer nor the
// garbage collector can free or move one while the driver reads it. Go
// memory is only passed as a flat buffer of plain data (SPIR-V words, push
// constants, cache bytes, query results) that the call itself reads or
// writes, as cgo allows.
//
// Struct types are minimal mirrors of vulkan_core.h (the Khronos Vulkan
// headers, Apache-2.0 OR MIT): vr_X mirrors VkX field for field, and
// VR_X is VK_X's value. TestShimLayouts compiles this header beside the
// real vulkan_core.h (shipped by github.com/goki/vulkan) and checks every
// size, field offset and constant.
//
// Handles: dispatchable ones (instance, physical device, device, queue,
// command buffer) are void*; non-dispatchable ones are uint64_t, their
// type on 32-bit platforms and of the same size and calling convention as
// the pointer they are on 64-bit ones.

#ifndef VRUN_VKSHIM_H
#define VRUN_VKSHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32) && !defined(_WIN64)
#define VR_CALL __stdcall
#else
#define VR_CALL
#endif

typedef void (VR_CALL *vr_pfn)(void);
typedef vr_pfn (VR_CALL *vr_gipa_t)(void* instance, const char* name);

// ---- constants ----

#define VR_SUCCESS 0
#define VR_NOT_READY 1
#define VR_TIMEOUT 2
#define VR_INCOMPLETE 5
#define VR_ERROR_OUT_OF_HOST_MEMORY (-1)
#define VR_ERROR_INITIALIZATION_FAILED (-3)
#define VR_ERROR_EXTENSION_NOT_PRESENT (-7)

#define VR_STRUCTURE_TYPE_APPLICATION_INFO 0
#define VR_STRUCTURE_TYPE_INSTANCE_CREATE_INFO 1
#define VR_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO 2
#define VR_STRUCTURE_TYPE_DEVICE_CREATE_INFO 3
#define VR_STRUCTURE_TYPE_SUBMIT_INFO 4
#define VR_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO 5
#define VR_STRUCTURE_TYPE_FENCE_CREATE_INFO 8
#define VR_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO 11
#define VR_STRUCTURE_TYPE_BUFFER_CREATE_INFO 12
#define VR_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO 16
#define VR_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO 17
#define VR_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO 18
#define VR_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO 29
#define VR_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO 30
#define VR_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO 32
#define VR_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO 33
#define VR_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO 34
#define VR_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET 35
#define VR_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO 39
#define VR_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO 40
#define VR_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO 42
#define VR_STRUCTURE_TYPE_MEMORY_BARRIER 46
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES 49
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES 51
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 1000059000
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2 1000059001
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES 1000094000
#define VR_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT 1000128004
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES 1000168000
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES 1000071004
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES 1000196000
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES 1000225000
#define VR_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO 1000225001
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES 1000225002
#define VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV 1000249000
#define VR_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV 1000249001

#define VR_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR 0x1
#define VR_SHADER_STAGE_COMPUTE_BIT 0x20
#define VR_DESCRIPTOR_TYPE_STORAGE_BUFFER 7
#define VR_PIPELINE_BIND_POINT_COMPUTE 1
#define VR_COMMAND_BUFFER_LEVEL_PRIMARY 0
#define VR_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT 0x2
#define VR_SHARING_MODE_EXCLUSIVE 0
#define VR_QUERY_TYPE_TIMESTAMP 2
#define VR_QUERY_RESULT_64_BIT 0x1
#define VR_QUERY_RESULT_WAIT_BIT 0x2
#define VR_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT 0x100
#define VR_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT 0x1000
#define VR_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT 0x1
#define VR_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT 0x2
#define VR_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT 0x4

// ---- struct mirrors ----

typedef struct {
	int32_t sType;
	const void* pNext;
	const char* pApplicationName;
	uint32_t applicationVersion;
	const char* pEngineName;
	uint32_t engineVersion;
	uint32_t apiVersion;
} vr_ApplicationInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	const vr_ApplicationInfo* pApplicationInfo;
	uint32_t enabledLayerCount;
	const char* const* ppEnabledLayerNames;
	uint32_t enabledExtensionCount;
	const char* const* ppEnabledExtensionNames;
} vr_InstanceCreateInfo;

typedef struct {
	char layerName[256];
	uint32_t specVersion;
	uint32_t implementationVersion;
	char description[256];
} vr_LayerProperties;

typedef struct {
	char extensionName[256];
	uint32_t specVersion;
} vr_ExtensionProperties;

typedef struct {
	uint32_t maxImageDimension1D;
	uint32_t maxImageDimension2D;
	uint32_t maxImageDimension3D;
	uint32_t maxImageDimensionCube;
	uint32_t maxImageArrayLayers;
	uint32_t maxTexelBufferElements;
	uint32_t maxUniformBufferRange;
	uint32_t maxStorageBufferRange;
	uint32_t maxPushConstantsSize;
	uint32_t maxMemoryAllocationCount;
	uint32_t maxSamplerAllocationCount;
	uint64_t bufferImageGranularity;
	uint64_t sparseAddressSpaceSize;
	uint32_t maxBoundDescriptorSets;
	uint32_t maxPerStageDescriptorSamplers;
	uint32_t maxPerStageDescriptorUniformBuffers;
	uint32_t maxPerStageDescriptorStorageBuffers;
	uint32_t maxPerStageDescriptorSampledImages;
	uint32_t maxPerStageDescriptorStorageImages;
	uint32_t maxPerStageDescriptorInputAttachments;
	uint32_t maxPerStageResources;
	uint32_t maxDescriptorSetSamplers;
	uint32_t maxDescriptorSetUniformBuffers;
	uint32_t maxDescriptorSetUniformBuffersDynamic;
	uint32_t maxDescriptorSetStorageBuffers;
	uint32_t maxDescriptorSetStorageBuffersDynamic;
	uint32_t maxDescriptorSetSampledImages;
	uint32_t maxDescriptorSetStorageImages;
	uint32_t maxDescriptorSetInputAttachments;
	uint32_t maxVertexInputAttributes;
	uint32_t maxVertexInputBindings;
	uint32_t maxVertexInputAttributeOffset;
	uint32_t maxVertexInputBindingStride;
	uint32_t maxVertexOutputComponents;
	uint32_t maxTessellationGenerationLevel;
	uint32_t maxTessellationPatchSize;
	uint32_t maxTessellationControlPerVertexInputComponents;
	uint32_t maxTessellationControlPerVertexOutputComponents;
	uint32_t maxTessellationControlPerPatchOutputComponents;
	uint32_t maxTessellationControlTotalOutputComponents;
	uint32_t maxTessellationEvaluationInputComponents;
	uint32_t maxTessellationEvaluationOutputComponents;
	uint32_t maxGeometryShaderInvocations;
	uint32_t maxGeometryInputComponents;
	uint32_t maxGeometryOutputComponents;
	uint32_t maxGeometryOutputVertices;
	uint32_t maxGeometryTotalOutputComponents;
	uint32_t maxFragmentInputComponents;
	uint32_t maxFragmentOutputAttachments;
	uint32_t maxFragmentDualSrcAttachments;
	uint32_t maxFragmentCombinedOutputResources;
	uint32_t maxComputeSharedMemorySize;
	uint32_t maxComputeWorkGroupCount[3];
	uint32_t maxComputeWorkGroupInvocations;
	uint32_t maxComputeWorkGroupSize[3];
	uint32_t subPixelPrecisionBits;
	uint32_t subTexelPrecisionBits;
	uint32_t mipmapPrecisionBits;
	uint32_t maxDrawIndexedIndexValue;
	uint32_t maxDrawIndirectCount;
	float maxSamplerLodBias;
	float maxSamplerAnisotropy;
	uint32_t maxViewports;
	uint32_t maxViewportDimensions[2];
	float viewportBoundsRange[2];
	uint32_t viewportSubPixelBits;
	size_t minMemoryMapAlignment;
	uint64_t minTexelBufferOffsetAlignment;
	uint64_t minUniformBufferOffsetAlignment;
	uint64_t minStorageBufferOffsetAlignment;
	int32_t minTexelOffset;
	uint32_t maxTexelOffset;
	int32_t minTexelGatherOffset;
	uint32_t maxTexelGatherOffset;
	float minInterpolationOffset;
	float maxInterpolationOffset;
	uint32_t subPixelInterpolationOffsetBits;
	uint32_t maxFramebufferWidth;
	uint32_t maxFramebufferHeight;
	uint32_t maxFramebufferLayers;
	uint32_t framebufferColorSampleCounts;
	uint32_t framebufferDepthSampleCounts;
	uint32_t framebufferStencilSampleCounts;
	uint32_t framebufferNoAttachmentsSampleCounts;
	uint32_t maxColorAttachments;
	uint32_t sampledImageColorSampleCounts;
	uint32_t sampledImageIntegerSampleCounts;
	uint32_t sampledImageDepthSampleCounts;
	uint32_t sampledImageStencilSampleCounts;
	uint32_t storageImageSampleCounts;
	uint32_t maxSampleMaskWords;
	uint32_t timestampComputeAndGraphics;
	float timestampPeriod;
	uint32_t maxClipDistances;
	uint32_t maxCullDistances;
	uint32_t maxCombinedClipAndCullDistances;
	uint32_t discreteQueuePriorities;
	float pointSizeRange[2];
	float lineWidthRange[2];
	float pointSizeGranularity;
	float lineWidthGranularity;
	uint32_t strictLines;
	uint32_t standardSampleLocations;
	uint64_t optimalBufferCopyOffsetAlignment;
	uint64_t optimalBufferCopyRowPitchAlignment;
	uint64_t nonCoherentAtomSize;
} vr_PhysicalDeviceLimits;

typedef struct {
	uint32_t residencyStandard2DBlockShape;
	uint32_t residencyStandard2DMultisampleBlockShape;
	uint32_t residencyStandard3DBlockShape;
	uint32_t residencyAlignedMipSize;
	uint32_t residencyNonResidentStrict;
} vr_PhysicalDeviceSparseProperties;

typedef struct {
	uint32_t apiVersion;
	uint32_t driverVersion;
	uint32_t vendorID;
	uint32_t deviceID;
	int32_t deviceType;
	char deviceName[256];
	uint8_t pipelineCacheUUID[16];
	vr_PhysicalDeviceLimits limits;
	vr_PhysicalDeviceSparseProperties sparseProperties;
} vr_PhysicalDeviceProperties;

typedef struct {
	uint32_t propertyFlags;
	uint32_t heapIndex;
} vr_MemoryType;

typedef struct {
	uint64_t size;
	uint32_t flags;
} vr_MemoryHeap;

typedef struct {
	uint32_t memoryTypeCount;
	vr_MemoryType memoryTypes[32];
	uint32_t memoryHeapCount;
	vr_MemoryHeap memoryHeaps[16];
} vr_PhysicalDeviceMemoryProperties;

typedef struct {
	uint32_t width;
	uint32_t height;
	uint32_t depth;
} vr_Extent3D;

typedef struct {
	uint32_t queueFlags;
	uint32_t queueCount;
	uint32_t timestampValidBits;
	vr_Extent3D minImageTransferGranularity;
} vr_QueueFamilyProperties;

// Feature and property chains. The feature structs hold their VkBool32
// members as arrays, indexed by the VR_F* positions below (size-only
// mirrors: the layout test checks their size and each index's offset).
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t features[55]; // VkPhysicalDeviceFeatures
} vr_PhysicalDeviceFeatures2; /* size only */

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t f[12];
} vr_PhysicalDeviceVulkan11Features; /* size only */

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t f[47];
} vr_PhysicalDeviceVulkan12Features; /* size only */

// Indices of VkBool32 members in VkPhysicalDeviceFeatures / Vulkan11 /
// Vulkan12 features (checked by the layout test).
enum {
	VR_F_SHADER_FLOAT64 = 39, VR_F_SHADER_INT64 = 40, VR_F_SHADER_INT16 = 41,
	VR_F11_STORAGE_BUFFER_16BIT = 0,
	VR_F12_STORAGE_BUFFER_8BIT = 2, VR_F12_SHADER_FLOAT16 = 7, VR_F12_SHADER_INT8 = 8,
	VR_F12_VULKAN_MEMORY_MODEL = 41, VR_F12_VULKAN_MEMORY_MODEL_DEVICE_SCOPE = 42
};

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t cooperativeMatrix;
	uint32_t cooperativeMatrixRobustBufferAccess;
} vr_PhysicalDeviceCooperativeMatrixFeaturesNV;

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t MSize;
	uint32_t NSize;
	uint32_t KSize;
	int32_t AType;
	int32_t BType;
	int32_t CType;
	int32_t DType;
	int32_t scope;
} vr_CooperativeMatrixPropertiesNV;

// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 (Vulkan headers
// 1.3.255 and 1.3.301: newer than the vulkan_core.h that the layout test
// checks against, so these mirrors have lower-case names that it skips and
// their sTypes are enumerators; the values are the registry's).
enum {
	VR_ST_COOPMAT_FEATURES_KHR = 1000506000,
	VR_ST_COOPMAT_PROPERTIES_KHR = 1000506001,
	VR_ST_COOPMAT2_FEATURES_NV = 1000593000,
	VR_ST_COOPMAT_FLEX_PROPERTIES_NV = 1000593001,
	VR_ST_COOPMAT2_PROPERTIES_NV = 1000593002,
};

// VkPhysicalDeviceCooperativeMatrixFeaturesKHR
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t cooperativeMatrix;
	uint32_t cooperativeMatrixRobustBufferAccess;
} vr_coopmatFeaturesKHR;

// VkCooperativeMatrixPropertiesKHR
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t MSize, NSize, KSize;
	int32_t AType, BType, CType, ResultType;
	uint32_t saturatingAccumulation;
	int32_t scope;
} vr_coopmatPropsKHR;

// VkPhysicalDeviceCooperativeMatrix2FeaturesNV
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t workgroupScope, flexibleDimensions, reductions, conversions, perElementOperations,
		tensorAddressing, blockLoads;
} vr_coopmat2FeaturesNV;

// VkPhysicalDeviceCooperativeMatrix2PropertiesNV
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t workgroupScopeMaxWorkgroupSize, flexibleDimensionsMaxDimension, workgroupScopeReservedSharedMemory;
} vr_coopmat2PropsNV;

// VkCooperativeMatrixFlexibleDimensionsPropertiesNV
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t MGranularity, NGranularity, KGranularity;
	int32_t AType, BType, CType, ResultType;
	uint32_t saturatingAccumulation;
	int32_t scope;
	uint32_t workgroupInvocations;
} vr_coopmatFlexPropsNV;

typedef struct {
	int32_t sType;
	void* pNext;
	vr_PhysicalDeviceProperties properties;
} vr_PhysicalDeviceProperties2;

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t subgroupSize;
	uint32_t supportedStages;
	uint32_t supportedOperations;
	uint32_t quadOperationsInAllStages;
} vr_PhysicalDeviceSubgroupProperties;

// Subgroup size control (Vulkan 1.3, VK_EXT_subgroup_size_control): a
// pipeline can require the subgroup size its layout assumes.
typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t subgroupSizeControl;
	uint32_t computeFullSubgroups;
} vr_PhysicalDeviceSubgroupSizeControlFeatures;

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t minSubgroupSize;
	uint32_t maxSubgroupSize;
	uint32_t maxComputeWorkgroupSubgroups;
	uint32_t requiredSubgroupSizeStages;
} vr_PhysicalDeviceSubgroupSizeControlProperties;

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t requiredSubgroupSize;
} vr_PipelineShaderStageRequiredSubgroupSizeCreateInfo;

typedef struct {
	int32_t sType;
	void* pNext;
	uint32_t maxPerSetDescriptors;
	uint64_t maxMemoryAllocationSize;
} vr_PhysicalDeviceMaintenance3Properties;

typedef struct {
	int32_t sType;
	void* pNext;
	uint8_t deviceUUID[16];
	uint8_t driverUUID[16];
	uint8_t deviceLUID[8];
	uint32_t deviceNodeMask;
	uint32_t deviceLUIDValid;
} vr_PhysicalDeviceIDProperties;

typedef struct {
	uint8_t major;
	uint8_t minor;
	uint8_t subminor;
	uint8_t patch;
} vr_ConformanceVersion;

typedef struct {
	int32_t sType;
	void* pNext;
	int32_t driverID;
	char driverName[256];
	char driverInfo[256];
	vr_ConformanceVersion conformanceVersion;
} vr_PhysicalDeviceDriverProperties;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t queueFamilyIndex;
	uint32_t queueCount;
	const float* pQueuePriorities;
} vr_DeviceQueueCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t queueCreateInfoCount;
	const vr_DeviceQueueCreateInfo* pQueueCreateInfos;
	uint32_t enabledLayerCount;
	const char* const* ppEnabledLayerNames;
	uint32_t enabledExtensionCount;
	const char* const* ppEnabledExtensionNames;
	const void* pEnabledFeatures;
} vr_DeviceCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint64_t size;
	uint32_t usage;
	int32_t sharingMode;
	uint32_t queueFamilyIndexCount;
	const uint32_t* pQueueFamilyIndices;
} vr_BufferCreateInfo;

typedef struct {
	uint64_t size;
	uint64_t alignment;
	uint32_t memoryTypeBits;
} vr_MemoryRequirements;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint64_t allocationSize;
	uint32_t memoryTypeIndex;
} vr_MemoryAllocateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t queueFamilyIndex;
} vr_CommandPoolCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint64_t commandPool;
	int32_t level;
	uint32_t commandBufferCount;
} vr_CommandBufferAllocateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	const void* pInheritanceInfo;
} vr_CommandBufferBeginInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
} vr_FenceCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t waitSemaphoreCount;
	const uint64_t* pWaitSemaphores;
	const uint32_t* pWaitDstStageMask;
	uint32_t commandBufferCount;
	void* const* pCommandBuffers;
	uint32_t signalSemaphoreCount;
	const uint64_t* pSignalSemaphores;
} vr_SubmitInfo;

typedef struct {
	uint64_t srcOffset;
	uint64_t dstOffset;
	uint64_t size;
} vr_BufferCopy;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t srcAccessMask;
	uint32_t dstAccessMask;
} vr_MemoryBarrier;

typedef struct {
	uint32_t binding;
	int32_t descriptorType;
	uint32_t descriptorCount;
	uint32_t stageFlags;
	const uint64_t* pImmutableSamplers;
} vr_DescriptorSetLayoutBinding;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t bindingCount;
	const vr_DescriptorSetLayoutBinding* pBindings;
} vr_DescriptorSetLayoutCreateInfo;

typedef struct {
	uint32_t stageFlags;
	uint32_t offset;
	uint32_t size;
} vr_PushConstantRange;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t setLayoutCount;
	const uint64_t* pSetLayouts;
	uint32_t pushConstantRangeCount;
	const vr_PushConstantRange* pPushConstantRanges;
} vr_PipelineLayoutCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	size_t codeSize;
	const uint32_t* pCode;
} vr_ShaderModuleCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	size_t initialDataSize;
	const void* pInitialData;
} vr_PipelineCacheCreateInfo;

typedef struct {
	uint32_t constantID;
	uint32_t offset;
	size_t size;
} vr_SpecializationMapEntry;

typedef struct {
	uint32_t mapEntryCount;
	const vr_SpecializationMapEntry* pMapEntries;
	size_t dataSize;
	const void* pData;
} vr_SpecializationInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t stage;
	uint64_t module;
	const char* pName;
	const vr_SpecializationInfo* pSpecializationInfo;
} vr_PipelineShaderStageCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	vr_PipelineShaderStageCreateInfo stage;
	uint64_t layout;
	uint64_t basePipelineHandle;
	int32_t basePipelineIndex;
} vr_ComputePipelineCreateInfo;

typedef struct {
	int32_t type;
	uint32_t descriptorCount;
} vr_DescriptorPoolSize;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t maxSets;
	uint32_t poolSizeCount;
	const vr_DescriptorPoolSize* pPoolSizes;
} vr_DescriptorPoolCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint64_t descriptorPool;
	uint32_t descriptorSetCount;
	const uint64_t* pSetLayouts;
} vr_DescriptorSetAllocateInfo;

typedef struct {
	uint64_t buffer;
	uint64_t offset;
	uint64_t range;
} vr_DescriptorBufferInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint64_t dstSet;
	uint32_t dstBinding;
	uint32_t dstArrayElement;
	uint32_t descriptorCount;
	int32_t descriptorType;
	const void* pImageInfo;
	const vr_DescriptorBufferInfo* pBufferInfo;
	const uint64_t* pTexelBufferView;
} vr_WriteDescriptorSet;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	int32_t queryType;
	uint32_t queryCount;
	uint32_t pipelineStatistics;
} vr_QueryPoolCreateInfo;

typedef struct {
	int32_t sType;
	const void* pNext;
	int32_t objectType;
	uint64_t objectHandle;
	const char* pObjectName;
} vr_DebugUtilsObjectNameInfoEXT;

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	const char* pMessageIdName;
	int32_t messageIdNumber;
	const char* pMessage;
	uint32_t queueLabelCount;
	const void* pQueueLabels;
	uint32_t cmdBufLabelCount;
	const void* pCmdBufLabels;
	uint32_t objectCount;
	const vr_DebugUtilsObjectNameInfoEXT* pObjects;
} vr_DebugUtilsMessengerCallbackDataEXT;

typedef uint32_t (VR_CALL *vr_debug_cb_t)(uint32_t severity, uint32_t types, const vr_DebugUtilsMessengerCallbackDataEXT* data, void* user);

typedef struct {
	int32_t sType;
	const void* pNext;
	uint32_t flags;
	uint32_t messageSeverity;
	uint32_t messageType;
	vr_debug_cb_t pfnUserCallback;
	void* pUserData;
} vr_DebugUtilsMessengerCreateInfoEXT;

// ---- dispatch tables ----

// vr_store stores entry point f (NULL when missing) into the function
// pointer at slot.
static void vr_store(void* slot, vr_pfn f) { memcpy(slot, &f, sizeof f); }

#define VR_FN(ret, name, args) ret (VR_CALL *name) args;

// vr_inst is an instance with its entry points.
typedef struct {
	void* instance;
	vr_gipa_t gipa;
	uint64_t messenger;
	// The create-infos of the instance and its messenger, kept for the
	// instance's life in case a layer holds on to them.
	vr_DebugUtilsMessengerCreateInfoEXT messengerInfo;
	vr_ApplicationInfo app;
	vr_InstanceCreateInfo info;
	const char* exts[2];
	const char* layers[1];
	VR_FN(void, DestroyInstance, (void*, const void*))
	VR_FN(int32_t, EnumeratePhysicalDevices, (void*, uint32_t*, void**))
	VR_FN(void, GetPhysicalDeviceProperties, (void*, vr_PhysicalDeviceProperties*))
	VR_FN(void, GetPhysicalDeviceMemoryProperties, (void*, vr_PhysicalDeviceMemoryProperties*))
	VR_FN(void, GetPhysicalDeviceQueueFamilyProperties, (void*, uint32_t*, vr_QueueFamilyProperties*))
	VR_FN(int32_t, EnumerateDeviceExtensionProperties, (void*, const char*, uint32_t*, vr_ExtensionProperties*))
	VR_FN(void, GetPhysicalDeviceFeatures2, (void*, vr_PhysicalDeviceFeatures2*))
	VR_FN(void, GetPhysicalDeviceProperties2, (void*, vr_PhysicalDeviceProperties2*))
	VR_FN(int32_t, GetPhysicalDeviceCooperativeMatrixPropertiesNV, (void*, uint32_t*, vr_CooperativeMatrixPropertiesNV*))
	VR_FN(int32_t, GetPhysicalDeviceCooperativeMatrixPropertiesKHR, (void*, uint32_t*, vr_coopmatPropsKHR*))
	VR_FN(int32_t, GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV, (void*, uint32_t*, vr_coopmatFlexPropsNV*))
	VR_FN(int32_t, CreateDevice, (void*, const vr_DeviceCreateInfo*, const void*, void**))
	VR_FN(vr_pfn, GetDeviceProcAddr, (void*, const char*))
	VR_FN(int32_t, CreateDebugUtilsMessengerEXT, (void*, const vr_DebugUtilsMessengerCreateInfoEXT*, const void*, uint64_t*))
	VR_FN(void, DestroyDebugUtilsMessengerEXT, (void*, uint64_t, const void*))
} vr_inst;

// vr_dev is a device with its queue and entry points.
typedef struct {
	void* device;
	void* queue;
	VR_FN(void, DestroyDevice, (void*, const void*))
	VR_FN(void, GetDeviceQueue, (void*, uint32_t, uint32_t, void**))
	VR_FN(int32_t, DeviceWaitIdle, (void*))
	VR_FN(int32_t, QueueSubmit, (void*, uint32_t, const vr_SubmitInfo*, uint64_t))
	VR_FN(int32_t, CreateBuffer, (void*, const vr_BufferCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyBuffer, (void*, uint64_t, const void*))
	VR_FN(void, GetBufferMemoryRequirements, (void*, uint64_t, vr_MemoryRequirements*))
	VR_FN(int32_t, AllocateMemory, (void*, const vr_MemoryAllocateInfo*, const void*, uint64_t*))
	VR_FN(void, FreeMemory, (void*, uint64_t, const void*))
	VR_FN(int32_t, BindBufferMemory, (void*, uint64_t, uint64_t, uint64_t))
	VR_FN(int32_t, MapMemory, (void*, uint64_t, uint64_t, uint64_t, uint32_t, void**))
	VR_FN(void, UnmapMemory, (void*, uint64_t))
	VR_FN(int32_t, CreateCommandPool, (void*, const vr_CommandPoolCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyCommandPool, (void*, uint64_t, const void*))
	VR_FN(int32_t, AllocateCommandBuffers, (void*, const vr_CommandBufferAllocateInfo*, void**))
	VR_FN(int32_t, ResetCommandBuffer, (void*, uint32_t))
	VR_FN(int32_t, BeginCommandBuffer, (void*, const vr_CommandBufferBeginInfo*))
	VR_FN(int32_t, EndCommandBuffer, (void*))
	VR_FN(int32_t, CreateFence, (void*, const vr_FenceCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyFence, (void*, uint64_t, const void*))
	VR_FN(int32_t, ResetFences, (void*, uint32_t, const uint64_t*))
	VR_FN(int32_t, GetFenceStatus, (void*, uint64_t))
	VR_FN(int32_t, WaitForFences, (void*, uint32_t, const uint64_t*, uint32_t, uint64_t))
	VR_FN(void, CmdCopyBuffer, (void*, uint64_t, uint64_t, uint32_t, const vr_BufferCopy*))
	VR_FN(void, CmdPipelineBarrier, (void*, uint32_t, uint32_t, uint32_t, uint32_t, const vr_MemoryBarrier*, uint32_t, const void*, uint32_t, const void*))
	VR_FN(void, CmdBindPipeline, (void*, int32_t, uint64_t))
	VR_FN(void, CmdBindDescriptorSets, (void*, int32_t, uint64_t, uint32_t, uint32_t, const uint64_t*, uint32_t, const uint32_t*))
	VR_FN(void, CmdPushConstants, (void*, uint64_t, uint32_t, uint32_t, uint32_t, const void*))
	VR_FN(void, CmdDispatch, (void*, uint32_t, uint32_t, uint32_t))
	VR_FN(void, CmdWriteTimestamp, (void*, uint32_t, uint64_t, uint32_t))
	VR_FN(void, CmdResetQueryPool, (void*, uint64_t, uint32_t, uint32_t))
	VR_FN(int32_t, CreateDescriptorSetLayout, (void*, const vr_DescriptorSetLayoutCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyDescriptorSetLayout, (void*, uint64_t, const void*))
	VR_FN(int32_t, CreatePipelineLayout, (void*, const vr_PipelineLayoutCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyPipelineLayout, (void*, uint64_t, const void*))
	VR_FN(int32_t, CreateShaderModule, (void*, const vr_ShaderModuleCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyShaderModule, (void*, uint64_t, const void*))
	VR_FN(int32_t, CreateComputePipelines, (void*, uint64_t, uint32_t, const vr_ComputePipelineCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyPipeline, (void*, uint64_t, const void*))
	VR_FN(int32_t, CreatePipelineCache, (void*, const vr_PipelineCacheCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyPipelineCache, (void*, uint64_t, const void*))
	VR_FN(int32_t, GetPipelineCacheData, (void*, uint64_t, size_t*, void*))
	VR_FN(int32_t, CreateDescriptorPool, (void*, const vr_DescriptorPoolCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyDescriptorPool, (void*, uint64_t, const void*))
	VR_FN(int32_t, AllocateDescriptorSets, (void*, const vr_DescriptorSetAllocateInfo*, uint64_t*))
	VR_FN(void, UpdateDescriptorSets, (void*, uint32_t, const vr_WriteDescriptorSet*, uint32_t, const void*))
	VR_FN(int32_t, CreateQueryPool, (void*, const vr_QueryPoolCreateInfo*, const void*, uint64_t*))
	VR_FN(void, DestroyQueryPool, (void*, uint64_t, const void*))
	VR_FN(int32_t, GetQueryPoolResults, (void*, uint64_t, uint32_t, uint32_t, size_t, void*, uint64_t, uint32_t))
} vr_dev;

#undef VR_FN

// ---- global functions (no instance) ----

static vr_pfn vr_global(vr_gipa_t g, const char* name) { return g(NULL, name); }

static uint32_t vr_instance_version(vr_gipa_t g) {
	int32_t (VR_CALL *ev)(uint32_t*) = NULL;
	vr_store(&ev, vr_global(g, "vkEnumerateInstanceVersion"));
	uint32_t v = 1u << 22;
	if (ev) ev(&v);
	return v;
}

// vr_name_in reports whether one of the n records at recs (size bytes
// apart, each beginning with a NUL-padded char[256] name, as
// VkLayerProperties and VkExtensionProperties do) is name.
static int vr_name_in(const void* recs, uint32_t n, size_t size, const char* name) {
	for (uint32_t i = 0; i < n; i++) {
		if (strncmp((const char*)recs + i * size, name, 256) == 0) return 1;
	}
	return 0;
}

// vr_has_layer reports whether the named instance layer is installed.
static int vr_has_layer(vr_gipa_t g, const char* name) {
	int32_t (VR_CALL *f)(uint32_t*, vr_LayerProperties*) = NULL;
	vr_store(&f, vr_global(g, "vkEnumerateInstanceLayerProperties"));
	uint32_t n = 0;
	if (!f || f(&n, NULL) != VR_SUCCESS || n == 0) return 0;
	vr_LayerProperties* ls = (vr_LayerProperties*)calloc(n, sizeof *ls);
	int32_t r = ls ? f(&n, ls) : VR_ERROR_OUT_OF_HOST_MEMORY;
	int found = (r == VR_SUCCESS || r == VR_INCOMPLETE) && vr_name_in(ls, n, sizeof *ls, name);
	free(ls);
	return found;
}

// vr_has_instance_ext reports whether the loader or an implicit layer
// offers the named instance extension.
static int vr_has_instance_ext(vr_gipa_t g, const char* name) {
	int32_t (VR_CALL *f)(const char*, uint32_t*, vr_ExtensionProperties*) = NULL;
	vr_store(&f, vr_global(g, "vkEnumerateInstanceExtensionProperties"));
	uint32_t n = 0;
	if (!f || f(NULL, &n, NULL) != VR_SUCCESS || n == 0) return 0;
	vr_ExtensionProperties* es = (vr_ExtensionProperties*)calloc(n, sizeof *es);
	int32_t r = es ? f(NULL, &n, es) : VR_ERROR_OUT_OF_HOST_MEMORY;
	int found = (r == VR_SUCCESS || r == VR_INCOMPLETE) && vr_name_in(es, n, sizeof *es, name);
	free(es);
	return found;
}

// ---- instance ----

// vrunDebugMessage (Go) receives each validation message with the
// handles of up to 8 objects it names.
extern void vrunDebugMessage(uint32_t severity, char* msg, uint64_t* handles, uint32_t nhandles);

static uint32_t VR_CALL vr_debug_cb(uint32_t sev, uint32_t types, const vr_DebugUtilsMessengerCallbackDataEXT* d, void* user) {
	(void)types; (void)user;
	uint64_t h[8];
	uint32_t n = 0;
	if (d && d->pObjects) {
		for (uint32_t i = 0; i < d->objectCount && n < 8; i++) h[n++] = d->pObjects[i].objectHandle;
	}
	vrunDebugMessage(sev, (char*)(d && d->pMessage ? d->pMessage : ""), h, n);
	return 0;
}

// vr_create_instance creates an instance for Vulkan api (with
// VK_KHR_portability_enumeration where portability is set, and
// VK_LAYER_KHRONOS_validation with a VK_EXT_debug_utils messenger that
// reports warnings and errors to vrunDebugMessage where validate is set).
// On success *out is a vr_inst to free with vr_destroy_instance.
static int32_t vr_create_instance(vr_gipa_t g, uint32_t api, int portability, int validate, vr_inst** out) {
	*out = NULL;
	int32_t (VR_CALL *create)(const vr_InstanceCreateInfo*, const void*, void**) = NULL;
	vr_store(&create, vr_global(g, "vkCreateInstance"));
	if (!create) return VR_ERROR_INITIALIZATION_FAILED;
	vr_inst* in = (vr_inst*)calloc(1, sizeof *in);
	if (!in) return VR_ERROR_OUT_OF_HOST_MEMORY;
	uint32_t next = 0, nlayer = 0;
	uint32_t flags = 0;
	if (portability) {
		in->exts[next++] = "VK_KHR_portability_enumeration";
		flags |= VR_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
	}
	vr_DebugUtilsMessengerCreateInfoEXT* mi = &in->messengerInfo;
	mi->sType = VR_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
	mi->messageSeverity = VR_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VR_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
	mi->messageType = VR_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VR_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VR_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
	mi->pfnUserCallback = vr_debug_cb;
	if (validate) {
		in->exts[next++] = "VK_EXT_debug_utils";
		in->layers[nlayer++] = "VK_LAYER_KHRONOS_validation";
	}
	vr_ApplicationInfo* app = &in->app;
	app->sType = VR_STRUCTURE_TYPE_APPLICATION_INFO;
	app->pApplicationName = "vrun";
	app->applicationVersion = 1;
	app->pEngineName = "vrun";
	app->engineVersion = 1;
	app->apiVersion = api;
	vr_InstanceCreateInfo* ci = &in->info;
	ci->sType = VR_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
	ci->pNext = validate ? mi : NULL; // messages from vkCreateInstance itself
	ci->flags = flags;
	ci->pApplicationInfo = app;
	ci->enabledLayerCount = nlayer;
	ci->ppEnabledLayerNames = nlayer ? in->layers : NULL;
	ci->enabledExtensionCount = next;
	ci->ppEnabledExtensionNames = next ? in->exts : NULL;
	void* instance = NULL;
	int32_t r = create(ci, NULL, &instance);
	if (r != VR_SUCCESS) {
		free(in);
		return r;
	}
	in->instance = instance;
	in->gipa = g;
#define VR_LOAD(name) vr_store(&in->name, g(instance, "vk" #name))
	VR_LOAD(DestroyInstance);
	VR_LOAD(EnumeratePhysicalDevices);
	VR_LOAD(GetPhysicalDeviceProperties);
	VR_LOAD(GetPhysicalDeviceMemoryProperties);
	VR_LOAD(GetPhysicalDeviceQueueFamilyProperties);
	VR_LOAD(EnumerateDeviceExtensionProperties);
	VR_LOAD(GetPhysicalDeviceFeatures2);
	VR_LOAD(GetPhysicalDeviceProperties2);
	VR_LOAD(GetPhysicalDeviceCooperativeMatrixPropertiesNV);
	VR_LOAD(GetPhysicalDeviceCooperativeMatrixPropertiesKHR);
	VR_LOAD(GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV);
	VR_LOAD(CreateDevice);
	VR_LOAD(GetDeviceProcAddr);
	VR_LOAD(CreateDebugUtilsMessengerEXT);
	VR_LOAD(DestroyDebugUtilsMessengerEXT);
#undef VR_LOAD
	if (!in->DestroyInstance || !in->EnumeratePhysicalDevices || !in->GetPhysicalDeviceProperties ||
			!in->GetPhysicalDeviceMemoryProperties || !in->GetPhysicalDeviceQueueFamilyProperties ||
			!in->EnumerateDeviceExtensionProperties || !in->CreateDevice || !in->GetDeviceProcAddr) {
		if (in->DestroyInstance) in->DestroyInstance(instance, NULL);
		free(in);
		return VR_ERROR_INITIALIZATION_FAILED;
	}
	if (validate) {
		r = in->CreateDebugUtilsMessengerEXT ? in->CreateDebugUtilsMessengerEXT(instance, mi, NULL, &in->messenger) : VR_ERROR_EXTENSION_NOT_PRESENT;
		if (r != VR_SUCCESS) {
			in->DestroyInstance(instance, NULL);
			free(in);
			return r;
		}
	}
	*out = in;
	return VR_SUCCESS;
}

static void vr_destroy_instance(vr_inst* in) {
	if (!in) return;
	if (in->messenger && in->DestroyDebugUtilsMessengerEXT) in->DestroyDebugUtilsMessengerEXT(in->instance, in->messenger, NULL);
	in->DestroyInstance(in->instance, NULL);
	free(in);
}

// vr_physical_devices lists up to max physical devices into out.
static int32_t vr_physical_devices(vr_inst* in, void** out, uint32_t max, uint32_t* n) {
	uint32_t c = 0;
	int32_t r = in->EnumeratePhysicalDevices(in->instance, &c, NULL);
	if (r != VR_SUCCESS) return r;
	void** all = (void**)calloc(c ? c : 1, sizeof *all);
	if (!all) return VR_ERROR_OUT_OF_HOST_MEMORY;
	r = in->EnumeratePhysicalDevices(in->instance, &c, all);
	if (r == VR_INCOMPLETE) r = VR_SUCCESS;
	if (c > max) c = max;
	for (uint32_t i = 0; i < c; i++) out[i] = all[i];
	free(all);
	*n = r == VR_SUCCESS ? c : 0;
	return r;
}

// ---- physical device description ----

#define VRUN_MAX_QUEUE_FAMILIES 32
#define VRUN_MAX_COOP_PROPS 64

// vr_caps are the Vulkan 1.1/1.2 capabilities queried through the
// feature and property chains; as the input of vr_create_device, the
// features to enable.
typedef struct {
	uint32_t hasFeatures2, vk12;
	uint32_t coopMatrix, vkMemModel;
	// vulkanMemoryModelDeviceScope: enabled with vkMemModel where the
	// device has it (with the memory model on, shaders may use Device
	// scope, as glslc's atomics do, only with this feature).
	uint32_t vkMemModelDeviceScope;
	// VK_KHR_cooperative_matrix's cooperativeMatrix and the
	// VK_NV_cooperative_matrix2 features vrun uses (as the input of
	// vr_create_device, khrCoopMatrix enables the KHR extension, and
	// coop2 both extensions and all five).
	uint32_t khrCoopMatrix, coop2;
	uint32_t c2WorkgroupScope, c2FlexibleDimensions, c2PerElementOperations, c2TensorAddressing, c2Conversions;
	uint32_t c2MaxWorkgroupSize, c2MaxDimension, c2ReservedShared;
	// Subgroup size control (Vulkan 1.3 devices and instances): the
	// feature (as the input of vr_create_device, enables it), the size
	// range, the most subgroups a compute workgroup may have, and the
	// stages that can require a size.
	uint32_t sgsControl, sgsMin, sgsMax, sgsMaxSubgroups, sgsStages;
	uint32_t storage16, shaderFloat16, storage8, shaderInt8, shaderInt64, shaderFloat64, shaderInt16;
	uint32_t subgroupSize, subgroupOps, driverID;
	uint64_t maxMemoryAllocationSize;
	char driverName[256];
	char driverInfo[256];
	uint8_t deviceUUID[16]; // VkPhysicalDeviceIDProperties (Vulkan 1.1)
} vr_caps;

// vr_physinfo is everything vrun reads about a physical device.
typedef struct {
	vr_PhysicalDeviceProperties props;
	vr_PhysicalDeviceMemoryProperties mem;
	uint32_t queueFamilyCount;
	vr_QueueFamilyProperties queueFamilies[VRUN_MAX_QUEUE_FAMILIES];
	uint32_t hasNVCoop, hasKHRCoop, hasNVCoop2;
	vr_caps caps;
	uint32_t coopCount;
	vr_CooperativeMatrixPropertiesNV coop[VRUN_MAX_COOP_PROPS];
	uint32_t khrCount; // VK_KHR_cooperative_matrix shapes
	vr_coopmatPropsKHR khr[VRUN_MAX_COOP_PROPS];
	uint32_t flexCount; // VK_NV_cooperative_matrix2 flexible-dimension shapes
	vr_coopmatFlexPropsNV flex[VRUN_MAX_COOP_PROPS];
} vr_physinfo;

static int vr_has_device_ext(vr_inst* in, void* pd, const char* name) {
	uint32_t n = 0;
	if (in->EnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VR_SUCCESS || n == 0) return 0;
	vr_ExtensionProperties* es = (vr_ExtensionProperties*)calloc(n, sizeof *es);
	int32_t r = es ? in->EnumerateDeviceExtensionProperties(pd, NULL, &n, es) : VR_ERROR_OUT_OF_HOST_MEMORY;
	int found = (r == VR_SUCCESS || r == VR_INCOMPLETE) && vr_name_in(es, n, sizeof *es, name);
	free(es);
	return found;
}

// vr_features is the chain of feature structs that vr_query_caps reads
// and vr_create_device enables.
typedef struct {
	vr_PhysicalDeviceFeatures2 f2;
	vr_PhysicalDeviceVulkan11Features f11;
	vr_PhysicalDeviceVulkan12Features f12;
	vr_PhysicalDeviceCooperativeMatrixFeaturesNV cf;
	vr_coopmatFeaturesKHR kf;
	vr_coopmat2FeaturesNV c2;
	vr_PhysicalDeviceSubgroupSizeControlFeatures sf;
} vr_features;

// vr_chain_features zeroes c and links features 2 → Vulkan 1.1 → Vulkan
// 1.2 (where vk12) → subgroup size control (where vk12 and sgs) → NV
// cooperative matrix (where vk12 and coop) → KHR cooperative matrix (where
// vk12 and khr) → NV cooperative matrix 2 (where vk12, khr and coop2).
static void vr_chain_features(vr_features* c, int vk12, int sgs, int coop, int khr, int coop2) {
	memset(c, 0, sizeof *c);
	c->f2.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
	c->f11.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
	c->f12.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
	c->cf.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
	c->kf.sType = VR_ST_COOPMAT_FEATURES_KHR;
	c->c2.sType = VR_ST_COOPMAT2_FEATURES_NV;
	c->sf.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
	c->f2.pNext = &c->f11;
	if (!vk12) return;
	void** tail = &c->f11.pNext;
	*tail = &c->f12; tail = &c->f12.pNext;
	if (sgs) { *tail = &c->sf; tail = &c->sf.pNext; }
	if (coop) { *tail = &c->cf; tail = &c->cf.pNext; }
	if (khr) { *tail = &c->kf; tail = &c->kf.pNext; }
	if (khr && coop2) *tail = &c->c2;
}

// vr_query_caps reads pd's features and properties; khr (the device has
// VK_KHR_cooperative_matrix) and coop2 (and VK_NV_cooperative_matrix2) add
// their feature and property structs to the chains.
static void vr_query_caps(vr_inst* in, void* pd, uint32_t apiVersion, uint32_t nvCoop, uint32_t khr, uint32_t coop2, vr_caps* out) {
	memset(out, 0, sizeof(*out));
	if (!in->GetPhysicalDeviceFeatures2 || !in->GetPhysicalDeviceProperties2 || apiVersion < ((1u << 22) | (1u << 12))) return;
	out->hasFeatures2 = 1;
	out->vk12 = apiVersion >= ((1u << 22) | (2u << 12));
	// Vulkan 1.3 for the device and the instance: subgroup size control
	uint32_t api = apiVersion < in->app.apiVersion ? apiVersion : in->app.apiVersion;
	uint32_t vk13 = api >= ((1u << 22) | (3u << 12));
	vr_features c;
	vr_chain_features(&c, out->vk12, vk13, nvCoop, khr, coop2);
	in->GetPhysicalDeviceFeatures2(pd, &c.f2);
	out->sgsControl = c.sf.subgroupSizeControl;
	out->coopMatrix = c.cf.cooperativeMatrix;
	out->khrCoopMatrix = c.kf.cooperativeMatrix;
	out->c2WorkgroupScope = c.c2.workgroupScope;
	out->c2FlexibleDimensions = c.c2.flexibleDimensions;
	out->c2PerElementOperations = c.c2.perElementOperations;
	out->c2TensorAddressing = c.c2.tensorAddressing;
	out->c2Conversions = c.c2.conversions;
	out->vkMemModel = c.f12.f[VR_F12_VULKAN_MEMORY_MODEL];
	out->vkMemModelDeviceScope = c.f12.f[VR_F12_VULKAN_MEMORY_MODEL_DEVICE_SCOPE];
	out->storage16 = c.f11.f[VR_F11_STORAGE_BUFFER_16BIT];
	out->storage8 = c.f12.f[VR_F12_STORAGE_BUFFER_8BIT];
	out->shaderFloat16 = c.f12.f[VR_F12_SHADER_FLOAT16];
	out->shaderInt8 = c.f12.f[VR_F12_SHADER_INT8];
	out->shaderFloat64 = c.f2.features[VR_F_SHADER_FLOAT64];
	out->shaderInt64 = c.f2.features[VR_F_SHADER_INT64];
	out->shaderInt16 = c.f2.features[VR_F_SHADER_INT16];

	vr_PhysicalDeviceProperties2* p2 = (vr_PhysicalDeviceProperties2*)calloc(1, sizeof *p2);
	if (!p2) return;
	vr_PhysicalDeviceSubgroupProperties sg; vr_PhysicalDeviceMaintenance3Properties m3; vr_PhysicalDeviceDriverProperties drv;
	vr_PhysicalDeviceIDProperties id;
	memset(&sg, 0, sizeof sg); memset(&m3, 0, sizeof m3); memset(&drv, 0, sizeof drv); memset(&id, 0, sizeof id);
	p2->sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
	sg.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
	m3.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
	drv.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
	id.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
	vr_coopmat2PropsNV c2p;
	memset(&c2p, 0, sizeof c2p);
	c2p.sType = VR_ST_COOPMAT2_PROPERTIES_NV;
	vr_PhysicalDeviceSubgroupSizeControlProperties sgp;
	memset(&sgp, 0, sizeof sgp);
	sgp.sType = VR_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
	p2->pNext = &sg; sg.pNext = &m3; m3.pNext = &id;
	if (out->vk12) id.pNext = &drv;
	if (out->vk12 && vk13) { sgp.pNext = drv.pNext; drv.pNext = &sgp; }
	if (out->vk12 && coop2) { c2p.pNext = drv.pNext; drv.pNext = &c2p; }
	in->GetPhysicalDeviceProperties2(pd, p2);
	free(p2);
	if (out->sgsControl) {
		out->sgsMin = sgp.minSubgroupSize;
		out->sgsMax = sgp.maxSubgroupSize;
		out->sgsMaxSubgroups = sgp.maxComputeWorkgroupSubgroups;
		out->sgsStages = sgp.requiredSubgroupSizeStages;
	}
	out->c2MaxWorkgroupSize = c2p.workgroupScopeMaxWorkgroupSize;
	out->c2MaxDimension = c2p.flexibleDimensionsMaxDimension;
	out->c2ReservedShared = c2p.workgroupScopeReservedSharedMemory;
	out->subgroupSize = sg.subgroupSize;
	out->subgroupOps = sg.supportedOperations;
	out->maxMemoryAllocationSize = m3.maxMemoryAllocationSize;
	out->driverID = (uint32_t)drv.driverID;
	memcpy(out->driverName, drv.driverName, 256); out->driverName[255] = 0;
	memcpy(out->driverInfo, drv.driverInfo, 256); out->driverInfo[255] = 0;
	memcpy(out->deviceUUID, id.deviceUUID, 16);
}

// vr_describe fills out with pd's properties, memory, queue families,
// extensions of interest, capabilities and cooperative-matrix shapes.
static void vr_describe(vr_inst* in, void* pd, vr_physinfo* out) {
	memset(out, 0, sizeof *out);
	in->GetPhysicalDeviceProperties(pd, &out->props);
	out->props.deviceName[255] = 0;
	in->GetPhysicalDeviceMemoryProperties(pd, &out->mem);
	if (out->mem.memoryTypeCount > 32) out->mem.memoryTypeCount = 32;
	if (out->mem.memoryHeapCount > 16) out->mem.memoryHeapCount = 16;
	uint32_t nq = 0;
	in->GetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
	if (nq > VRUN_MAX_QUEUE_FAMILIES) nq = VRUN_MAX_QUEUE_FAMILIES;
	in->GetPhysicalDeviceQueueFamilyProperties(pd, &nq, out->queueFamilies);
	out->queueFamilyCount = nq;
	out->hasNVCoop = vr_has_device_ext(in, pd, "VK_NV_cooperative_matrix");
	out->hasKHRCoop = vr_has_device_ext(in, pd, "VK_KHR_cooperative_matrix");
	out->hasNVCoop2 = vr_has_device_ext(in, pd, "VK_NV_cooperative_matrix2");
	uint32_t coop2 = out->hasKHRCoop && out->hasNVCoop2;
	vr_query_caps(in, pd, out->props.apiVersion, out->hasNVCoop, out->hasKHRCoop, coop2, &out->caps);
	if (out->hasKHRCoop && out->caps.khrCoopMatrix && in->GetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
		uint32_t n = 0;
		int32_t r = in->GetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, NULL);
		if (r == VR_SUCCESS && n > 0) {
			if (n > VRUN_MAX_COOP_PROPS) n = VRUN_MAX_COOP_PROPS;
			for (uint32_t i = 0; i < n; i++) out->khr[i].sType = VR_ST_COOPMAT_PROPERTIES_KHR;
			r = in->GetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &n, out->khr);
			if (r == VR_SUCCESS || r == VR_INCOMPLETE) out->khrCount = n;
		}
	}
	if (coop2 && out->caps.c2FlexibleDimensions && in->GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) {
		uint32_t n = 0;
		int32_t r = in->GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &n, NULL);
		if (r == VR_SUCCESS && n > 0) {
			if (n > VRUN_MAX_COOP_PROPS) n = VRUN_MAX_COOP_PROPS;
			for (uint32_t i = 0; i < n; i++) out->flex[i].sType = VR_ST_COOPMAT_FLEX_PROPERTIES_NV;
			r = in->GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, &n, out->flex);
			if (r == VR_SUCCESS || r == VR_INCOMPLETE) out->flexCount = n;
		}
	}
	if (out->hasNVCoop && out->caps.coopMatrix && in->GetPhysicalDeviceCooperativeMatrixPropertiesNV) {
		uint32_t n = 0;
		int32_t r = in->GetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, NULL);
		if (r == VR_SUCCESS && n > 0) {
			if (n > VRUN_MAX_COOP_PROPS) n = VRUN_MAX_COOP_PROPS;
			for (uint32_t i = 0; i < n; i++) out->coop[i].sType = VR_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
			r = in->GetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, out->coop);
			if (r == VR_SUCCESS || r == VR_INCOMPLETE) out->coopCount = n;
		}
	}
}

// ---- device ----

// vr_create_device creates a device on pd with one queue of family qfam,
// enabling en's features (and VK_NV_cooperative_matrix where
// en->coopMatrix is set), and loads its entry points. On success *out is
// a vr_dev to free with vr_destroy_device.
static int32_t vr_create_device(vr_inst* in, void* pd, uint32_t qfam, const vr_caps* en, vr_dev** out) {
	*out = NULL;
	vr_features c;
	uint32_t khr = en->vk12 && (en->coop2 || en->khrCoopMatrix);
	vr_chain_features(&c, en->vk12, en->vk12 && en->sgsControl, en->coopMatrix, khr, en->coop2);
	c.sf.subgroupSizeControl = en->vk12 && en->sgsControl;
	c.cf.cooperativeMatrix = en->vk12 && en->coopMatrix;
	c.kf.cooperativeMatrix = khr;
	if (en->vk12 && en->coop2) {
		c.c2.workgroupScope = en->c2WorkgroupScope;
		c.c2.flexibleDimensions = en->c2FlexibleDimensions;
		c.c2.perElementOperations = en->c2PerElementOperations;
		c.c2.tensorAddressing = en->c2TensorAddressing;
		c.c2.conversions = en->c2Conversions;
	}
	c.f12.f[VR_F12_VULKAN_MEMORY_MODEL] = en->vkMemModel;
	c.f12.f[VR_F12_VULKAN_MEMORY_MODEL_DEVICE_SCOPE] = en->vkMemModel && en->vkMemModelDeviceScope;
	c.f2.features[VR_F_SHADER_FLOAT64] = en->shaderFloat64;
	c.f2.features[VR_F_SHADER_INT64] = en->shaderInt64;
	c.f2.features[VR_F_SHADER_INT16] = en->shaderInt16;
	c.f11.f[VR_F11_STORAGE_BUFFER_16BIT] = en->storage16;
	c.f12.f[VR_F12_STORAGE_BUFFER_8BIT] = en->storage8;
	c.f12.f[VR_F12_SHADER_FLOAT16] = en->shaderFloat16;
	c.f12.f[VR_F12_SHADER_INT8] = en->shaderInt8;

	float prio = 1.0f;
	vr_DeviceQueueCreateInfo qi = {
		.sType = VR_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = qfam, .queueCount = 1,
		.pQueuePriorities = &prio,
	};
	const char* exts[3];
	uint32_t nexts = 0;
	if (en->vk12 && en->coopMatrix) exts[nexts++] = "VK_NV_cooperative_matrix";
	if (khr) exts[nexts++] = "VK_KHR_cooperative_matrix";
	if (en->vk12 && en->coop2) exts[nexts++] = "VK_NV_cooperative_matrix2";
	vr_DeviceCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = en->hasFeatures2 ? (const void*)&c.f2 : NULL,
		.queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
	};
	if (nexts > 0) {
		ci.enabledExtensionCount = nexts;
		ci.ppEnabledExtensionNames = exts;
	}
	void* device = NULL;
	int32_t r = in->CreateDevice(pd, &ci, NULL, &device);
	if (r != VR_SUCCESS) return r;
	vr_dev* d = (vr_dev*)calloc(1, sizeof *d);
	void (VR_CALL *destroy)(void*, const void*) = NULL;
	vr_store(&destroy, in->GetDeviceProcAddr(device, "vkDestroyDevice"));
	if (!d) {
		if (destroy) destroy(device, NULL);
		return VR_ERROR_OUT_OF_HOST_MEMORY;
	}
	d->device = device;
	int ok = 1;
#define VR_LOAD(name) do { vr_store(&d->name, in->GetDeviceProcAddr(device, "vk" #name)); if (!d->name) ok = 0; } while (0)
	VR_LOAD(DestroyDevice);
	VR_LOAD(GetDeviceQueue);
	VR_LOAD(DeviceWaitIdle);
	VR_LOAD(QueueSubmit);
	VR_LOAD(CreateBuffer);
	VR_LOAD(DestroyBuffer);
	VR_LOAD(GetBufferMemoryRequirements);
	VR_LOAD(AllocateMemory);
	VR_LOAD(FreeMemory);
	VR_LOAD(BindBufferMemory);
	VR_LOAD(MapMemory);
	VR_LOAD(UnmapMemory);
	VR_LOAD(CreateCommandPool);
	VR_LOAD(DestroyCommandPool);
	VR_LOAD(AllocateCommandBuffers);
	VR_LOAD(ResetCommandBuffer);
	VR_LOAD(BeginCommandBuffer);
	VR_LOAD(EndCommandBuffer);
	VR_LOAD(CreateFence);
	VR_LOAD(DestroyFence);
	VR_LOAD(ResetFences);
	VR_LOAD(GetFenceStatus);
	VR_LOAD(WaitForFences);
	VR_LOAD(CmdCopyBuffer);
	VR_LOAD(CmdPipelineBarrier);
	VR_LOAD(CmdBindPipeline);
	VR_LOAD(CmdBindDescriptorSets);
	VR_LOAD(CmdPushConstants);
	VR_LOAD(CmdDispatch);
	VR_LOAD(CmdWriteTimestamp);
	VR_LOAD(CmdResetQueryPool);
	VR_LOAD(CreateDescriptorSetLayout);
	VR_LOAD(DestroyDescriptorSetLayout);
	VR_LOAD(CreatePipelineLayout);
	VR_LOAD(DestroyPipelineLayout);
	VR_LOAD(CreateShaderModule);
	VR_LOAD(DestroyShaderModule);
	VR_LOAD(CreateComputePipelines);
	VR_LOAD(DestroyPipeline);
	VR_LOAD(CreatePipelineCache);
	VR_LOAD(DestroyPipelineCache);
	VR_LOAD(GetPipelineCacheData);
	VR_LOAD(CreateDescriptorPool);
	VR_LOAD(DestroyDescriptorPool);
	VR_LOAD(AllocateDescriptorSets);
	VR_LOAD(UpdateDescriptorSets);
	VR_LOAD(CreateQueryPool);
	VR_LOAD(DestroyQueryPool);
	VR_LOAD(GetQueryPoolResults);
#undef VR_LOAD
	if (!ok) {
		if (destroy) destroy(device, NULL);
		free(d);
		return VR_ERROR_INITIALIZATION_FAILED;
	}
	d->GetDeviceQueue(device, qfam, 0, &d->queue);
	*out = d;
	return VR_SUCCESS;
}

static void vr_destroy_device(vr_dev* d) {
	if (!d) return;
	d->DestroyDevice(d->device, NULL);
	free(d);
}

static int32_t vr_device_wait_idle(vr_dev* d) { return d->DeviceWaitIdle(d->device); }

// VR_DESTROYER defines vr_destroy_<name>(d, h), which destroys the
// device-level object h with vkDestroy<Kind>.
#define VR_DESTROYER(name, Kind) \
	static void vr_destroy_##name(vr_dev* d, uint64_t h) { d->Destroy##Kind(d->device, h, NULL); }

// ---- memory ----

static int32_t vr_create_buffer(vr_dev* d, uint64_t size, uint32_t usage, uint64_t* out) {
	vr_BufferCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage,
		.sharingMode = VR_SHARING_MODE_EXCLUSIVE,
	};
	return d->CreateBuffer(d->device, &ci, NULL, out);
}

VR_DESTROYER(buffer, Buffer)

static void vr_buffer_requirements(vr_dev* d, uint64_t b, uint64_t* size, uint32_t* typeBits) {
	vr_MemoryRequirements req = {0};
	d->GetBufferMemoryRequirements(d->device, b, &req);
	*size = req.size;
	*typeBits = req.memoryTypeBits;
}

static int32_t vr_allocate_memory(vr_dev* d, uint64_t size, uint32_t type, uint64_t* out) {
	vr_MemoryAllocateInfo ai = {
		.sType = VR_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = size, .memoryTypeIndex = type,
	};
	return d->AllocateMemory(d->device, &ai, NULL, out);
}

static void vr_free_memory(vr_dev* d, uint64_t m) { d->FreeMemory(d->device, m, NULL); }

static int32_t vr_bind_buffer_memory(vr_dev* d, uint64_t b, uint64_t m) { return d->BindBufferMemory(d->device, b, m, 0); }

static int32_t vr_map_memory(vr_dev* d, uint64_t m, uint64_t size, void** out) { return d->MapMemory(d->device, m, 0, size, 0, out); }

static void vr_unmap_memory(vr_dev* d, uint64_t m) { d->UnmapMemory(d->device, m); }

// ---- command buffers and synchronisation ----

static int32_t vr_create_command_pool(vr_dev* d, uint32_t qfam, uint64_t* out) {
	vr_CommandPoolCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = VR_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = qfam,
	};
	return d->CreateCommandPool(d->device, &ci, NULL, out);
}

VR_DESTROYER(command_pool, CommandPool)

static int32_t vr_allocate_command_buffer(vr_dev* d, uint64_t pool, void** out) {
	vr_CommandBufferAllocateInfo ai = {
		.sType = VR_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
		.level = VR_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
	};
	return d->AllocateCommandBuffers(d->device, &ai, out);
}

static int32_t vr_reset_command_buffer(vr_dev* d, void* cb) { return d->ResetCommandBuffer(cb, 0); }

static int32_t vr_begin_command_buffer(vr_dev* d, void* cb, uint32_t flags) {
	vr_CommandBufferBeginInfo bi = {.sType = VR_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags};
	return d->BeginCommandBuffer(cb, &bi);
}

static int32_t vr_end_command_buffer(vr_dev* d, void* cb) { return d->EndCommandBuffer(cb); }

static int32_t vr_create_fence(vr_dev* d, uint64_t* out) {
	vr_FenceCreateInfo ci = {.sType = VR_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	return d->CreateFence(d->device, &ci, NULL, out);
}

VR_DESTROYER(fence, Fence)

static int32_t vr_reset_fence(vr_dev* d, uint64_t f) { return d->ResetFences(d->device, 1, &f); }

static int32_t vr_fence_status(vr_dev* d, uint64_t f) { return d->GetFenceStatus(d->device, f); }

static int32_t vr_wait_fence(vr_dev* d, uint64_t f, uint64_t timeout) { return d->WaitForFences(d->device, 1, &f, 1, timeout); }

// vr_queue_submit submits one command buffer, signalling fence.
static int32_t vr_queue_submit(vr_dev* d, void* cb, uint64_t fence) {
	vr_SubmitInfo si = {.sType = VR_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
	return d->QueueSubmit(d->queue, 1, &si, fence);
}

// ---- commands ----

static void vr_cmd_copy_buffer(vr_dev* d, void* cb, uint64_t src, uint64_t dst, uint64_t srcOff, uint64_t dstOff, uint64_t size) {
	vr_BufferCopy c = {srcOff, dstOff, size};
	d->CmdCopyBuffer(cb, src, dst, 1, &c);
}

// vr_cmd_barrier records one global memory barrier.
static void vr_cmd_barrier(vr_dev* d, void* cb, uint32_t srcStage, uint32_t dstStage, uint32_t srcAccess, uint32_t dstAccess) {
	vr_MemoryBarrier mb = {
		.sType = VR_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = srcAccess, .dstAccessMask = dstAccess,
	};
	d->CmdPipelineBarrier(cb, srcStage, dstStage, 0, 1, &mb, 0, NULL, 0, NULL);
}

// vr_cmd_dispatch binds a compute pipeline, its descriptor set and push
// constants, and dispatches.
static void vr_cmd_dispatch(vr_dev* d, void* cb, uint64_t pipeline, uint64_t layout, uint64_t set,
		const void* push, uint32_t pushSize, uint32_t gx, uint32_t gy, uint32_t gz) {
	d->CmdBindPipeline(cb, VR_PIPELINE_BIND_POINT_COMPUTE, pipeline);
	d->CmdBindDescriptorSets(cb, VR_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
	if (pushSize > 0) d->CmdPushConstants(cb, layout, VR_SHADER_STAGE_COMPUTE_BIT, 0, pushSize, push);
	d->CmdDispatch(cb, gx, gy, gz);
}

static void vr_cmd_write_timestamp(vr_dev* d, void* cb, uint32_t stage, uint64_t pool, uint32_t q) { d->CmdWriteTimestamp(cb, stage, pool, q); }

static void vr_cmd_reset_query_pool(vr_dev* d, void* cb, uint64_t pool, uint32_t n) { d->CmdResetQueryPool(cb, pool, 0, n); }

// ---- pipelines ----

// vr_create_layouts creates a descriptor-set layout of n storage buffers
// (bindings 0..n-1) and a pipeline layout over it with pushSize bytes of
// push constants, all for the compute stage.
static int32_t vr_create_layouts(vr_dev* d, uint32_t n, uint32_t pushSize, uint64_t* dsl, uint64_t* pl) {
	vr_DescriptorSetLayoutBinding* b = (vr_DescriptorSetLayoutBinding*)calloc(n ? n : 1, sizeof *b);
	if (!b) return VR_ERROR_OUT_OF_HOST_MEMORY;
	for (uint32_t i = 0; i < n; i++) {
		b[i].binding = i;
		b[i].descriptorType = VR_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		b[i].descriptorCount = 1;
		b[i].stageFlags = VR_SHADER_STAGE_COMPUTE_BIT;
	}
	vr_DescriptorSetLayoutCreateInfo di = {
		.sType = VR_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = n, .pBindings = b,
	};
	int32_t r = d->CreateDescriptorSetLayout(d->device, &di, NULL, dsl);
	free(b);
	if (r != VR_SUCCESS) return r;
	vr_PushConstantRange pr = {VR_SHADER_STAGE_COMPUTE_BIT, 0, pushSize};
	vr_PipelineLayoutCreateInfo li = {
		.sType = VR_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = dsl,
		.pushConstantRangeCount = pushSize ? 1 : 0, .pPushConstantRanges = pushSize ? &pr : NULL,
	};
	r = d->CreatePipelineLayout(d->device, &li, NULL, pl);
	if (r != VR_SUCCESS) {
		d->DestroyDescriptorSetLayout(d->device, *dsl, NULL);
		*dsl = 0;
	}
	return r;
}

static void vr_destroy_layouts(vr_dev* d, uint64_t dsl, uint64_t pl) {
	d->DestroyPipelineLayout(d->device, pl, NULL);
	d->DestroyDescriptorSetLayout(d->device, dsl, NULL);
}

// vr_create_pipeline creates a shader module from SPIR-V code (size
// bytes) and one compute pipeline from its "main" with the 32-bit
// specialization constants spec[0..nspec) as constant_id 0..nspec-1 and,
// with sgs > 0, that required subgroup size (the device has subgroup size
// control enabled), and destroys the module.
static int32_t vr_create_pipeline(vr_dev* d, uint64_t cache, const uint32_t* code, size_t size, uint64_t layout,
		const uint32_t* spec, uint32_t nspec, uint32_t sgs, uint64_t* out) {
	vr_ShaderModuleCreateInfo mi = {
		.sType = VR_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size, .pCode = code,
	};
	uint64_t module = 0;
	int32_t r = d->CreateShaderModule(d->device, &mi, NULL, &module);
	if (r != VR_SUCCESS) return r;
	vr_SpecializationMapEntry entries[32];
	if (nspec > 32) nspec = 32;
	for (uint32_t i = 0; i < nspec; i++) { entries[i].constantID = i; entries[i].offset = 4 * i; entries[i].size = 4; }
	vr_SpecializationInfo si = {nspec, entries, 4 * (size_t)nspec, spec};
	vr_ComputePipelineCreateInfo pi = {
		.sType = VR_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VR_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VR_SHADER_STAGE_COMPUTE_BIT,
			.module = module, .pName = "main", .pSpecializationInfo = nspec ? &si : NULL,
		},
		.layout = layout, .basePipelineIndex = -1,
	};
	vr_PipelineShaderStageRequiredSubgroupSizeCreateInfo req = {
		.sType = VR_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO, .requiredSubgroupSize = sgs,
	};
	if (sgs > 0) pi.stage.pNext = &req;
	r = d->CreateComputePipelines(d->device, cache, 1, &pi, NULL, out);
	d->DestroyShaderModule(d->device, module, NULL);
	return r;
}

VR_DESTROYER(pipeline, Pipeline)

static int32_t vr_create_pipeline_cache(vr_dev* d, const void* data, size_t n, uint64_t* out) {
	vr_PipelineCacheCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = n, .pInitialData = n ? data : NULL,
	};
	return d->CreatePipelineCache(d->device, &ci, NULL, out);
}

VR_DESTROYER(pipeline_cache, PipelineCache)

static int32_t vr_pipeline_cache_data(vr_dev* d, uint64_t c, size_t* n, void* data) { return d->GetPipelineCacheData(d->device, c, n, data); }

// ---- descriptors ----

static int32_t vr_create_descriptor_pool(vr_dev* d, uint32_t maxSets, uint32_t nbuffers, uint64_t* out) {
	vr_DescriptorPoolSize ps = {VR_DESCRIPTOR_TYPE_STORAGE_BUFFER, nbuffers};
	vr_DescriptorPoolCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = maxSets, .poolSizeCount = 1,
		.pPoolSizes = &ps,
	};
	return d->CreateDescriptorPool(d->device, &ci, NULL, out);
}

VR_DESTROYER(descriptor_pool, DescriptorPool)

// vr_write_set allocates a descriptor set of layout dsl from pool and
// points its bindings 0..n-1 at bufs[0..n).
static int32_t vr_write_set(vr_dev* d, uint64_t pool, uint64_t dsl, uint32_t n, const vr_DescriptorBufferInfo* bufs, uint64_t* out) {
	vr_DescriptorSetAllocateInfo ai = {
		.sType = VR_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = pool, .descriptorSetCount = 1,
		.pSetLayouts = &dsl,
	};
	int32_t r = d->AllocateDescriptorSets(d->device, &ai, out);
	if (r != VR_SUCCESS || n == 0) return r;
	vr_WriteDescriptorSet* w = (vr_WriteDescriptorSet*)calloc(n, sizeof *w);
	if (!w) return VR_ERROR_OUT_OF_HOST_MEMORY;
	for (uint32_t i = 0; i < n; i++) {
		w[i].sType = VR_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
		w[i].dstSet = *out;
		w[i].dstBinding = i;
		w[i].descriptorCount = 1;
		w[i].descriptorType = VR_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		w[i].pBufferInfo = &bufs[i];
	}
	d->UpdateDescriptorSets(d->device, n, w, 0, NULL);
	free(w);
	return VR_SUCCESS;
}

// ---- timestamps ----

static int32_t vr_create_query_pool(vr_dev* d, uint32_t n, uint64_t* out) {
	vr_QueryPoolCreateInfo ci = {
		.sType = VR_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VR_QUERY_TYPE_TIMESTAMP, .queryCount = n,
	};
	return d->CreateQueryPool(d->device, &ci, NULL, out);
}

VR_DESTROYER(query_pool, QueryPool)

// vr_query_results waits for and reads n 64-bit timestamps into out.
static int32_t vr_query_results(vr_dev* d, uint64_t pool, uint32_t n, uint64_t* out) {
	return d->GetQueryPoolResults(d->device, pool, 0, n, (size_t)n * 8, out, 8, VR_QUERY_RESULT_64_BIT | VR_QUERY_RESULT_WAIT_BIT);
}

#endif
