// The Vulkan compute layer: one instance, one device, one compute queue, and everything a dispatch needs.
// Every submission is waited for, so no resource is ever in flight between calls; that keeps staging buffers,
// command buffers and query pools simple to reuse.
#include "runtime/vulkan/Device.h"

#include "runtime/vulkan/ContextImpl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gerbil::vk {

using detail::allComputeAndTransferBarrier;
using detail::barrierToHost;
using detail::check;
using detail::InstanceHandles;
using detail::mebibytes;
using detail::submitOne;
using detail::waitForFence;

namespace {

constexpr uint64_t kFenceTimeoutSeconds = 120;
constexpr uint32_t kSpirvMagic = 0x07230203;
constexpr uint32_t kSetsPerDescriptorPool = 1024;
constexpr uint32_t kDescriptorsPerPool = 8192;
constexpr uint32_t kMinTimestampSlots = 64;
constexpr const char *kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr const char *kNoDeviceMessage =
    "no Vulkan device found (is a Vulkan driver installed? for a CPU device install mesa-vulkan-drivers)";

// Counts validation errors of every context, so that a test can also see the ones reported while a context
// is destroyed (objects leaked at vkDestroyDevice), when there is no context left to ask.
std::atomic<uint32_t> gProcessValidationErrors{0};

std::string versionString(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." + std::to_string(VK_API_VERSION_MINOR(version)) +
         "." + std::to_string(VK_API_VERSION_PATCH(version));
}

bool envFlag(const char *name) {
  const char *value = std::getenv(name);
  return value && std::strcmp(value, "1") == 0;
}

VKAPI_ATTR VkBool32 VKAPI_CALL onValidationMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                   void *userData) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ++*static_cast<std::atomic<uint32_t> *>(userData);
    ++gProcessValidationErrors;
  }
  std::fprintf(stderr, "vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "(no message)");
  return VK_FALSE; // the call that triggered it goes on, as the layer expects
}

VkDebugUtilsMessengerCreateInfoEXT messengerInfo(std::atomic<uint32_t> *errorCounter) {
  VkDebugUtilsMessengerCreateInfoEXT info{};
  info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = onValidationMessage;
  info.pUserData = errorCounter;
  return info;
}

