// Assembles the GLSL of one kernel: the family's template from kernels/, specialised with #defines, and
// the storage-buffer declarations with their typed load_/store_ accessors.
#pragma once

#include "runtime/plan/Plan.h"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gerbil::codegen {

// TokenIds / TokenIdsWrite: int32 arrays accessed directly by name (no load_/store_ accessors).
enum class Access { TokenIds, TokenIdsWrite, Read, Write, ReadWrite };

struct KernelBinding {
  std::string name; // the template calls load_<name> / store_<name>
  Access access = Access::Read;
  plan::DType dtype = plan::DType::F32;
  // Also declare NAME_v4[]: 16-byte elements (vec4 of f32, or uvec4 of 8 packed 16-bit values) of the same
  // buffer, for kernels that load 16 bytes at a time.
  bool vec4View = false;
  // Other workgroups of the same dispatch write what this one reads (cross-workgroup results): `coherent`,
  // so reads after an atomic hand-over see the other workgroups' writes.
  bool coherent = false;
  // 16-bit values addressed one at a time (an f16 KV cache, written a value per invocation): float16_t[]
  // (GL_EXT_shader_16bit_storage, the device's storageBuffer16BitAccess) with a store_<name> of one value,
  // and NAME_v4[] of uvec2 (4 packed values, 8 bytes, for unpackHalf2x16: kernels may keep them packed in
  // registers until they use them); load_<name> returns f32. Set by holdHalfValues.
  bool halfValues = false;
};

// Kernels that reduce with subgroup operations size their arrays of per-subgroup partials for subgroups of
// at least this many invocations; plans that use them require it of the device.
inline constexpr uint32_t kMinSubgroupSize = 4;

struct KernelSource {
  std::string templateFile; // kernels/<templateFile>
  // Templates of shared functions that templateFile calls, included before it (kernels/<file>).
  std::vector<std::string> libraries;
  std::vector<std::pair<std::string, std::string>> defines;
  std::vector<KernelBinding> bindings; // binding i of the descriptor set
  // Optional inputs the template reads through load_<name> that this instance does not bind (a bias the
  // model lacks): their load_<name> returns 0, so templates need no #if around the read.
  std::vector<std::string> absentInputs;
  std::array<int64_t, 3> workgroup = {64, 1, 1};
  std::vector<std::string> extensions; // GLSL extensions beyond the ones every kernel enables
  // Device needs beyond what every Vulkan 1.2 device has (the plan's Requirements gather them).
  std::vector<std::string> deviceExtensions;
  bool needsFloat16 = false;
  bool needsVulkanMemoryModel = false;
  uint32_t subgroupSize = 0;      // the size the kernel assumes; 0: any
  uint32_t sharedMemoryBytes = 0; // when above the 16 KiB every device has
  bool needsReduction = false;
  // Enables GL_KHR_shader_subgroup_arithmetic and defines SUBGROUP_OPS 1 (templates that support it fall
  // back to shared-memory reductions under SUBGROUP_OPS 0) and MIN_SUBGROUP_SIZE.
  bool subgroupOps = false;
  // The bindings are reached through device addresses in the push constants, not descriptors
  // (plan::BufferAccess::Addresses): templates read and write them by the same names either way.
  bool byAddress = false;
  // The kernel's GL_NV_cooperative_matrix code runs through VK_KHR_cooperative_matrix: its SPIR-V is
  // retargeted after compiling (CooperativeMatrixKHR.h). Set by useKhrCooperativeMatrix.
  bool khrCooperativeMatrix = false;
};

// Moves a kernel on NV cooperative matrices to the KHR extension (its device extension and the SPIR-V
// retargeting); other kernels are left as they are.
void useKhrCooperativeMatrix(KernelSource &kernel);

// Throws CodegenError when the template does not exist.
std::string writeKernel(const KernelSource &kernel);

// A #define for kernels of one family (its template's name without .glsl; empty: every kernel), as
// gerbilc --kernel-define and gerbil-kernel-bench --define give them: variants a template reads with
// #ifndef defaults, to time against the plan's own.
struct KernelDefine {
  std::string family, name, value;
};
// "[FAMILY:]NAME[=VALUE]" (VALUE 1 when absent); throws CodegenError for a name that is not an identifier or
// a family no template has.
KernelDefine parseKernelDefine(const std::string &text);
bool appliesTo(const KernelDefine &define, const KernelSource &kernel);
// Sets NAME to VALUE: replaces codegen's value where it defines NAME (a second #define would not compile).
void setDefine(KernelSource &kernel, const std::string &name, const std::string &value);

// Makes a binding hold 16-bit values addressed one at a time (KernelBinding::halfValues).
void holdHalfValues(KernelBinding &binding);
// Stores the kernel's KV-cache bindings (k_cache, v_cache) in f16, and defines CACHE_HALF 1 for the
// templates that read their NAME_v4 views; returns how many it has.
int holdCacheInHalf(KernelSource &kernel);
// Whether a binding of the kernel holds halfValues (the device needs storageBuffer16BitAccess).
bool usesHalfValues(const KernelSource &kernel);

// A GLSL float literal that round-trips an f32.
std::string glslFloat(double value);

// A GLSL uint literal ("64u"), the form of the kernels' size #defines.
inline std::string uintValue(int64_t value) {
  return std::to_string(value) + "u";
}

} // namespace gerbil::codegen
