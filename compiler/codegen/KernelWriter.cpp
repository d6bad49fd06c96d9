#include "compiler/codegen/KernelWriter.h"

#include "compiler/codegen/ShaderCompiler.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string_view>

const std::vector<std::pair<std::string_view, std::string_view>> &gerbilKernelSources();

namespace gerbil::codegen {
namespace {

std::string_view kernelFile(const std::string &name) {
  for (const auto &[file, text] : gerbilKernelSources())
    if (file == name) return text;
  throw CodegenError("no kernel template '" + name + "' is built in");
}

// Declares a storage block of one array, `type name[]`: binding `index` of the descriptor set, or a buffer
// reference type whose address is the push constants' addresses[index], reached through a macro of the
// array's name (its member is named otherwise: glslang expands a macro again inside the arguments of another,
// so a macro may not yield its own name). `qualifier` ends in a space.
std::string declareArray(const std::string &block, const std::string &qualifier, const std::string &type,
                         const std::string &name, size_t index, bool byAddress) {
  if (!byAddress)
    return "layout(std430, binding = " + std::to_string(index) + ") " + qualifier + "buffer " + block +
           " { " + type + " " + name + "[]; };\n";
  // REFERENCE_RESTRICT (restrict unless a variant defines it empty): whether the driver gets restrict
  // references, for timing against the sync bench's kernel, whose references have none.
  std::string referenceQualifier = qualifier;
  if (size_t at = referenceQualifier.find("restrict "); at != std::string::npos)
    referenceQualifier.replace(at, 9, "REFERENCE_RESTRICT ");
  return "layout(buffer_reference, std430, buffer_reference_align = " +
         std::to_string(plan::kBufferAddressAlignment) + ") " + referenceQualifier + "buffer " + block +
         " { " + type + " array_[]; };\n#define " + name + " " + block + "(step_.addresses[" +
         std::to_string(index) + "]).array_\n";
}

std::string declare(const KernelBinding &b, size_t index, bool byAddress) {
  std::string block = "Binding_" + b.name;
  std::string array = b.name + "_";
  std::string v4 = b.name + "_v4";
  if (b.access == Access::TokenIds)
    return declareArray(block, "restrict readonly ", "int", b.name, index, byAddress);
  if (b.access == Access::TokenIdsWrite)
    return declareArray(block, b.coherent ? "coherent restrict " : "restrict ", "int", b.name, index,
                        byAddress);
  std::string qualifier = b.access == Access::Read ? "restrict readonly " : b.access == Access::Write ? "restrict writeonly " : "restrict ";
  if (b.coherent) qualifier = "coherent " + qualifier;
  if (b.halfValues) {
    std::string text = declareArray(block, qualifier, "float16_t", array, index, byAddress);
    if (b.vec4View) text += declareArray(block + "_v4", qualifier, "uvec2", v4, index, byAddress);
    if (b.access != Access::Write)
      text += "float load_" + b.name + "(uint i) { return float(" + array + "[i]); }\n";
    if (b.access != Access::Read)
      text += "void store_" + b.name + "(uint i, float v) { " + array + "[i] = float16_t(v); }\n";
    return text;
  }
  bool packed16 = b.dtype == plan::DType::F16 || b.dtype == plan::DType::BF16;
  std::string text = declareArray(block, qualifier, packed16 ? "uint" : "float", array, index, byAddress);
  if (b.vec4View)
    text += declareArray(block + "_v4", qualifier, packed16 ? "uvec4" : "vec4", v4, index, byAddress);
  if (b.access != Access::Write) {
    text += "float load_" + b.name + "(uint i) { ";
    if (b.dtype == plan::DType::F16) text += "return unpackHalf2x16(" + array + "[i >> 1])[i & 1u]; }\n";
    else if (b.dtype == plan::DType::BF16)
      text += "uint w = " + array + "[i >> 1]; return uintBitsToFloat((i & 1u) == 0u ? w << 16 : w & 0xffff0000u); }\n";
    else text += "return " + array + "[i]; }\n";
  }
  if (b.access != Access::Read) {
    // 16-bit results are written as whole words of packed values (NAME_[] or NAME_v4[]): no store_.
    if (!packed16) text += "void store_" + b.name + "(uint i, float v) { " + array + "[i] = v; }\n";
  }
  return text;
}

// The step's push constants: T, the one-row gemv's row, and by address every binding's address.
std::string declarePushConstants(const KernelSource &kernel) {
  std::string text = "layout(push_constant) uniform Step {\n"
                     "  uint tokens;  // T of this step\n"
                     "  uint firstRow;  // the row a one-row gemv works on (the last-row logits of a prefill "
                     "step), else 0\n";
  if (kernel.byAddress)
    text += "  uvec2 addresses[" + std::to_string(kernel.bindings.size() + 1) +
            "];  // the bindings', state last\n";
  return text + "} step_;\n";
}

} // namespace

std::string glslFloat(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  std::string text = buffer;
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

void useKhrCooperativeMatrix(KernelSource &kernel) {
  auto nv =
      std::find(kernel.deviceExtensions.begin(), kernel.deviceExtensions.end(), "VK_NV_cooperative_matrix");
  if (nv == kernel.deviceExtensions.end()) return;
  *nv = "VK_KHR_cooperative_matrix";
  kernel.khrCooperativeMatrix = true;
}

std::string writeKernel(const KernelSource &kernel) {
  std::string text = "#version 450\n#extension GL_EXT_control_flow_attributes : enable\n";
  for (const std::string &extension : kernel.extensions) text += "#extension " + extension + " : require\n";
  if (kernel.khrCooperativeMatrix)
    text += "// compiled with GL_NV_cooperative_matrix, run as SPV_KHR_cooperative_matrix\n";
  if (usesHalfValues(kernel)) text += "#extension GL_EXT_shader_16bit_storage : require\n";
  if (kernel.byAddress)
    text +=
        "#extension GL_EXT_buffer_reference : require\n#extension GL_EXT_buffer_reference_uvec2 : require\n";
  if (kernel.subgroupOps)
    text += "#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_arithmetic "
            ": require\n";
  const auto &wg = kernel.workgroup;
  text += "layout(local_size_x = " + std::to_string(wg[0]) + ", local_size_y = " + std::to_string(wg[1]) +
          ", local_size_z = " + std::to_string(wg[2]) + ") in;\n";
  text += "#define WORKGROUP " + std::to_string(wg[0]) + "u\n";
  for (const auto &[name, value] : kernel.defines) text += "#define " + name + " " + value + "\n";
  if (kernel.needsReduction) text += "#define NEEDS_REDUCTION 1\n";
  text += std::string("#define SUBGROUP_OPS ") + (kernel.subgroupOps ? "1" : "0") + "\n";
  text += "#define MIN_SUBGROUP_SIZE " + std::to_string(kMinSubgroupSize) + "u\n";
  if (kernel.byAddress) text += "#ifndef REFERENCE_RESTRICT\n#define REFERENCE_RESTRICT restrict\n#endif\n";
  text += declarePushConstants(kernel);
  text += kernelFile("common.glsl");
  for (size_t i = 0; i < kernel.bindings.size(); ++i)
    text += declare(kernel.bindings[i], i, kernel.byAddress);
  for (const std::string &name : kernel.absentInputs)
    text += "float load_" + name + "(uint i) { return 0.0; }  // not bound: this model has none\n";
  // The state buffer is always the last binding (plan::BufferKind::State).
  const std::string state = "uint position; uint generated; uint tokens[];";
  const size_t stateIndex = kernel.bindings.size();
  if (kernel.byAddress)
    text += "layout(buffer_reference, std430, buffer_reference_align = " +
            std::to_string(plan::kBufferAddressAlignment) + ") REFERENCE_RESTRICT buffer Binding_state { " +
            state + " };\n#define state_ Binding_state(step_.addresses[" + std::to_string(stateIndex) +
            "])\n";
  else
    text += "layout(std430, binding = " + std::to_string(stateIndex) + ") restrict buffer Binding_state { " +
            state + " } state_;\n";
  for (const std::string &library : kernel.libraries) text += kernelFile(library);
  text += kernelFile(kernel.templateFile);
  return text;
}

KernelDefine parseKernelDefine(const std::string &text) {
  KernelDefine define;
  size_t colon = text.find(':'), eq = text.find('=');
  if (colon != std::string::npos && (eq == std::string::npos || colon < eq)) {
    define.family = text.substr(0, colon);
    bool known = false;
    for (const auto &[file, source] : gerbilKernelSources()) known = known || file == define.family + ".glsl";
    if (!known)
      throw CodegenError("'" + text + "': no kernel family '" + define.family +
                         "' (the templates' names, e.g. attention_decode, gemv, matmul_coop)");
  }
  const size_t nameStart = define.family.empty() ? 0 : colon + 1;
  define.name = text.substr(nameStart, eq == std::string::npos ? std::string::npos : eq - nameStart);
  define.value = eq == std::string::npos ? "1" : text.substr(eq + 1);
  const bool identifier = !define.name.empty() && !std::isdigit(static_cast<unsigned char>(define.name[0])) &&
                          std::all_of(define.name.begin(), define.name.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                          });
  if (!identifier) throw CodegenError("'" + text + "': '" + define.name + "' is not a macro name");
  if (define.value.find('\n') != std::string::npos)
    throw CodegenError("'" + define.name + "': the value spans lines");
  return define;
}

bool appliesTo(const KernelDefine &define, const KernelSource &kernel) {
  return define.family.empty() || kernel.templateFile == define.family + ".glsl";
}

void setDefine(KernelSource &kernel, const std::string &name, const std::string &value) {
  auto same = [&](const auto &define) { return define.first == name; };
  if (auto it = std::find_if(kernel.defines.begin(), kernel.defines.end(), same); it != kernel.defines.end())
    it->second = value;
  else
    kernel.defines.emplace_back(name, value);
}

void holdHalfValues(KernelBinding &binding) {
  binding.dtype = plan::DType::F16;
  binding.halfValues = true;
}

int holdCacheInHalf(KernelSource &kernel) {
  int count = 0;
  for (KernelBinding &b : kernel.bindings)
    if (b.name == "k_cache" || b.name == "v_cache") holdHalfValues(b), ++count;
  if (count) setDefine(kernel, "CACHE_HALF", "1");
  return count;
}

bool usesHalfValues(const KernelSource &kernel) {
  return std::any_of(kernel.bindings.begin(), kernel.bindings.end(),
                     [](const KernelBinding &b) { return b.halfValues; });
}

} // namespace gerbil::codegen
