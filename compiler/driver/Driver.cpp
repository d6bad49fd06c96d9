#include "compiler/driver/Driver.h"

#include "compiler/codegen/PlanBuilder.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "compiler/driver/TargetChoice.h"
#include "compiler/frontend/Frontend.h"
#include "compiler/generator/Generator.h"
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/Passes.h"
#include "gerbil/Passes/TargetProfile.h"
#include "runtime/vulkan/Device.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_os_ostream.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace gerbil {
namespace {

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FrontendError(path + ": cannot read the file");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void printModule(mlir::ModuleOp module, const std::string &path, std::ostream &out) {
  mlir::OpPrintingFlags flags;
  if (path.empty() || path == "-") {
    llvm::raw_os_ostream os(out);
    module.print(os, flags);
    return;
  }
  std::ofstream file(path);
  if (!file) throw plan::PlanError(path + ": cannot write the file");
  llvm::raw_os_ostream os(file);
  module.print(os, flags);
}

} // namespace

std::string autoTarget(std::ostream &err) {
  std::vector<vk::DeviceInfo> devices;
  try {
    devices = vk::Context::listDevices();
  } catch (const vk::VulkanError &e) {
    err << "gerbilc: note: --target auto found no Vulkan device (" << e.what()
        << "); compiling for generic\n";
    return "generic";
  }
  if (devices.empty()) return "generic";
  // The device gerbil-exec picks by default: the first discrete GPU, else the first device.
  auto device = std::find_if(devices.begin(), devices.end(),
                             [](const vk::DeviceInfo &d) { return d.type == "discrete"; });
  if (device == devices.end()) device = devices.begin();
  std::string target = chooseTarget(*device);
  err << "gerbilc: note: --target auto: " << device->name << " -> " << target << "\n";
  return target;
}

namespace {
// Whether gerbil-prefetch-weights gave any decode launch page words (a prefetch stride over 16 bytes).
bool readsPageWords(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](mlir::gerbil::DispatchOp dispatch) {
    if (std::optional<llvm::ArrayRef<int64_t>> strides = dispatch.getPrefetchStrides())
      found = found || llvm::any_of(*strides, [](int64_t stride) { return stride > 16; });
  });
  return found;
}

// The weights that only embedding lookups read (the table of gerbil.embedding or position_embedding, in a
// dispatch of its own or fused into a projection's): a decode step reads one row of them.
std::set<std::string> lookedUpWeights(mlir::ModuleOp module) {
  namespace gd = mlir::gerbil;
  auto isTable = [](mlir::OpOperand &use) {
    if (auto e = mlir::dyn_cast<gd::EmbeddingOp>(use.getOwner())) return e.getTable() == use.get();
    if (auto p = mlir::dyn_cast<gd::PositionEmbeddingOp>(use.getOwner())) return p.getTable() == use.get();
    return false;
  };
  std::set<std::string> names;
  module.walk([&](gd::WeightRefOp ref) {
    bool onlyLookedUp = true;
    for (mlir::OpOperand &use : ref->getUses()) {
      auto dispatch = mlir::dyn_cast<gd::DispatchOp>(use.getOwner());
      if (!dispatch) {
        onlyLookedUp = onlyLookedUp && isTable(use);
        continue;
      }
      for (mlir::OpOperand &inner : dispatch.getBody().front().getArgument(use.getOperandNumber()).getUses())
        onlyLookedUp = onlyLookedUp && isTable(inner);
    }
    if (onlyLookedUp) names.insert(ref.getName().str());
  });
  return names;
}
} // namespace

std::string kvCacheDtype(const std::string &requested, const mlir::gerbil::TargetProfile &target,
                         const std::string &weightDtype) {
  if (requested != "auto") return requested;
  // The tensor-core prefill attention (f16 weights on a cooperative-matrix target) stages an f16 cache as
  // it is stored, which made it faster than on f32 (sweep ch, H100: the 8B's 36.4 -> 31.0 µs alone, prefill
  // 34.61 -> 34.29 ms; decode level); half the memory, and the fixtures' greedy tokens the same. Elsewhere
  // the f32 cache stays: no measurement says f16 is faster there. A model whose head dim the tensor-core
  // attention does not fit (fitsCoopAttention) still gets f16 there: half the memory, and the decode
  // attention reads half the bytes, but its prefill attention's speed on it is not measured.
  return target.cooperativeMatrix && weightDtype == "f16" ? "f16" : "f32";
}