bool validationLayerPresent() {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) < 0) return false;
  layers.resize(count);
  bool hasLayer = std::any_of(layers.begin(), layers.end(), [](const VkLayerProperties &l) {
    return std::strcmp(l.layerName, kValidationLayer) == 0;
  });
  if (!hasLayer) return false;
  // The layer provides VK_EXT_debug_utils itself; without it we could not see its messages.
  if (vkEnumerateInstanceExtensionProperties(kValidationLayer, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateInstanceExtensionProperties(kValidationLayer, &count, extensions.data()) < 0) return false;
  extensions.resize(count);
  return std::any_of(extensions.begin(), extensions.end(), [](const VkExtensionProperties &e) {
    return std::strcmp(e.extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0;
  });
}

void destroyInstance(InstanceHandles &handles) {
  if (handles.messenger) {
    auto destroyMessenger = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(handles.instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroyMessenger) destroyMessenger(handles.instance, handles.messenger, nullptr);
    handles.messenger = VK_NULL_HANDLE;
  }
  if (handles.instance) vkDestroyInstance(handles.instance, nullptr);
  handles.instance = VK_NULL_HANDLE;
}

// errorCounter receives the validation errors; it must outlive the instance.
InstanceHandles createInstance(bool wantValidation, std::atomic<uint32_t> *errorCounter) {
  uint32_t loaderVersion = VK_API_VERSION_1_0;
  check(vkEnumerateInstanceVersion(&loaderVersion), "vkEnumerateInstanceVersion");
  if (loaderVersion < VK_API_VERSION_1_2)
    throw VulkanError("the Vulkan loader supports only version " + versionString(loaderVersion) +
                      "; gerbil needs 1.2 or later");

  InstanceHandles handles;
  if (wantValidation) {
    handles.validation = validationLayerPresent();
    static std::atomic<bool> warned{false};
    if (!handles.validation && !warned.exchange(true))
      std::fprintf(stderr,
                   "warning: %s was requested but is not installed (Debian: vulkan-validationlayers); "
                   "running without validation\n",
                   kValidationLayer);
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "gerbil";
  app.pEngineName = "gerbil";
  app.apiVersion = VK_API_VERSION_1_3; // a 1.2 device still works: what we use is chosen per device

  // Chained into the create info too, so that messages from vkCreateInstance/vkDestroyInstance are seen.
  VkDebugUtilsMessengerCreateInfoEXT debugInfo = messengerInfo(errorCounter);
  const char *layers[] = {kValidationLayer};
  const char *extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  if (handles.validation) {
    info.pNext = &debugInfo;
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
  }
  VkResult result = vkCreateInstance(&info, nullptr, &handles.instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) throw NoDeviceError(kNoDeviceMessage);
  check(result, "vkCreateInstance");

  if (handles.validation) {
    auto createMessenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(handles.instance, "vkCreateDebugUtilsMessengerEXT"));
    result = createMessenger ? createMessenger(handles.instance, &debugInfo, nullptr, &handles.messenger)
                             : VK_ERROR_EXTENSION_NOT_PRESENT;
    if (result != VK_SUCCESS) {
      destroyInstance(handles);
      throw VulkanError("vkCreateDebugUtilsMessengerEXT", result);
    }
  }
  return handles;
}

// Throws NoDeviceError when the driver reports none.
std::vector<VkPhysicalDevice> physicalDevices(VkInstance instance) {
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  VkResult result = vkEnumeratePhysicalDevices(instance, &count, devices.data());
  if (result != VK_INCOMPLETE) check(result, "vkEnumeratePhysicalDevices");
  devices.resize(count);
  if (devices.empty()) throw NoDeviceError(kNoDeviceMessage);
  return devices;
}

struct QueueChoice {
  bool found = false;
  uint32_t family = 0;
  uint32_t timestampValidBits = 0;
  uint32_t queueCount = 0;
  bool graphics = false; // the family has graphics too
};

std::vector<VkQueueFamilyProperties> queueFamilies(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  families.resize(count);
  return families;
}

// The first compute family that has timestamps, else the first compute family at all; with computeOnly, a
// compute family with timestamps and without graphics before those.
QueueChoice chooseComputeQueue(VkPhysicalDevice device, bool computeOnly) {
  const std::vector<VkQueueFamilyProperties> families = queueFamilies(device);
  auto choiceOf = [&](uint32_t i) {
    return QueueChoice{true, i, families[i].timestampValidBits, families[i].queueCount,
                       (families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0};
  };
  QueueChoice choice;
  for (uint32_t i = 0; computeOnly && i < families.size(); ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if ((flags & VK_QUEUE_COMPUTE_BIT) && !(flags & VK_QUEUE_GRAPHICS_BIT) && families[i].queueCount > 0 &&
        families[i].timestampValidBits > 0)
      return choiceOf(i);
  }
  for (uint32_t i = 0; i < families.size(); ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0) continue;
    if (!choice.found || (choice.timestampValidBits == 0 && families[i].timestampValidBits > 0))
      choice = choiceOf(i);
  }
  return choice;
}

// Another family with compute than `main`, one without graphics first (an "async compute" family).
std::optional<uint32_t> otherComputeFamily(VkPhysicalDevice device, uint32_t main) {
  const std::vector<VkQueueFamilyProperties> families = queueFamilies(device);
  std::optional<uint32_t> found;
  for (uint32_t i = 0; i < families.size(); ++i) {
    if (i == main || !(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0)
      continue;
    if (!found || ((families[*found].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                   !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
      found = i;
  }
  return found;
}

std::vector<std::string> deviceExtensions(VkPhysicalDevice device) {
  uint32_t count = 0;
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()) < 0) return {};
  extensions.resize(count);
  std::vector<std::string> names;
  for (const VkExtensionProperties &e : extensions) names.emplace_back(e.extensionName);
  std::sort(names.begin(), names.end());
  return names;
}

const char *componentTypeName(VkComponentTypeNV type) {
  switch (type) {
  case VK_COMPONENT_TYPE_FLOAT16_NV:
    return "f16";
  case VK_COMPONENT_TYPE_FLOAT32_NV:
    return "f32";
  case VK_COMPONENT_TYPE_FLOAT64_NV:
    return "f64";
  case VK_COMPONENT_TYPE_SINT8_NV:
    return "s8";
  case VK_COMPONENT_TYPE_SINT16_NV:
    return "s16";
  case VK_COMPONENT_TYPE_SINT32_NV:
    return "s32";
  case VK_COMPONENT_TYPE_SINT64_NV:
    return "s64";
  case VK_COMPONENT_TYPE_UINT8_NV:
    return "u8";
  case VK_COMPONENT_TYPE_UINT16_NV:
    return "u16";
  case VK_COMPONENT_TYPE_UINT32_NV:
    return "u32";
  case VK_COMPONENT_TYPE_UINT64_NV:
    return "u64";
  default:
    return "other";
  }
}

std::string shapeName(uint32_t m, uint32_t n, uint32_t k, VkComponentTypeNV a, VkComponentTypeNV b,
                      VkComponentTypeNV c, VkComponentTypeNV d) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " + componentTypeName(a) +
         "*" + componentTypeName(b) + "+" + componentTypeName(c) + "->" + componentTypeName(d);
}

// The subgroup-scope shapes of VK_NV_cooperative_matrix, through the instance-level query.
std::vector<std::string> cooperativeMatrixNVShapes(VkInstance instance, VkPhysicalDevice device) {
  auto query = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!query) return {};
  uint32_t count = 0;
  if (query(device, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkCooperativeMatrixPropertiesNV> properties(count);
  for (auto &p : properties) p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  if (query(device, &count, properties.data()) < 0) return {};
  properties.resize(count);
  std::vector<std::string> shapes;
  for (const auto &p : properties) {
    if (p.scope != VK_SCOPE_SUBGROUP_NV) continue;
    shapes.push_back(shapeName(p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.DType));
  }
  return shapes;
}

// VK_KHR_cooperative_matrix is newer than Debian 12's Vulkan headers (1.3.239): its property struct and
// query as the specification defines them. Its component types number as the NV ones do.
struct CooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  VkComponentTypeNV AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeNV scope;
};
constexpr auto kCooperativeMatrixPropertiesKHR = static_cast<VkStructureType>(1000506001);
// And its feature struct, which a device enabling the extension chains in.
struct CooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
};
constexpr auto kCooperativeMatrixFeaturesKHR = static_cast<VkStructureType>(1000506000);
using QueryCooperativeMatrixKHR = VkResult(VKAPI_PTR *)(VkPhysicalDevice, uint32_t *,
                                                        CooperativeMatrixPropertiesKHR *);

std::vector<std::string> cooperativeMatrixKHRShapes(VkInstance instance, VkPhysicalDevice device) {
  auto query = reinterpret_cast<QueryCooperativeMatrixKHR>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!query) return {};
  uint32_t count = 0;
  if (query(device, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<CooperativeMatrixPropertiesKHR> properties(count);
  for (auto &p : properties) p.sType = kCooperativeMatrixPropertiesKHR;
  if (query(device, &count, properties.data()) < 0) return {};
  properties.resize(count);
  std::vector<std::string> shapes;
  for (const auto &p : properties)
    if (p.scope == VK_SCOPE_SUBGROUP_NV)
      shapes.push_back(shapeName(p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.ResultType));
  return shapes;
}

// VK_NV_cooperative_matrix2 is newer than Debian 12's Vulkan headers too: its feature, property and
// flexible-dimension structs as the specification defines them.
struct CooperativeMatrix2FeaturesNV {
  VkStructureType sType;
  void *pNext;
  VkBool32 workgroupScope, flexibleDimensions, reductions, conversions, perElementOperations,
      tensorAddressing, blockLoads;
};
constexpr auto kCooperativeMatrix2FeaturesNV = static_cast<VkStructureType>(1000593000);
struct CooperativeMatrixFlexibleDimensionsNV {
  VkStructureType sType;
  void *pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  VkComponentTypeNV AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeNV scope;
  uint32_t workgroupInvocations;
};
constexpr auto kCooperativeMatrixFlexibleDimensionsNV = static_cast<VkStructureType>(1000593001);
struct CooperativeMatrix2PropertiesNV {
  VkStructureType sType;
  void *pNext;
  uint32_t workgroupScopeMaxWorkgroupSize, flexibleDimensionsMaxDimension, workgroupScopeReservedSharedMemory;
};
constexpr auto kCooperativeMatrix2PropertiesNV = static_cast<VkStructureType>(1000593002);
using QueryFlexibleDimensionsNV = VkResult(VKAPI_PTR *)(VkPhysicalDevice, uint32_t *,
                                                        CooperativeMatrixFlexibleDimensionsNV *);

// Fills the feature structs chained from `chain` (vkGetPhysicalDeviceFeatures2).
void queryFeatures(VkPhysicalDevice device, void *chain) {
  VkPhysicalDeviceFeatures2 query{};
  query.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  query.pNext = chain;
  vkGetPhysicalDeviceFeatures2(device, &query);
}

// Fills the property structs chained from `chain` (vkGetPhysicalDeviceProperties2).
void queryProperties(VkPhysicalDevice device, void *chain) {
  VkPhysicalDeviceProperties2 query{};
  query.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  query.pNext = chain;
  vkGetPhysicalDeviceProperties2(device, &query);
}

// The workgroup-scope shapes of VK_NV_cooperative_matrix2 where the device has both features they need.
void describeWorkgroupMatrices(VkInstance instance, VkPhysicalDevice device, DeviceInfo &info) {
  CooperativeMatrix2FeaturesNV features{};
  features.sType = kCooperativeMatrix2FeaturesNV;
  queryFeatures(device, &features);
  if (!features.workgroupScope || !features.flexibleDimensions) return;
  CooperativeMatrix2PropertiesNV limits{};
  limits.sType = kCooperativeMatrix2PropertiesNV;
  queryProperties(device, &limits);
  info.cooperativeMatrixWorkgroupMaxInvocations = limits.workgroupScopeMaxWorkgroupSize;
  info.cooperativeMatrixFlexibleMaxDimension = limits.flexibleDimensionsMaxDimension;
  info.cooperativeMatrixWorkgroupSharedBytes = limits.workgroupScopeReservedSharedMemory;
  auto shapesQuery = reinterpret_cast<QueryFlexibleDimensionsNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
  uint32_t count = 0;
  if (!shapesQuery || shapesQuery(device, &count, nullptr) != VK_SUCCESS) return;
  std::vector<CooperativeMatrixFlexibleDimensionsNV> shapes(count);
  for (auto &p : shapes) p.sType = kCooperativeMatrixFlexibleDimensionsNV;
  if (shapesQuery(device, &count, shapes.data()) < 0) return;
  shapes.resize(count);
  for (const auto &p : shapes)
    if (p.scope == VK_SCOPE_WORKGROUP_NV)
      info.cooperativeMatrixWorkgroupShapes.push_back(
          shapeName(p.MGranularity, p.NGranularity, p.KGranularity, p.AType, p.BType, p.CType, p.ResultType) +
          " @" + std::to_string(p.workgroupInvocations));
}

const char *deviceTypeName(VkPhysicalDeviceType type) {
  switch (type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return "discrete";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return "integrated";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return "virtual";
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return "cpu";
  default:
    return "other";
  }
}

DeviceInfo describeDevice(VkInstance instance, VkPhysicalDevice device, uint32_t index) {
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(device, &base);
  DeviceInfo info;
  info.index = index;
  info.name = base.deviceName;
  info.vendorId = base.vendorID;
  info.type = deviceTypeName(base.deviceType);
  info.apiVersion = base.apiVersion;
  info.maxStorageBufferRange = base.limits.maxStorageBufferRange;
  info.maxSharedMemoryBytes = base.limits.maxComputeSharedMemorySize;
  info.maxPushConstantsBytes = base.limits.maxPushConstantsSize;
  for (int i = 0; i < 3; ++i) info.maxWorkgroupCount[i] = base.limits.maxComputeWorkGroupCount[i];
  info.timestamps = chooseComputeQueue(device, false).timestampValidBits > 0;
  info.timestampPeriodNs = base.limits.timestampPeriod;
  info.extensions = deviceExtensions(device);
  info.cooperativeMatrix = info.hasExtension("VK_KHR_cooperative_matrix");
  if (info.hasExtension(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
    info.cooperativeMatrixNVShapes = cooperativeMatrixNVShapes(instance, device);
  if (info.cooperativeMatrix) info.cooperativeMatrixKHRShapes = cooperativeMatrixKHRShapes(instance, device);

  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.deviceLocalBytes += memory.memoryHeaps[i].size;

  // The *2 queries and the Vulkan11/12 structs are only valid on devices of those versions.
  if (base.apiVersion < VK_API_VERSION_1_1) return info;
  if (info.cooperativeMatrix && info.hasExtension("VK_NV_cooperative_matrix2"))
    describeWorkgroupMatrices(instance, device, info);
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceVulkan13Properties properties13{};
  properties13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES;
  bool isVulkan12 = base.apiVersion >= VK_API_VERSION_1_2;
  if (isVulkan12) subgroup.pNext = &driver;
  if (base.apiVersion >= VK_API_VERSION_1_3) driver.pNext = &properties13;
  queryProperties(device, &subgroup);
  info.subgroupSize = subgroup.subgroupSize;
  info.minSubgroupSize = info.maxSubgroupSize = subgroup.subgroupSize;
  if (base.apiVersion >= VK_API_VERSION_1_3 && properties13.minSubgroupSize > 0) {
    info.minSubgroupSize = std::min(subgroup.subgroupSize, properties13.minSubgroupSize);
    info.maxSubgroupSize = std::max(subgroup.subgroupSize, properties13.maxSubgroupSize);
  }
  info.subgroupArithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  if (!isVulkan12) return info;
  info.driver = driver.driverName;

  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features features11{};
  features11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  features11.pNext = &features12;
  queryFeatures(device, &features11);
  info.shaderFloat16 = features12.shaderFloat16;
  info.storageBuffer16BitAccess = features11.storageBuffer16BitAccess;
  info.vulkanMemoryModel = features12.vulkanMemoryModel;
  info.bufferDeviceAddress = features12.bufferDeviceAddress;
  return info;
}

std::string deviceList(const std::vector<DeviceInfo> &devices) {
  std::string text =
      std::to_string(devices.size()) + (devices.size() == 1 ? " Vulkan device: " : " Vulkan devices: ");
  for (size_t i = 0; i < devices.size(); ++i)
    text += (i ? ", " : "") + std::to_string(devices[i].index) + ": " + devices[i].name;
  return text;
}

} // namespace

const char *resultName(VkResult result) {
  switch (result) {
#define GERBIL_RESULT_NAME(name)                                                                             \
  case name:                                                                                                 \
    return #name;
    GERBIL_RESULT_NAME(VK_SUCCESS)
    GERBIL_RESULT_NAME(VK_NOT_READY)
    GERBIL_RESULT_NAME(VK_TIMEOUT)
    GERBIL_RESULT_NAME(VK_EVENT_SET)
    GERBIL_RESULT_NAME(VK_EVENT_RESET)
    GERBIL_RESULT_NAME(VK_INCOMPLETE)
    GERBIL_RESULT_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    GERBIL_RESULT_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    GERBIL_RESULT_NAME(VK_ERROR_INITIALIZATION_FAILED)
    GERBIL_RESULT_NAME(VK_ERROR_DEVICE_LOST)
    GERBIL_RESULT_NAME(VK_ERROR_MEMORY_MAP_FAILED)
    GERBIL_RESULT_NAME(VK_ERROR_LAYER_NOT_PRESENT)
    GERBIL_RESULT_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    GERBIL_RESULT_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    GERBIL_RESULT_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    GERBIL_RESULT_NAME(VK_ERROR_TOO_MANY_OBJECTS)
    GERBIL_RESULT_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    GERBIL_RESULT_NAME(VK_ERROR_FRAGMENTED_POOL)
    GERBIL_RESULT_NAME(VK_ERROR_UNKNOWN)
    GERBIL_RESULT_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    GERBIL_RESULT_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    GERBIL_RESULT_NAME(VK_ERROR_FRAGMENTATION)
    GERBIL_RESULT_NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    GERBIL_RESULT_NAME(VK_PIPELINE_COMPILE_REQUIRED)
    GERBIL_RESULT_NAME(VK_ERROR_VALIDATION_FAILED_EXT)
    GERBIL_RESULT_NAME(VK_ERROR_INVALID_SHADER_NV)
    GERBIL_RESULT_NAME(VK_ERROR_NOT_PERMITTED_KHR)
#undef GERBIL_RESULT_NAME
  default:
    break;
  }
  // Codes this file doesn't know (newer extensions) are formatted into a per-thread buffer.
  thread_local char unknown[32];
  std::snprintf(unknown, sizeof unknown, "VkResult(%d)", int(result));
  return unknown;
}

VulkanError::VulkanError(const std::string &what, VkResult result)
    : std::runtime_error(what + " failed: " + resultName(result)), result_(result) {}

VulkanError::VulkanError(const std::string &what) : std::runtime_error(what) {}

// ---------------------------------------------------------------------------------------------------------
// Context state. Its destructor releases everything, so a constructor that throws half-way leaks nothing.

Context::Impl::~Impl() {
  if (device) {
    vkDeviceWaitIdle(device); // nothing should be in flight, but a timed-out submit may be
    for (VkPipeline p : pipelines) vkDestroyPipeline(device, p, nullptr);
    for (VkPipelineLayout l : pipelineLayouts) vkDestroyPipelineLayout(device, l, nullptr);
    for (VkDescriptorSetLayout l : setLayouts) vkDestroyDescriptorSetLayout(device, l, nullptr);
    for (DescriptorPool &p : descriptorPools) vkDestroyDescriptorPool(device, p.pool, nullptr);
    if (timestampPool) vkDestroyQueryPool(device, timestampPool, nullptr);
    for (VkQueryPool p : retiredTimestampPools) vkDestroyQueryPool(device, p, nullptr);
    destroyStaging();
    if (fence) vkDestroyFence(device, fence, nullptr);
    if (companionFence) vkDestroyFence(device, companionFence, nullptr);
    for (VkFence f : copyFences)
      if (f) vkDestroyFence(device, f, nullptr);
    for (VkFence f : recordedFences)
      if (f) vkDestroyFence(device, f, nullptr);
    if (commandPool) vkDestroyCommandPool(device, commandPool, nullptr);
    if (companionPool) vkDestroyCommandPool(device, companionPool, nullptr);
    vkDestroyDevice(device, nullptr);
  }
  destroyInstance(instance);
}

VkDescriptorPool Context::Impl::addDescriptorPool(uint32_t descriptors) {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerDescriptorPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(device, &info, nullptr, &pool), "vkCreateDescriptorPool");
  descriptorPools.push_back({pool, kSetsPerDescriptorPool, descriptors, kSetsPerDescriptorPool, descriptors});
  return pool;
}

VkDescriptorSet Context::Impl::allocateDescriptorSet(VkDescriptorSetLayout layout, uint32_t descriptors) {
  // Counting what is left avoids relying on the driver to report exhaustion (from Vulkan 1.1 on it may
  // also just succeed); the driver's own VK_ERROR_OUT_OF_POOL_MEMORY moves on to a new pool as well.
  for (;;) {
    bool freshPool = currentDescriptorPool == descriptorPools.size();
    if (freshPool) addDescriptorPool(std::max(kDescriptorsPerPool, descriptors));
    DescriptorPool &slot = descriptorPools[currentDescriptorPool];
    if (slot.setsLeft == 0 || slot.descriptorsLeft < descriptors) {
      ++currentDescriptorPool;
      continue;
    }
    VkDescriptorSetAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    info.descriptorPool = slot.pool;
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult result = vkAllocateDescriptorSets(device, &info, &set);
    if ((result == VK_ERROR_OUT_OF_POOL_MEMORY || result == VK_ERROR_FRAGMENTED_POOL) && !freshPool) {
      slot.setsLeft = 0;
      ++currentDescriptorPool;
      continue;
    }
    check(result, "vkAllocateDescriptorSets");
    --slot.setsLeft;
    slot.descriptorsLeft -= descriptors;
    return set;
  }
}

namespace {
// The command-line names of an option's values (every value of `Enum` in `values`, named by `nameOf`).
template <typename Enum, size_t N>
std::optional<Enum> parseByName(const std::string &name, const Enum (&values)[N],
                                const char *(*nameOf)(Enum)) {
  for (Enum value : values)
    if (name == nameOf(value)) return value;
  return std::nullopt;
}

template <typename Enum, size_t N>
std::vector<std::string> namesOf(const Enum (&values)[N], const char *(*nameOf)(Enum)) {
  std::vector<std::string> names;
  for (Enum value : values) names.emplace_back(nameOf(value));
  return names;
}
} // namespace

std::optional<MemoryAllocation> parseMemoryAllocation(const std::string &name) {
  return parseByName(name, kMemoryAllocations, memoryAllocationName);
}

std::vector<std::string> memoryAllocationNames() {
  return namesOf(kMemoryAllocations, memoryAllocationName);
}

std::optional<DispatchBarrier> parseDispatchBarrier(const std::string &name) {
  return parseByName(name, kDispatchBarriers, dispatchBarrierName);
}

std::vector<std::string> dispatchBarrierNames() {
  return namesOf(kDispatchBarriers, dispatchBarrierName);
}

const char *dispatchBarrierName(DispatchBarrier barrier) {
  switch (barrier) {
  case DispatchBarrier::Compute:
    return "compute";
  case DispatchBarrier::Storage:
    return "storage";
  case DispatchBarrier::Full:
    break;
  }
  return "full";
}

std::optional<MainQueueFamily> parseMainQueueFamily(const std::string &name) {
  return parseByName(name, kMainQueueFamilies, mainQueueFamilyName);
}

std::vector<std::string> mainQueueFamilyNames() {
  return namesOf(kMainQueueFamilies, mainQueueFamilyName);
}

const char *mainQueueFamilyName(MainQueueFamily family) {
  return family == MainQueueFamily::ComputeOnly ? "compute-only" : "first";
}

const char *memoryAllocationName(MemoryAllocation allocation) {
  switch (allocation) {
  case MemoryAllocation::Plain:
    return "plain";
  case MemoryAllocation::Dedicated:
    return "dedicated";
  case MemoryAllocation::Exportable:
    return "exportable";
  case MemoryAllocation::Priority:
    return "priority";
  }
  return "plain";
}

bool DeviceInfo::hasExtension(const std::string &name) const {
  return std::binary_search(extensions.begin(), extensions.end(), name);
}

std::vector<DeviceInfo> Context::listDevices() {
  std::atomic<uint32_t> unusedErrorCounter{0};
  InstanceHandles instance = createInstance(false, &unusedErrorCounter);
  try {
    std::vector<VkPhysicalDevice> devices = physicalDevices(instance.instance);
    std::vector<DeviceInfo> infos;
    for (uint32_t i = 0; i < devices.size(); ++i)
      infos.push_back(describeDevice(instance.instance, devices[i], i));
    destroyInstance(instance);
    return infos;
  } catch (...) {
    destroyInstance(instance);
    throw;
  }
}

Context::Context(const ContextOptions &options) : impl_(std::make_unique<Impl>()) {
  Impl &s = *impl_;
  s.forceStaging = options.forceStaging;
  s.allocation = options.allocation;
  s.stagingChunkBytes = std::max<uint64_t>(options.stagingChunkBytes, 4096);
  s.instance = createInstance(options.validation || envFlag("GERBIL_VK_VALIDATION"), &s.validationErrors);

  std::vector<VkPhysicalDevice> devices = physicalDevices(s.instance.instance);
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < devices.size(); ++i)
    infos.push_back(describeDevice(s.instance.instance, devices[i], i));
  uint32_t chosen = 0;
  if (options.deviceIndex == -1) {
    auto discrete =
        std::find_if(infos.begin(), infos.end(), [](const DeviceInfo &d) { return d.type == "discrete"; });
    if (discrete != infos.end()) chosen = discrete->index;
  } else if (options.deviceIndex < 0 || size_t(options.deviceIndex) >= infos.size()) {
    throw VulkanError("device " + std::to_string(options.deviceIndex) + " does not exist; " +
                      deviceList(infos));
  } else {
    chosen = uint32_t(options.deviceIndex);
  }
  info_ = infos[chosen];
  s.physical = devices[chosen];
  s.spinWaitMicroseconds =
      options.spinWaitMicroseconds.value_or(info_.type == "cpu" ? 0 : kDefaultSpinWaitMicroseconds);
  if (info_.apiVersion < VK_API_VERSION_1_2)
    throw VulkanError("device " + std::to_string(chosen) + " (" + info_.name + ") supports only Vulkan " +
                      versionString(info_.apiVersion) + "; gerbil needs 1.2 or later");
  QueueChoice queue = chooseComputeQueue(s.physical, options.mainQueueFamily == MainQueueFamily::ComputeOnly);
  if (!queue.found)
    throw VulkanError("device " + std::to_string(chosen) + " (" + info_.name + ") has no compute queue");
  s.queueFamily = queue.family;
  s.queueFamilyGraphics = queue.graphics;
  s.timestampValidBits = queue.timestampValidBits;
  // The companion queue asked for, where the device has it.
  const std::optional<uint32_t> otherComputeQueue = options.companionQueue == CompanionQueue::OtherFamily
                                                        ? otherComputeFamily(s.physical, queue.family)
                                                        : std::nullopt;
  const bool otherFamily = otherComputeQueue.has_value();
  const uint32_t companionFamily = otherComputeQueue.value_or(queue.family);
  const uint32_t queueCount =
      options.companionQueue == CompanionQueue::SameFamily ? std::min<uint32_t>(queue.queueCount, 2) : 1;

  VkPhysicalDeviceMaintenance4Properties maintenance4{};
  maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  bool isVulkan13 = info_.apiVersion >= VK_API_VERSION_1_3;
  if (isVulkan13) maintenance3.pNext = &maintenance4;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(s.physical, &properties);
  s.limits = properties.properties.limits;
  s.maxAllocations = options.maxAllocations.value_or(s.limits.maxMemoryAllocationCount);
  s.maxAllocationBytes = maintenance3.maxMemoryAllocationSize;
  if (isVulkan13) s.maxBufferBytes = maintenance4.maxBufferSize;
  vkGetPhysicalDeviceMemoryProperties(s.physical, &s.memory);

  // What the device supports (the 1.3 struct only on 1.3 devices), then only those of it that kernels use.
  VkPhysicalDeviceVulkan13Features supported13{};
  supported13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  VkPhysicalDeviceVulkan12Features supported12{};
  supported12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  supported12.pNext = isVulkan13 ? &supported13 : nullptr;
  VkPhysicalDeviceVulkan11Features supported11{};
  supported11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  supported11.pNext = &supported12;
  VkPhysicalDeviceFeatures2 supported{};
  supported.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  supported.pNext = &supported11;
  vkGetPhysicalDeviceFeatures2(s.physical, &supported);

  bool fp16 = options.enableFloat16;
  VkPhysicalDeviceVulkan13Features enabled13{};
  enabled13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  enabled13.subgroupSizeControl = supported13.subgroupSizeControl;
  enabled13.computeFullSubgroups = supported13.computeFullSubgroups;
  enabled13.synchronization2 =
      supported13.synchronization2 && options.dispatchBarrier == DispatchBarrier::Storage;
  // Without synchronization2 the storage barrier falls back to the compute one (dispatchBarrierKind says).
  s.dispatchBarrier = options.dispatchBarrier == DispatchBarrier::Storage && !enabled13.synchronization2
                          ? DispatchBarrier::Compute
                          : options.dispatchBarrier;
  VkPhysicalDeviceVulkan12Features enabled12{};
  enabled12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  enabled12.pNext = isVulkan13 ? &enabled13 : nullptr;
  enabled12.shaderFloat16 = fp16 && supported12.shaderFloat16;
  enabled12.shaderInt8 = supported12.shaderInt8;
  // Kernels on cooperative matrices are compiled with the Vulkan memory model (glslang requires it there).
  enabled12.vulkanMemoryModel = supported12.vulkanMemoryModel;
  enabled12.vulkanMemoryModelDeviceScope = supported12.vulkanMemoryModelDeviceScope;
  enabled12.storageBuffer8BitAccess = supported12.storageBuffer8BitAccess;
  // SPIR-V for Vulkan 1.0 declares storage buffers as Uniform + BufferBlock, which needs the uniform
  // variants.
  enabled12.uniformAndStorageBuffer8BitAccess = supported12.uniformAndStorageBuffer8BitAccess;
  enabled12.bufferDeviceAddress = options.bufferDeviceAddress && supported12.bufferDeviceAddress;
  bufferDeviceAddress_ = enabled12.bufferDeviceAddress;
  VkPhysicalDeviceVulkan11Features enabled11{};
  enabled11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  enabled11.pNext = &enabled12;
  enabled11.storageBuffer16BitAccess = fp16 && supported11.storageBuffer16BitAccess;
  enabled11.uniformAndStorageBuffer16BitAccess = fp16 && supported11.uniformAndStorageBuffer16BitAccess;
  VkPhysicalDeviceFeatures2 enabled{};
  enabled.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  enabled.pNext = &enabled11;
  enabled.features.shaderInt16 = supported.features.shaderInt16;
  enabled.features.shaderInt64 = supported.features.shaderInt64;
  info_.shaderFloat16 = enabled12.shaderFloat16;
  info_.storageBuffer16BitAccess = enabled11.storageBuffer16BitAccess;
  info_.bufferDeviceAddress = enabled12.bufferDeviceAddress;
  info_.timestamps = s.timestampValidBits > 0;

  // The requested extensions the device has; the others are the caller's to refuse (it names them).
  std::vector<const char *> extensionNames;
  for (const std::string &name : options.extensions)
    if (info_.hasExtension(name)) extensionNames.push_back(name.c_str());
  auto enabling = [&](const char *extension) {
    return std::any_of(extensionNames.begin(), extensionNames.end(),
                       [&](const char *e) { return std::strcmp(e, extension) == 0; });
  };
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cooperativeMatrixNV{};
  cooperativeMatrixNV.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (enabling(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    cooperativeMatrixNV.cooperativeMatrix = VK_TRUE;
    cooperativeMatrixNV.pNext = enabled.pNext;
    enabled.pNext = &cooperativeMatrixNV;
  }
  CooperativeMatrixFeaturesKHR cooperativeMatrixKHR{};
  cooperativeMatrixKHR.sType = kCooperativeMatrixFeaturesKHR;
  if (enabling("VK_KHR_cooperative_matrix")) {
    cooperativeMatrixKHR.cooperativeMatrix = VK_TRUE;
    cooperativeMatrixKHR.pNext = enabled.pNext;
    enabled.pNext = &cooperativeMatrixKHR;
  }
  // VK_NV_cooperative_matrix2: workgroup-scope matrices of flexible dimensions, the two features of it that
  // kernels use.
  CooperativeMatrix2FeaturesNV cooperativeMatrix2{};
  cooperativeMatrix2.sType = kCooperativeMatrix2FeaturesNV;
  if (enabling("VK_NV_cooperative_matrix2") && enabling("VK_KHR_cooperative_matrix")) {
    cooperativeMatrix2.workgroupScope = !info_.cooperativeMatrixWorkgroupShapes.empty();
    cooperativeMatrix2.flexibleDimensions = cooperativeMatrix2.workgroupScope;
    cooperativeMatrix2.pNext = enabled.pNext;
    enabled.pNext = &cooperativeMatrix2;
  }
  // VK_EXT_shader_atomic_float: float atomicAdd on storage buffers (split reductions that accumulate into
  // their result), the only feature of it that kernels use.
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomicFloat{};
  atomicFloat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT;
  if (enabling(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) {
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT supportedAtomics{};
    supportedAtomics.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT;
    queryFeatures(s.physical, &supportedAtomics);
    atomicFloat.shaderBufferFloat32AtomicAdd = supportedAtomics.shaderBufferFloat32AtomicAdd;
    atomicFloat.pNext = enabled.pNext;
    enabled.pNext = &atomicFloat;
    bufferFloatAtomicAdd_ = atomicFloat.shaderBufferFloat32AtomicAdd;
  }
  // The extension (and feature) that ContextOptions::allocation's way of allocating needs.
  const char *allocationExtension =
      options.allocation == MemoryAllocation::Exportable ? VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME
      : options.allocation == MemoryAllocation::Priority ? VK_EXT_MEMORY_PRIORITY_EXTENSION_NAME
                                                         : nullptr;
  if (allocationExtension) {
    if (!info_.hasExtension(allocationExtension))
      throw VulkanError(info_.name + " has no " + allocationExtension + " (memory allocation '" +
                        memoryAllocationName(options.allocation) + "')");
    if (!enabling(allocationExtension)) extensionNames.push_back(allocationExtension);
  }
  VkPhysicalDeviceMemoryPriorityFeaturesEXT memoryPriority{};
  memoryPriority.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PRIORITY_FEATURES_EXT;
  if (options.allocation == MemoryAllocation::Priority) {
    queryFeatures(s.physical, &memoryPriority);
    if (!memoryPriority.memoryPriority)
      throw VulkanError(info_.name + " has VK_EXT_memory_priority without its memoryPriority feature");
    memoryPriority.pNext = enabled.pNext;
    enabled.pNext = &memoryPriority;
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executableInfo{};
  executableInfo.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  if (options.pipelineStatistics &&
      info_.hasExtension(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
    queryFeatures(s.physical, &executableInfo);
    if (executableInfo.pipelineExecutableInfo) {
      extensionNames.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
      executableInfo.pNext = enabled.pNext;
      enabled.pNext = &executableInfo;
      pipelineStatistics_ = true;
    }
  }

  // The main queue, and the companion queue where asked for (Context::submitWithCompanionAndWait): a second
  // one of the main family, or the first of another family.
  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo queueInfos[2]{};
  for (VkDeviceQueueCreateInfo &info : queueInfos) {
    info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    info.queueCount = 1;
    info.pQueuePriorities = priorities;
  }
  queueInfos[0].queueFamilyIndex = s.queueFamily;
  queueInfos[0].queueCount = queueCount;
  queueInfos[1].queueFamilyIndex = companionFamily;
  VkDeviceCreateInfo deviceInfo{};
  deviceInfo.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  deviceInfo.pNext = &enabled;
  deviceInfo.queueCreateInfoCount = otherFamily ? 2 : 1;
  deviceInfo.pQueueCreateInfos = queueInfos;
  deviceInfo.enabledExtensionCount = static_cast<uint32_t>(extensionNames.size());
  deviceInfo.ppEnabledExtensionNames = extensionNames.data();
  check(vkCreateDevice(s.physical, &deviceInfo, nullptr, &s.device), "vkCreateDevice");
  device_ = s.device;
  vkGetDeviceQueue(s.device, s.queueFamily, 0, &s.queue);
  s.companionFamily = companionFamily;
  if (queueCount > 1) vkGetDeviceQueue(s.device, s.queueFamily, 1, &s.companionQueue);
  if (otherFamily) vkGetDeviceQueue(s.device, companionFamily, 0, &s.companionQueue);

  VkCommandPoolCreateInfo poolInfo{};
  poolInfo.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  poolInfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT; // command buffers are recycled one by one
  poolInfo.queueFamilyIndex = s.queueFamily;
  check(vkCreateCommandPool(s.device, &poolInfo, nullptr, &s.commandPool), "vkCreateCommandPool");
  if (otherFamily) {
    poolInfo.queueFamilyIndex = companionFamily;
    check(vkCreateCommandPool(s.device, &poolInfo, nullptr, &s.companionPool), "vkCreateCommandPool");
  }
  VkFenceCreateInfo fenceInfo{};
  fenceInfo.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vkCreateFence(s.device, &fenceInfo, nullptr, &s.fence), "vkCreateFence");
  check(vkCreateFence(s.device, &fenceInfo, nullptr, &s.companionFence), "vkCreateFence");
  for (VkFence &f : s.copyFences) check(vkCreateFence(s.device, &fenceInfo, nullptr, &f), "vkCreateFence");
  for (VkFence &f : s.recordedFences)
    check(vkCreateFence(s.device, &fenceInfo, nullptr, &f), "vkCreateFence");
}

Context::~Context() {
  // Buffers that outlive the context (a member declared before it, say) are freed now and left empty,
  // rather than freed later through a dangling context.
  std::vector<Buffer *> leftOver;
  for (auto &[handle, buffer] : impl_->liveBuffers) leftOver.push_back(buffer);
  for (Buffer *buffer : leftOver) buffer->release();
}

bool Context::validationEnabled() const {
  return impl_->instance.validation;
}
uint32_t Context::validationErrors() const {
  return impl_->validationErrors.load();
}
uint32_t Context::validationErrorsInProcess() {
  return gProcessValidationErrors.load();
}

namespace {
[[noreturn]] void throwValidationFailed(uint32_t errors) {
  throw VulkanError("vulkan validation reported " + std::to_string(errors) +
                    (errors == 1 ? " error" : " errors"));
}
} // namespace

void throwIfValidationFailed(const Context &ctx) {
  if (ctx.validationEnabled() && ctx.validationErrors() > 0) throwValidationFailed(ctx.validationErrors());
}

void throwIfValidationFailed() {
  if (uint32_t errors = Context::validationErrorsInProcess(); errors > 0) throwValidationFailed(errors);
}

// ---------------------------------------------------------------------------------------------------------
// Pipelines and descriptor sets

Pipeline Context::createPipeline(const std::vector<uint32_t> &spirv, uint32_t numBindings,
                                 uint32_t pushConstantBytes, const std::string &name) {
  Impl &s = *impl_;
  if (spirv.empty()) throw VulkanError("pipeline '" + name + "': the SPIR-V code is empty");
  if (spirv[0] != kSpirvMagic) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", spirv[0]);
    throw VulkanError("pipeline '" + name + "': not SPIR-V (the first word is " + text + ", not 0x07230203)");
  }
  if (pushConstantBytes % 4 != 0 || pushConstantBytes > s.limits.maxPushConstantsSize)
    throw VulkanError("pipeline '" + name + "': " + std::to_string(pushConstantBytes) +
                      " bytes of push constants; the device allows a multiple of 4 up to " +
                      std::to_string(s.limits.maxPushConstantsSize));
  if (numBindings > s.limits.maxPerStageDescriptorStorageBuffers)
    throw VulkanError("pipeline '" + name + "': " + std::to_string(numBindings) +
                      " storage buffers; the device allows " +
                      std::to_string(s.limits.maxPerStageDescriptorStorageBuffers) + " per shader");

  Pipeline pipeline;
  pipeline.numBindings = numBindings;
  pipeline.pushConstantBytes = pushConstantBytes;

  std::vector<VkDescriptorSetLayoutBinding> bindings(numBindings);
  for (uint32_t i = 0; i < numBindings; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo setLayoutInfo{};
  setLayoutInfo.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  setLayoutInfo.bindingCount = numBindings;
  setLayoutInfo.pBindings = bindings.data();
  check(vkCreateDescriptorSetLayout(s.device, &setLayoutInfo, nullptr, &pipeline.setLayout),
        "vkCreateDescriptorSetLayout for '" + name + "'");
  s.setLayouts.push_back(pipeline.setLayout); // recorded at once: ~Impl destroys it if a later step throws

  VkPushConstantRange pushRange{VK_SHADER_STAGE_COMPUTE_BIT, 0, pushConstantBytes};
  VkPipelineLayoutCreateInfo layoutInfo{};
  layoutInfo.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layoutInfo.setLayoutCount = 1;
  layoutInfo.pSetLayouts = &pipeline.setLayout;
  layoutInfo.pushConstantRangeCount = pushConstantBytes > 0 ? 1 : 0;
  layoutInfo.pPushConstantRanges = &pushRange;
  check(vkCreatePipelineLayout(s.device, &layoutInfo, nullptr, &pipeline.layout),
        "vkCreatePipelineLayout for '" + name + "'");
  s.pipelineLayouts.push_back(pipeline.layout);

  VkShaderModuleCreateInfo moduleInfo{};
  moduleInfo.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  moduleInfo.codeSize = spirv.size() * sizeof(uint32_t);
  moduleInfo.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(s.device, &moduleInfo, nullptr, &module),
        "vkCreateShaderModule for '" + name + "'");

  VkComputePipelineCreateInfo pipelineInfo{};
  pipelineInfo.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipelineInfo.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipelineInfo.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipelineInfo.stage.module = module;
  pipelineInfo.stage.pName = "main";
  pipelineInfo.layout = pipeline.layout;
  if (pipelineStatistics_) pipelineInfo.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkResult result =
      vkCreateComputePipelines(s.device, VK_NULL_HANDLE, 1, &pipelineInfo, nullptr, &pipeline.pipeline);
  vkDestroyShaderModule(s.device, module, nullptr); // the pipeline no longer needs it
  check(result, "vkCreateComputePipelines for '" + name + "'");
  s.pipelines.push_back(pipeline.pipeline);
  return pipeline;
}

VkDescriptorSet Context::createDescriptorSet(const Pipeline &pipeline,
                                             const std::vector<BufferRange> &ranges) {
  Impl &s = *impl_;
  if (!pipeline.pipeline) throw VulkanError("createDescriptorSet: the pipeline was never created");
  if (ranges.size() != pipeline.numBindings)
    throw VulkanError("createDescriptorSet: " + std::to_string(ranges.size()) +
                      " buffer ranges for a pipeline with " + std::to_string(pipeline.numBindings) +
                      " bindings");
  std::vector<VkDescriptorBufferInfo> infos(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    const BufferRange &range = ranges[i];
    std::string binding = "createDescriptorSet: binding " + std::to_string(i);
    auto live = s.liveBuffers.find(range.buffer);
    if (!range.buffer || live == s.liveBuffers.end())
      throw VulkanError(binding + " is not a live buffer of this context");
    uint64_t bufferBytes = live->second->size();
    uint64_t size = range.size == 0 ? VK_WHOLE_SIZE : range.size;
    if (range.offset >= bufferBytes || (size != VK_WHOLE_SIZE && size > bufferBytes - range.offset))
      throw VulkanError(binding + ": " + std::to_string(range.size) + " bytes at offset " +
                        std::to_string(range.offset) + " are outside the buffer of " +
                        std::to_string(bufferBytes) + " bytes");
    if (range.offset % s.limits.minStorageBufferOffsetAlignment != 0)
      throw VulkanError(binding + ": offset " + std::to_string(range.offset) + " is not a multiple of " +
                        std::to_string(s.limits.minStorageBufferOffsetAlignment) +
                        ", as the device requires");
    // An early, readable error for the limit that catches you on lavapipe (128 MiB per binding).
    uint64_t bound = size == VK_WHOLE_SIZE ? bufferBytes - range.offset : size;
    if (bound > s.limits.maxStorageBufferRange)
      throw VulkanError(binding + " spans " + mebibytes(bound) + "; the device binds at most " +
                        mebibytes(s.limits.maxStorageBufferRange) + " (maxStorageBufferRange)");
    infos[i] = {range.buffer, range.offset, size};
  }

  VkDescriptorSet set =
      s.allocateDescriptorSet(pipeline.setLayout, std::max<uint32_t>(pipeline.numBindings, 1));
  std::vector<VkWriteDescriptorSet> writes(ranges.size());
  for (uint32_t i = 0; i < writes.size(); ++i) {
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  if (!writes.empty()) vkUpdateDescriptorSets(s.device, uint32_t(writes.size()), writes.data(), 0, nullptr);
  return set;
}

void Context::resetDescriptorSets() {
  Impl &s = *impl_;
  for (Impl::DescriptorPool &pool : s.descriptorPools) {
    check(vkResetDescriptorPool(s.device, pool.pool, 0), "vkResetDescriptorPool");
    pool.setsLeft = pool.sets;
    pool.descriptorsLeft = pool.descriptors;
  }
  s.currentDescriptorPool = 0;
}

// ---------------------------------------------------------------------------------------------------------
// Command buffers

namespace {

VkCommandBuffer allocateCommandBuffer(VkDevice device, VkCommandPool pool) {
  VkCommandBufferAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = pool;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(device, &info, &cmd), "vkAllocateCommandBuffers");
  return cmd;
}

// A command buffer allocated from `pool` and begun (freed again if it cannot begin).
VkCommandBuffer beginNewCommandBuffer(VkDevice device, VkCommandPool pool, VkCommandBufferUsageFlags flags) {
  VkCommandBuffer cmd = allocateCommandBuffer(device, pool);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = flags;
  VkResult result = vkBeginCommandBuffer(cmd, &begin);
  if (result != VK_SUCCESS) {
    vkFreeCommandBuffers(device, pool, 1, &cmd);
    throw VulkanError("vkBeginCommandBuffer", result);
  }
  return cmd;
}

} // namespace

VkCommandBuffer Context::beginCommands() {
  Impl &s = *impl_;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  if (!s.idleCommandBuffers.empty()) {
    cmd = s.idleCommandBuffers.back();
    s.idleCommandBuffers.pop_back();
  } else {
    cmd = allocateCommandBuffer(s.device, s.commandPool);
  }
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult result = vkBeginCommandBuffer(cmd, &begin);
  if (result != VK_SUCCESS) {
    s.idleCommandBuffers.push_back(cmd);
    throw VulkanError("vkBeginCommandBuffer", result);
  }
  return cmd;
}

void Context::dispatch(VkCommandBuffer cmd, const Pipeline &p, VkDescriptorSet set, const void *pushConstants,
                       uint32_t pushBytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  const VkPhysicalDeviceLimits &limits = impl_->limits;
  if (!cmd || !p.pipeline) throw VulkanError("dispatch: no command buffer or no pipeline");
  if (pushBytes > p.pushConstantBytes || pushBytes % 4 != 0 || (pushBytes > 0 && !pushConstants))
    throw VulkanError("dispatch: " + std::to_string(pushBytes) +
                      " bytes of push constants for a pipeline with " + std::to_string(p.pushConstantBytes));
  if (p.numBindings > 0 && !set)
    throw VulkanError("dispatch: the pipeline has bindings but no descriptor set was given");
  if (gx > limits.maxComputeWorkGroupCount[0] || gy > limits.maxComputeWorkGroupCount[1] ||
      gz > limits.maxComputeWorkGroupCount[2])
    throw VulkanError("dispatch: grid " + std::to_string(gx) + "x" + std::to_string(gy) + "x" +
                      std::to_string(gz) + " exceeds the device's " +
                      std::to_string(limits.maxComputeWorkGroupCount[0]) + "x" +
                      std::to_string(limits.maxComputeWorkGroupCount[1]) + "x" +
                      std::to_string(limits.maxComputeWorkGroupCount[2]));
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  if (set) vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (pushBytes > 0)
    vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pushBytes, pushConstants);
  vkCmdDispatch(cmd, gx, gy, gz);
}

void Context::computeBarrier(VkCommandBuffer cmd) {
  allComputeAndTransferBarrier(cmd);
}

void Context::dispatchBarrier(VkCommandBuffer cmd) {
  switch (impl_->dispatchBarrier) {
  case DispatchBarrier::Compute:
    detail::computeOnlyBarrier(cmd);
    return;
  case DispatchBarrier::Storage:
    detail::storageOnlyBarrier(cmd);
    return;
  case DispatchBarrier::Full:
    break;
  }
  allComputeAndTransferBarrier(cmd);
}

DispatchBarrier Context::dispatchBarrierKind() const {
  return impl_->dispatchBarrier;
}

namespace detail {
// Polls `fence` for up to spinMicroseconds, then blocks. Throws if the GPU does not finish within
// kFenceTimeoutSeconds or the wait fails.
void waitForFence(VkDevice device, VkFence fence, uint32_t spinMicroseconds) {
  VkResult result = VK_NOT_READY;
  if (spinMicroseconds > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spinMicroseconds);
    do result = vkGetFenceStatus(device, fence);
    while (result == VK_NOT_READY && std::chrono::steady_clock::now() < until);
  }
  if (result == VK_NOT_READY)
    result = vkWaitForFences(device, 1, &fence, VK_TRUE, kFenceTimeoutSeconds * 1000000000ull);
  if (result == VK_TIMEOUT)
    throw VulkanError("GPU did not finish within " + std::to_string(kFenceTimeoutSeconds) + " s");
  check(result, "vkWaitForFences");
}

// Submits one command buffer, signalling `fence` (or none) when it completes.
VkResult submitOne(VkQueue queue, VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  return vkQueueSubmit(queue, 1, &submit, fence);
}
} // namespace detail

void Context::submit(VkCommandBuffer cmd) {
  Impl &s = *impl_;
  if (!cmd) throw VulkanError("submit: no command buffer");
  VkResult result = vkEndCommandBuffer(cmd);
  if (result == VK_SUCCESS) result = submitOne(s.queue, cmd, VK_NULL_HANDLE);
  if (result != VK_SUCCESS) {
    s.recycle(cmd);
    throw VulkanError("vkEndCommandBuffer/vkQueueSubmit", result);
  }
  s.submittedCommandBuffers.push_back(cmd);
}

void Context::submitAndWait(VkCommandBuffer cmd) {
  Impl &s = *impl_;
  if (!cmd) throw VulkanError("submitAndWait: no command buffer");
  // Fence waits make device writes available but not visible to the host: mapped buffers need this barrier.
  barrierToHost(cmd);

  // The command buffer goes back to the idle list unless it may still be running (a timeout).
  auto recycle = [&] { s.recycle(cmd); };
  VkResult result = vkEndCommandBuffer(cmd);
  if (result != VK_SUCCESS) {
    recycle();
    throw VulkanError("vkEndCommandBuffer", result);
  }
  result = vkResetFences(s.device, 1, &s.fence);
  if (result != VK_SUCCESS) {
    recycle();
    throw VulkanError("vkResetFences", result);
  }
  result = submitOne(s.queue, cmd, s.fence);
  if (result != VK_SUCCESS) {
    recycle();
    throw VulkanError("vkQueueSubmit", result);
  }
  waitForFence(s.device, s.fence, s.spinWaitMicroseconds);
  recycle();
  // Earlier submissions finished too: this one's barriers waited for their commands, and its fence for it.
  s.recycleSubmitted();
}

bool Context::hasCompanionQueue() const {
  return impl_->companionQueue != VK_NULL_HANDLE;
}

uint32_t Context::queueFamily() const {
  return impl_->queueFamily;
}

bool Context::queueFamilyHasGraphics() const {
  return impl_->queueFamilyGraphics;
}

VkCommandBuffer Context::beginCompanionCommands() {
  Impl &s = *impl_;
  if (!s.companionQueue) throw VulkanError("beginCompanionCommands: the device has no companion queue");
  if (!s.companionPool) return beginCommands();
  return beginNewCommandBuffer(s.device, s.companionPool, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
}

void Context::Impl::recycleCompanion(VkCommandBuffer cmd) {
  if (!companionPool) return recycle(cmd);
  if (cmd) vkFreeCommandBuffers(device, companionPool, 1, &cmd);
}

void Context::submitWithCompanionAndWait(VkCommandBuffer cmd, VkCommandBuffer companion) {
  Impl &s = *impl_;
  if (!s.companionQueue) throw VulkanError("submitWithCompanionAndWait: the device has no companion queue");
  if (!cmd || !companion) throw VulkanError("submitWithCompanionAndWait: no command buffer");
  VkResult result = vkEndCommandBuffer(companion);
  if (result == VK_SUCCESS) result = vkResetFences(s.device, 1, &s.companionFence);
  if (result == VK_SUCCESS) result = detail::submitOne(s.companionQueue, companion, s.companionFence);
  if (result != VK_SUCCESS) {
    s.recycleCompanion(companion);
    s.recycle(cmd);
    throw VulkanError("submitting to the companion queue", result);
  }
  // The companion's command buffer is recycled only once its fence has signalled, whatever the main queue's
  // submission does.
  try {
    submitAndWait(cmd);
  } catch (...) {
    detail::waitForFence(s.device, s.companionFence, s.spinWaitMicroseconds);
    s.recycleCompanion(companion);
    throw;
  }
  detail::waitForFence(s.device, s.companionFence, s.spinWaitMicroseconds);
  s.recycleCompanion(companion);
}

void Context::Impl::recycle(VkCommandBuffer cmd) {
  if (cmd && vkResetCommandBuffer(cmd, 0) == VK_SUCCESS) idleCommandBuffers.push_back(cmd);
}

void Context::Impl::submitCopy(VkCommandBuffer cmd, int half) {
  check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  check(vkResetFences(device, 1, &copyFences[half]), "vkResetFences");
  check(submitOne(queue, cmd, copyFences[half]), "vkQueueSubmit");
}

void Context::Impl::waitForCopy(int half) {
  waitForFence(device, copyFences[half], spinWaitMicroseconds);
}

void Context::Impl::recycleSubmitted() {
  for (VkCommandBuffer earlier : submittedCommandBuffers) recycle(earlier);
  submittedCommandBuffers.clear();
}

// ---------------------------------------------------------------------------------------------------------
// Timestamps

void Context::resetTimestamps(VkCommandBuffer cmd, uint32_t count) {
  Impl &s = *impl_;
  if (!info_.timestamps)
    throw VulkanError("device '" + info_.name + "' has no timestamps on its compute queue");
  if (count == 0) return;
  if (count > s.timestampSlots) {
    if (s.timestampPool) s.retiredTimestampPools.push_back(s.timestampPool);
    s.timestampPool = VK_NULL_HANDLE;
    s.timestampSlots = 0;
    uint32_t slots = std::max(count, kMinTimestampSlots);
    VkQueryPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = slots;
    check(vkCreateQueryPool(s.device, &info, nullptr, &s.timestampPool), "vkCreateQueryPool");
    s.timestampSlots = slots;
  }
  vkCmdResetQueryPool(cmd, s.timestampPool, 0, count);
}

void Context::writeTimestamp(VkCommandBuffer cmd, uint32_t slot) {
  Impl &s = *impl_;
  if (slot >= s.timestampSlots)
    throw VulkanError("writeTimestamp: slot " + std::to_string(slot) +
                      " was not reset (resetTimestamps made " + std::to_string(s.timestampSlots) + ")");
  // Bottom of pipe: the time when everything recorded before has finished.
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s.timestampPool, slot);
}

std::vector<uint64_t> Context::readTimestamps(uint32_t count) {
  Impl &s = *impl_;
  if (count == 0) return {};
  if (count > s.timestampSlots)
    throw VulkanError("readTimestamps: " + std::to_string(count) + " slots asked for, " +
                      std::to_string(s.timestampSlots) + " exist");
  // No WAIT_BIT: the work was already waited for, and waiting on a slot never written could hang. Each
  // result is followed by its availability word instead.
  std::vector<uint64_t> raw(2 * size_t(count));
  VkResult result = vkGetQueryPoolResults(s.device, s.timestampPool, 0, count, raw.size() * sizeof(uint64_t),
                                          raw.data(), 2 * sizeof(uint64_t),
                                          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
  if (result != VK_SUCCESS && result != VK_NOT_READY) throw VulkanError("vkGetQueryPoolResults", result);
  uint64_t validMask = s.timestampValidBits >= 64 ? UINT64_MAX : (1ull << s.timestampValidBits) - 1;
  std::vector<uint64_t> nanoseconds(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (raw[2 * i + 1] == 0)
      throw VulkanError("readTimestamps: slot " + std::to_string(i) +
                        " was not written by a finished submission");
    // long double keeps all 64 bits of a tick count; a double would round ns after ~100 days of uptime.
    nanoseconds[i] = uint64_t((long double)(raw[2 * i] & validMask) * info_.timestampPeriodNs + 0.5L);
  }
  return nanoseconds;
}

// ---------------------------------------------------------------------------------------------------------
// Reusable command buffers

VkCommandBuffer Context::beginReusableCommands() {
  return beginNewCommandBuffer(impl_->device, impl_->commandPool, 0);
}

void Context::endCommands(VkCommandBuffer cmd) {
  barrierToHost(cmd);
  check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
}

void Context::submitRecorded(VkCommandBuffer cmd) {
  Impl &s = *impl_;
  check(vkResetFences(s.device, 1, &s.fence), "vkResetFences");
  check(submitOne(s.queue, cmd, s.fence), "vkQueueSubmit");
  waitForFence(s.device, s.fence, s.spinWaitMicroseconds);
}

uint32_t Context::submitRecordedAsync(VkCommandBuffer cmd) {
  Impl &s = *impl_;
  uint32_t ticket = 0;
  while (ticket < kRecordedInFlight && s.recordedPending[ticket]) ++ticket;
  if (ticket == kRecordedInFlight)
    throw VulkanError("submitRecordedAsync: " + std::to_string(kRecordedInFlight) +
                      " submissions are already in flight");
  check(vkResetFences(s.device, 1, &s.recordedFences[ticket]), "vkResetFences");
  check(submitOne(s.queue, cmd, s.recordedFences[ticket]), "vkQueueSubmit");
  s.recordedPending[ticket] = true;
  return ticket;
}

void Context::waitRecorded(uint32_t ticket) {
  Impl &s = *impl_;
  if (ticket >= kRecordedInFlight || !s.recordedPending[ticket])
    throw VulkanError("waitRecorded: ticket " + std::to_string(ticket) + " is not in flight");
  // Not pending any more even if the wait throws: a timed-out GPU is not waited for twice.
  s.recordedPending[ticket] = false;
  waitForFence(s.device, s.recordedFences[ticket], s.spinWaitMicroseconds);
}

void Context::freeCommands(VkCommandBuffer cmd) {
  if (cmd) vkFreeCommandBuffers(impl_->device, impl_->commandPool, 1, &cmd);
}

} // namespace gerbil::vk