int compileModel(const CompileOptions &options, std::ostream &out, std::ostream &err,
                 CompileSummary *summary) {
  if (options.weightDtype != "f32" && options.weightDtype != "f16") {
    err << "gerbilc: error: --dtype must be f32 or f16, got '" << options.weightDtype << "'\n";
    return kExitUsage;
  }
  if (options.kvDtype != "f32" && options.kvDtype != "f16" && options.kvDtype != "auto") {
    err << "gerbilc: error: --kv-dtype must be f32, f16 or auto, got '" << options.kvDtype << "'\n";
    return kExitUsage;
  }
  std::vector<codegen::KernelDefine> kernelDefines;
  try {
    for (const std::string &text : options.kernelDefines)
      kernelDefines.push_back(codegen::parseKernelDefine(text));
  } catch (const codegen::CodegenError &e) {
    err << "gerbilc: error: --kernel-define " << e.what() << "\n";
    return kExitUsage;
  }
  const std::string target = options.target == "auto" ? autoTarget(err) : options.target;
  const std::optional<mlir::gerbil::TargetProfile> profile = mlir::gerbil::parseTarget(target);
  if (!profile) {
    std::string names;
    for (const auto &p : mlir::gerbil::targetProfiles()) names += p.name + ", ";
    err << "gerbilc: error: unknown --target '" << target << "' (available: " << names
        << "auto; a cooperative-matrix profile may add its tiling, e.g. nvidia:128x128x32:2x4, or its "
           "gate/up, q/k/v or wide plain projections', e.g. nvidia@gate-up=128x192x64:4x2, "
           "nvidia@qkv=128x128x64:4x4:1:2 or nvidia@wide=128x128x64:2x4:1; or the decode attention's "
           "query heads a workgroup or splits, e.g. nvidia@decode-query-heads=1@decode-splits=4; or the "
           "decode gemvs' workgroup size, e.g. nvidia@gemv-workgroup=512)\n";
    return kExitUsage;
  }
  if (options.emit != "plan" && options.emit != "mlir" && options.emit != "mlir-opt" &&
      options.emit != "glsl") {
    err << "gerbilc: error: --emit must be plan, mlir, mlir-opt or glsl, got '" << options.emit << "'\n";
    return kExitUsage;
  }
  const std::string kvDtype = kvCacheDtype(options.kvDtype, *profile, options.weightDtype);
  try {
    FrontendOptions frontendOptions{options.archSpecDir, options.maxSequence};
    ModelDescription model = loadModel(options.configPath, frontendOptions);
    int64_t maxSequence = options.maxSequence;
    if (maxSequence <= 0)
      maxSequence =
          std::min<int64_t>(model.maxPositionEmbeddings > 0 ? model.maxPositionEmbeddings : 2048, 2048);
    if (model.positions == PositionKind::Learned && maxSequence > model.maxPositionEmbeddings) {
      err << "gerbilc: error: --max-seq " << maxSequence << " exceeds the " << model.maxPositionEmbeddings
          << " learned positions of " << options.configPath << "\n";
      return kExitBadInput;
    }
    // Kernels index the KV cache of a layer with 32-bit integers.
    if (int64_t perLayer = maxSequence * model.numKVHeads * model.headDim;
        perLayer > (int64_t(1) << 32) - 1) {
      err << "gerbilc: error: --max-seq " << maxSequence << " makes a KV cache of " << perLayer
          << " elements per layer for " << options.configPath
          << ", more than a kernel can index (2^32); use a smaller --max-seq\n";
      return kExitBadInput;
    }
    // Kernels by address declare their references 16-byte aligned, so every layer's keys and values must
    // start on such a boundary (the plan's validation would refuse it; say why and what to do first).
    if (const int64_t layerBytes =
            maxSequence * model.numKVHeads * model.headDim * (kvDtype == "f16" ? 2 : 4);
        options.bufferAddresses && layerBytes % int64_t(plan::kBufferAddressAlignment) != 0) {
      err << "gerbilc: error: --buffer-addresses: with --max-seq " << maxSequence << " a layer's keys take "
          << layerBytes << " bytes of the KV cache, not a multiple of " << plan::kBufferAddressAlignment
          << ", so the next layer's would not start aligned; use a --max-seq that is a multiple of 8\n";
      return kExitUsage;
    }
    int64_t prefillChunk =
        options.prefillChunk > 0 ? options.prefillChunk : std::min<int64_t>(maxSequence, 256);
    if (prefillChunk > maxSequence) prefillChunk = maxSequence;

    mlir::MLIRContext context;
    std::string diagnostics;
    llvm::raw_string_ostream diagnosticStream(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diagnosticStream << d.getLocation() << ": " << d << "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> module = generateModule(context, model);
    if (mlir::failed(mlir::verify(*module))) {
      err << "gerbilc: internal error: the generated module does not verify:\n" << diagnostics;
      return kExitInternal;
    }
    if (options.emit == "mlir") {
      printModule(*module, options.outputPath, out);
      return kExitOk;
    }

    mlir::PassManager pm(&context);
    mlir::gerbil::PipelineOptions pipeline;
    pipeline.weightDtype = options.weightDtype;
    pipeline.kvDtype = kvDtype;
    pipeline.maxTokens = prefillChunk;
    pipeline.maxSequence = maxSequence;
    pipeline.target = target;
    pipeline.fuseLogitsArgmax = options.fuseLogitsArgmax;
    pipeline.fuseEmbedding = options.fuseEmbedding;
    pipeline.prefetchBytes = options.prefetchBytes;
    pipeline.prefetchPageBytes = options.prefetchPageBytes;
    pipeline.spreadPages = options.spreadPages;
    mlir::gerbil::buildGerbilPipeline(pm, pipeline);
    if (mlir::failed(pm.run(*module))) {
      err << "gerbilc: internal error: the pass pipeline failed:\n" << diagnostics;
      return kExitInternal;
    }
    if (options.spreadPages && !readsPageWords(*module))
      err << "gerbilc: note: --spread-pages: no page words for this model (the target reads them only for "
             "large models; --prefetch-page-bytes N asks for them)\n";
    if (options.emit == "mlir-opt") {
      printModule(*module, options.outputPath, out);
      return kExitOk;
    }

    codegen::CodegenOptions codegenOptions;
    codegenOptions.target = target;
    codegenOptions.maxSequence = maxSequence;
    codegenOptions.subgroupOps = options.subgroupOps;
    codegenOptions.kernelDefines = kernelDefines;
    codegenOptions.bufferAddresses = options.bufferAddresses;
    codegenOptions.prefetchBeside = options.prefetchBeside;
    std::ostringstream glsl;
    if (options.emit == "glsl") codegenOptions.glsl = &glsl;
    plan::Plan plan = codegen::buildPlan(*module, codegenOptions);
    if (options.emit == "glsl") {
      if (options.outputPath.empty() || options.outputPath == "-")
        out << glsl.str();
      else if (!(std::ofstream(options.outputPath) << glsl.str()))
        throw plan::PlanError(options.outputPath + ": cannot write the file");
      return kExitOk;
    }
    plan.model.configJson = readText(options.configPath);
    plan.model.configPath = std::filesystem::absolute(options.configPath).lexically_normal().string();
    plan.compilerVersion = "gerbilc 0.1";
    if (options.outputPath.empty()) {
      err << "gerbilc: error: no output file: use -o MODEL.plan\n";
      return kExitUsage;
    }
    uint64_t planBytes = plan::writeFile(plan, options.outputPath);
    if (summary) {
      summary->architecture = model.architecture;
      summary->target = target;
      summary->dispatchesPerStep = static_cast<int64_t>(plan.decode.size());
      summary->prefillDispatches = static_cast<int64_t>(plan.prefill.size());
      summary->kernels = static_cast<int64_t>(plan.kernels.size());
      for (const plan::Weight &w : plan.weights) summary->weightBytes += w.bytes();
      summary->arenaBytes = plan.arenaBytes;
      summary->kvCacheBytes = plan.kvCache.bytes;
      summary->kvCacheDtype = plan::toString(plan.kvCache.dtype);
      summary->planBytes = planBytes;
      // Each weight counts once, whole or as the row a lookup reads: the decode attention's prefetch bindings
      // name weights that the gemvs after it read (from the L2 then), and a tied embedding is looked up and
      // read whole by the LM head.
      const std::set<std::string> lookedUp = lookedUpWeights(*module);
      std::map<uint32_t, uint64_t> weightRead;
      for (const plan::Dispatch &d : plan.decode) {
        const std::string &kernel = plan.kernels[d.kernel].name;
        bool attention = kernel.rfind("attention", 0) == 0;
        for (const plan::Binding &b : d.bindings) {
          if (b.kind == plan::BufferKind::Weight) {
            const plan::Weight &w = plan.weights[b.weight];
            const bool lookup = lookedUp.count(w.name) != 0;
            uint64_t &read = weightRead[b.weight];
            read = std::max(read, lookup ? w.bytes() / static_cast<uint64_t>(w.shape[0]) : w.bytes());
          } else if (b.kind == plan::BufferKind::Arena) {
            summary->decodeActivationBytes += b.size / plan.limits.prefillChunk;
          } else if (b.kind == plan::BufferKind::KVCache && attention) {
            summary->decodeKVBytesPerPosition += b.size / plan.limits.maxSequence;
          }
        }
      }
      for (const auto &[weight, bytes] : weightRead) summary->decodeWeightBytes += bytes;
    }
    return kExitOk;
  } catch (const FrontendError &e) {
    err << "gerbilc: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const plan::PlanError &e) {
    err << "gerbilc: error: " << e.what() << "\n";
    return kExitIO;
  } catch (const codegen::CodegenError &e) {
    err << "gerbilc: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

int listArchitectures(const std::string &archSpecDir, std::ostream &out, std::ostream &err) {
  try {
    for (const ArchitectureEntry &entry : gerbil::listArchitectures(archSpecDir))
      out << entry.architecture << "\t" << entry.family << "\t" << entry.specFile << "\n";
    return kExitOk;
  } catch (const FrontendError &e) {
    err << "gerbilc: error: " << e.what() << "\n";
    return kExitBadInput;
  }
}

} // namespace gerbil
