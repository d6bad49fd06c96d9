#include "compiler/codegen/PlanBuilder.h"

#include "compiler/codegen/ArgmaxKernel.h"
#include "compiler/codegen/AttentionKernel.h"
#include "compiler/codegen/GemvKernel.h"
#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/MatMulKernel.h"
#include "compiler/codegen/RopeKernel.h"
#include "compiler/codegen/SamplerKernel.h"
#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <map>
#include <optional>

using namespace mlir;
namespace gd = mlir::gerbil;

namespace gerbil::codegen {
namespace {

// Where a kernel binding's buffer comes from: an operand or result of the op the kernel runs (one op of
// its dispatch's body), any value of the body (ValueOf: the grouped kernels), or a fixed buffer.
struct BindingSource {
  enum Kind {
    Operand,
    Result,
    CacheKeys,
    CacheValues,
    InputIds,
    ValueOf,
    Weight, // plan weight `index`, whole
    ScratchCounters,
    ScratchPartials,
    ScratchSink // kScratchSinkBytes of scratch that only a store that never happens writes
  } kind;
  unsigned index = 0;
  Value value = {};
  // ScratchPartials: where the binding starts past kScratchPartialsOffset, and its bytes (0: the kernel
  // instance's scratchPartialBytes), for a kernel that binds two parts of the partials' scratch.
  uint64_t scratchOffset = 0, scratchBytes = 0;
};

struct KernelInstance {
  KernelSource source;
  std::vector<BindingSource> origins; // parallel to source.bindings
  FlatSymbolRefAttr cache;
  uint64_t scratchCounterBytes = 0, scratchPartialBytes = 0; // ScratchCounters / ScratchPartials
  // A grid of the kernel's own, tighter than the dispatch's (decode attention: no more splits than the
  // cache's length needs; dispatch formation does not know it). Workgroups the dispatch's grid has beyond
  // it would return at once.
  std::optional<std::array<uint32_t, 3>> grid;
  // The decode kernel holds its dispatch's prefetch workers (gerbil-prefetch-weights).
  bool prefetches = false;
  // Workgroups before the kernel's own along x (a gemv's prefetch workers), added to the dispatch's grid.
  int64_t leadingWorkers = 0;
};

// Scratch: the counters at its start, the partial results from this offset (16384 counters: a split-K
// matmul takes one a tile).
constexpr uint64_t kScratchPartialsOffset = 65536;
// Where a kernel binds a second range of the partials' scratch: the largest minStorageBufferOffsetAlignment
// Vulkan allows, so that any device takes the offset (the arena's offsets keep the same alignment).
constexpr uint64_t kScratchRangeAlignment = 256;

// A prefetch launch's sink: the counters' region's last 16 bytes, past a decode attention's counters (which
// start at 0). Its store never runs, so sharing them with a prefill split-K matmul's last counters is safe.
constexpr uint64_t kScratchSinkBytes = 16;

// Grid (T, columns, 1) of a prefill launch that codegen adds beside a dispatch's own (norm_rows_f16,
// rope_append).
AffineMap perTokenGrid(MLIRContext *ctx, int64_t columns) {
  return AffineMap::get(
      0, 1, {getAffineSymbolExpr(0, ctx), getAffineConstantExpr(columns, ctx), getAffineConstantExpr(1, ctx)},
      ctx);
}

// A grid that does not grow with T (a kernel's own, tighter than its dispatch's; a prefetch launch's).
AffineMap constantGrid(MLIRContext *ctx, const std::array<int64_t, 3> &counts) {
  SmallVector<AffineExpr, 3> dims;
  for (int64_t count : counts) dims.push_back(getAffineConstantExpr(count, ctx));
  return AffineMap::get(0, 1, dims, ctx);
}

// A kernel must have the workgroup size that dispatch formation gave its dispatch (`what`, named with its
// location), whose grid counts workgroups of that size.
void requireFormedWorkgroup(const KernelSource &kernel, ArrayRef<int64_t> formed, const std::string &what) {
  if (kernel.workgroup != std::array<int64_t, 3>{formed[0], formed[1], formed[2]})
    throw CodegenError(what + " was formed for another workgroup size than its kernel's");
}

// A kernel family without its tensor-core suffix ("linear_qkv_coop" -> "linear_qkv").
std::string withoutCoopSuffix(llvm::StringRef family) {
  return family.ends_with(gd::kCoopSuffix) ? family.drop_back(strlen(gd::kCoopSuffix)).str() : family.str();
}

bool holdsOneOp(gd::DispatchOp dispatch) {
  return dispatch.getBody().front().getOperations().size() == 2;
}

int64_t rowWidth(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1);
}

std::string locationName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc)) return name.getName().str();
  return "";
}

plan::DType dtypeOf(Type t) {
  if (t.isF16()) return plan::DType::F16;
  if (t.isBF16()) return plan::DType::BF16;
  if (t.isInteger(32)) return plan::DType::I32;
  return plan::DType::F32;
}

class PlanBuilder {
public:
  PlanBuilder(ModuleOp module, const CodegenOptions &options) : module_(module), options_(options) {}

  plan::Plan build() {
    profile_ = mlir::gerbil::parseTarget(options_.target);
    if (!profile_) throw CodegenError("unknown target profile '" + options_.target + "'");
    auto forward = module_.lookupSymbol<func::FuncOp>("forward");
    if (!forward) throw CodegenError("the module has no @forward");
    if (options_.maxSequence <= 0) throw CodegenError("the maximum sequence length must be positive");
    readModel();
    readWeights();
    readCaches();
    auto maxTokens = forward->getAttrOfType<IntegerAttr>("gerbil.max_tokens");
    auto arenaBytes = forward->getAttrOfType<IntegerAttr>("gerbil.arena_bytes");
    if (!maxTokens || !arenaBytes) throw CodegenError("@forward has not been through gerbil-plan-memory");
    maxTokens_ = maxTokens.getInt();
    plan_.limits = {static_cast<uint32_t>(options_.maxSequence), static_cast<uint32_t>(maxTokens_)};
    plan_.arenaBytes = arenaBytes.getInt();
    plan_.inputBytes = maxTokens_ * 4;
    plan_.inputIds = {plan::BufferKind::Input, 0, 0, plan_.inputBytes};
    plan_.stateBytes = (plan::kStateHeaderWords + static_cast<uint64_t>(options_.maxSequence)) * 4;
    plan_.target = options_.target;
    if (options_.bufferAddresses) {
      plan_.bufferAccess = plan::BufferAccess::Addresses;
      plan_.requires_.bufferDeviceAddress = true;
    }

    // Where each one-op dispatch landed in the two schedules.
    llvm::DenseMap<Operation *, std::pair<size_t, size_t>> placed;
    gd::DispatchOp lastDispatch;
    for (Operation &op : forward.getBody().front()) {
      if (auto dispatch = dyn_cast<gd::DispatchOp>(op)) {
        lastDispatch = dispatch;
        size_t prefillAt = plan_.prefill.size(), decodeAt = plan_.decode.size();
        for (plan::Dispatch &d : lowerSchedule(dispatch, false)) plan_.prefill.push_back(std::move(d));
        for (plan::Dispatch &d : lowerSchedule(dispatch, true)) plan_.decode.push_back(std::move(d));
        // (a logits projection grouped with its argmax runs two launches in prefill, the first its own)
        if (plan_.prefill.size() > prefillAt && plan_.decode.size() == decodeAt + 1)
          placed[dispatch] = {prefillAt, decodeAt};
      } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        plan_.logits = arenaBinding(ret.getOperand(0));
        plan_.lastRowLogits = lastRowLogits(ret.getOperand(0), placed);
        // A greedy token result comes from the step's last dispatch: an argmax of its own, or the logits
        // projection grouped with its argmax (one launch in decode, the argmax a second in prefill).
        auto tokenFrom =
            ret.getNumOperands() == 2 ? ret.getOperand(1).getDefiningOp<gd::DispatchOp>() : nullptr;
        const bool picksToken = tokenFrom && tokenFrom == lastDispatch &&
                                llvm::any_of(tokenFrom.getBody().front(),
                                             [](Operation &inner) { return isa<gd::ArgmaxOp>(inner); });
        plan_.gpuArgmax = picksToken && !plan_.prefill.empty();
        plan_.decodeArgmaxLaunch = plan_.gpuArgmax && !plan_.decode.empty() &&
                                   isa<gd::ArgmaxOp>(tokenFrom.getBody().front().front());
      } else if (!isa<gd::WeightRefOp>(op))
        throw CodegenError("'" + op.getName().getStringRef().str() + "' is outside any dispatch");
    }
    if (plan_.gpuArgmax) addSampler();
    // A descriptor binds at most maxStorageBufferRange bytes (128 MiB on lavapipe); an address reaches the
    // whole buffer, so plans by address ask nothing of that limit.
    plan_.requires_.maxStorageBufferRange = options_.bufferAddresses ? 0 : largestBinding();
    plan_.requires_.maxSharedMemoryBytes = std::max<uint32_t>(plan_.requires_.maxSharedMemoryBytes, 16384);
    plan::validate(plan_, "generated plan");
    return std::move(plan_);
  }

private:
  // The GPU sampler's launches (sample.glsl) over the logits' last row, after the greedy token's; its words
  // go after the state's token list, its results in the scratch's partials (its counters at the start).
  void addSampler() {
    const int64_t vocab = plan_.model.vocabSize;
    const SamplerKernels sampler = samplerKernels(vocab, options_.maxSequence);
    // (at an offset any device binds: minStorageBufferOffsetAlignment is at most 256)
    plan_.samplingOffset = llvm::alignTo(plan_.stateBytes, kScratchRangeAlignment);
    plan_.stateBytes = plan_.samplingOffset + plan::samplingWords(vocab) * 4;
    const plan::Binding sampling{plan::BufferKind::State, 0, plan_.samplingOffset,
                                 plan::samplingWords(vocab) * 4};
    const plan::Binding counters{plan::BufferKind::Scratch, 0, 0,
                                 std::max<uint64_t>(sampler.counterBytes, 16)};
    const plan::Binding work{plan::BufferKind::Scratch, 0, kScratchPartialsOffset, sampler.workBytes};
    plan_.scratchBytes = std::max(plan_.scratchBytes, kScratchPartialsOffset + sampler.workBytes);
    static constexpr const char *kStageNames[SamplerKernels::kStages] = {
        "the penalised maximum", "the keys' high bytes", "the cut's low bytes", "the top-p's low bytes",
        "the draw"};
    for (int stage = 0; stage < SamplerKernels::kStages; ++stage) {
      plan::Dispatch d;
      d.label = std::string("sampler: ") + kStageNames[stage];
      d.bindings = {plan_.logits, plan_.inputIds, sampling,
                    counters,     work,           {plan::BufferKind::State, 0, 0, plan_.stateBytes}};
      d.grid = {plan::GridDim{0, sampler.grid[0], 1}, plan::GridDim{0, 1, 1}, plan::GridDim{0, 1, 1}};
      d.kernel = kernelIndex(sampler.stages[size_t(stage)], "sample", d.label);
      plan_.sampler.push_back(std::move(d));
    }
  }

  // Whether the dispatch's result is the logits that @forward returns: its decode gemv then reads its row
  // from the firstRow push constant (GemvSpec::rowFromPush), which only Plan::lastRowLogits sets.
  static bool producesLogits(gd::DispatchOp dispatch) {
    if (dispatch->getNumResults() == 0) return false;
    for (OpOperand &use : dispatch->getResult(0).getUses())
      if (isa<func::ReturnOp>(use.getOwner()) && use.getOperandNumber() == 0) return true;
    return false;
  }

  // The logits projection's prefill and decode dispatches where decode runs it as a one-row gemv (which
  // takes firstRow) whose bindings extend the prefill one's (plan::extendsBindings); else none. Grouped with
  // the argmax (linear_argmax), the gemv also stands in for the prefill's argmax launch after the projection.
  plan::Plan::LastRowLogits
  lastRowLogits(Value logits, const llvm::DenseMap<Operation *, std::pair<size_t, size_t>> &placed) {
    auto dispatch = logits.getDefiningOp<gd::DispatchOp>();
    if (!dispatch || !dispatch.getDecodeGrid() ||
        !isa<gd::MatMulOp, gd::LinearOp>(dispatch.getBody().front().front()))
      return {};
    const bool withArgmax = dispatch.getKernel() == gd::kLogitsArgmaxKernel;
    if (!withArgmax && !holdsOneOp(dispatch)) return {};
    auto at = placed.find(dispatch);
    if (at == placed.end()) return {};
    const std::vector<plan::Binding> &prefill = plan_.prefill[at->second.first].bindings,
                                     &decode = plan_.decode[at->second.second].bindings;
    if (!plan::extendsBindings(decode, prefill)) return {};
    return {static_cast<int32_t>(at->second.first), static_cast<int32_t>(at->second.second),
            withArgmax ? 2 : 1};
  }

  void readModel() {
    auto model = module_->getAttrOfType<DictionaryAttr>("gerbil.model");
    if (!model) throw CodegenError("the module lacks its gerbil.model description");
    auto str = [&](StringRef key) {
      auto a = model.getAs<StringAttr>(key);
      return a ? a.str() : std::string();
    };
    auto integer = [&](StringRef key) {
      auto a = model.getAs<IntegerAttr>(key);
      return a ? a.getInt() : int64_t(0);
    };
    auto ints = [&](StringRef key) {
      std::vector<int64_t> v;
      if (auto a = model.getAs<ArrayAttr>(key))
        for (Attribute e : a) v.push_back(llvm::cast<IntegerAttr>(e).getInt());
      return v;
    };
    plan_.model.architecture = str("architecture");
    plan_.model.family = str("family");
    plan_.model.vocabSize = integer("vocab_size");
    plan_.model.hiddenSize = integer("hidden_size");
    plan_.model.numLayers = integer("num_layers");
    plan_.model.bosTokenIds = ints("bos_token_ids");
    plan_.model.eosTokenIds = ints("eos_token_ids");
    if (auto a = model.getAs<ArrayAttr>("ignored_keys"))
      for (Attribute e : a) plan_.model.ignoredSourceKeys.push_back(llvm::cast<StringAttr>(e).str());
  }

  void readWeights() {
    for (auto w : module_.getOps<gd::WeightOp>()) {
      plan::Weight weight;
      weight.name = w.getSymName().str();
      for (Attribute key : w.getKeys()) weight.sourceKeys.push_back(llvm::cast<StringAttr>(key).str());
      auto type = llvm::cast<RankedTensorType>(w.getType());
      weight.shape.assign(type.getShape().begin(), type.getShape().end());
      weight.deviceDType = dtypeOf(gd::deviceElementType(w));
      weight.transpose = w.getTranspose();
      if (auto slice = w.getSlice()) {
        weight.sliceDim = static_cast<int32_t>((*slice)[0]);
        weight.sliceStart = (*slice)[1];
        weight.sliceLength = (*slice)[2];
      }
      weightIndex_[weight.name] = plan_.weights.size();
      plan_.weights.push_back(std::move(weight));
    }
    for (auto w : module_.getOps<gd::WeightOp>())
      if (auto by = w.getScaleColumnsByAttr())
        plan_.weights[weightIndex_.at(w.getSymName().str())].scaleColumnsBy =
            static_cast<int32_t>(weightIndex_.at(by.getValue().str()));
  }

  // Whether `projection` is a gerbil.linear whose norm weight gerbil-fold-norm-weights folded into its
  // matrix (plan::Weight::scaleColumnsBy): its kernel then normalises without the norm weight.
  bool normFolded(Operation *projection) {
    auto linear = dyn_cast<gd::LinearOp>(projection);
    if (!linear) return false;
    auto matrix = gd::outsideDispatch(linear.getWeight()).getDefiningOp<gd::WeightRefOp>();
    gd::WeightRefOp norm = gd::normWeightOf(linear);
    if (!matrix || !norm) return false;
    auto weight = module_.lookupSymbol<gd::WeightOp>(matrix.getNameAttr());
    return weight && weight.getScaleColumnsByAttr() == norm.getNameAttr();
  }

  // normFolded of a fusion group's projections, which share their norm: all of them or none.
  bool groupNormFolded(llvm::ArrayRef<Operation *> projections, const std::string &label) {
    const bool folded = normFolded(projections.front());
    for (Operation *p : projections)
      if (normFolded(p) != folded)
        throw CodegenError("fusion group '" + label +
                           "': its norm weight is folded into some of its matrices only");
    return folded;
  }

  void readCaches() {
    int64_t layers = 0, kvHeads = 0, headDim = 0;
    std::optional<bool> half;
    for (auto c : module_.getOps<gd::KVCacheOp>()) {
      layers = std::max<int64_t>(layers, c.getLayer() + 1);
      kvHeads = c.getNumKvHeads();
      headDim = c.getHeadDim();
      cacheLayer_[c.getSymName().str()] = c.getLayer();
      // The plan's cache has one element type (gerbil-assign-layout gives every layer the same).
      const bool layerHalf = c.deviceElementType().isF16();
      if (half && *half != layerHalf)
        throw CodegenError("the KV caches of the layers hold different types ('" + c.getSymName().str() +
                           "')");
      half = layerHalf;
    }
    cacheHalf_ = half.value_or(false);
    const plan::DType dtype = cacheHalf_ ? plan::DType::F16 : plan::DType::F32;
    layerCacheBytes_ =
        static_cast<uint64_t>(kvHeads * options_.maxSequence * headDim) * plan::byteSize(dtype);
    plan_.kvCache = {layers, kvHeads, headDim, dtype, "LHSd", 2 * layerCacheBytes_ * layers};
  }

  uint64_t valueBytes(Value v) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    uint64_t bytes = 4;
    for (int64_t d : type.getShape()) bytes *= ShapedType::isDynamic(d) ? maxTokens_ : d;
    return std::max<uint64_t>(bytes, 16);
  }

  plan::Binding arenaBinding(Value v) {
    auto result = llvm::dyn_cast<OpResult>(v);
    auto producer = result ? llvm::dyn_cast<gd::DispatchOp>(result.getOwner()) : nullptr;
    if (!producer || !producer.getArenaOffsets())
      throw CodegenError("an activation is not the memory-planned result of a dispatch");
    return {plan::BufferKind::Arena, 0,
            static_cast<uint64_t>((*producer.getArenaOffsets())[result.getResultNumber()]), valueBytes(v)};
  }

  plan::Binding operandBinding(Value v) {
    if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
      if (arg.getArgNumber() == 0) return plan_.inputIds;
      throw CodegenError("only input_ids can be bound from the function arguments");
    }
    if (auto ref = v.getDefiningOp<gd::WeightRefOp>())
      return {plan::BufferKind::Weight, static_cast<uint32_t>(weightIndex_.at(ref.getName().str())), 0, 0};
    return arenaBinding(v);
  }

  plan::DType operandDType(Value v) {
    if (auto ref = v.getDefiningOp<gd::WeightRefOp>())
      return plan_.weights[weightIndex_.at(ref.getName().str())].deviceDType;
    return dtypeOf(llvm::cast<RankedTensorType>(v.getType()).getElementType());
  }

  // Where a value of a dispatch's body lives: the dispatch's operand (a block argument), its result (what the
  // yield returns), or, for a fusion group run op by op, the arena bytes memory planning gave it.
  plan::Binding valueBinding(gd::DispatchOp dispatch, Value v) {
    Value out = gd::outsideDispatch(v);
    if (out != v) return operandBinding(out);
    Operation *yield = dispatch.getBody().front().getTerminator();
    for (auto [i, yielded] : llvm::enumerate(yield->getOperands()))
      if (yielded == v) return arenaBinding(dispatch.getResult(i));
    auto internal = dispatch.getInternalOffsets();
    unsigned index = 0;
    for (Operation &op : dispatch.getBody().front().without_terminator())
      for (Value r : op.getResults()) {
        if (llvm::is_contained(yield->getOperands(), r)) continue;
        if (r == v) {
          if (!internal || index >= internal->size())
            throw CodegenError("dispatch '" + locationName(dispatch.getLoc()) + "' has no internal offsets");
          return {plan::BufferKind::Arena, 0, static_cast<uint64_t>((*internal)[index]), valueBytes(v)};
        }
        ++index;
      }
    throw CodegenError("a value of dispatch '" + locationName(dispatch.getLoc()) + "' has no buffer");
  }

  // The result of `dispatch` that value `v` of its body is (what its yield returns), or null.
  static Value yieldedResult(gd::DispatchOp dispatch, Value v) {
    Operation *yield = dispatch.getBody().front().getTerminator();
    for (auto [i, yielded] : llvm::enumerate(yield->getOperands()))
      if (yielded == v) return dispatch.getResult(i);
    return {};
  }

  // Whether prefill hands the dispatch result `v` over as f16 rows (two values a word): its producer can
  // write them (the tensor-core attention, a gate/up group on tensor cores) and every reader is a plain
  // projection on tensor cores that takes `v` as its input rows, without a norm prologue, so that it would
  // round them to f16 as it stages them anyway. Half the bytes of the handover and of the readers' staging
  // loads: on the H200 the down projections took 7% less (79f28f9, Llama-3-8B 481 -> 446 µs a layer) and
  // the o projections 7-8% (sweep ac, 4096² 158 -> 148 µs), while the attention writing 16-byte words of
  // f16 was 0-3% faster than in f32 (its 4-byte stores of two halves had cost it 11-15% at 79f28f9).
  // Decode keeps f32: its kernels of the same dispatches write and read their own copy of the value.
  bool handsOverHalf(Value v) const {
    auto producer = v ? v.getDefiningOp<gd::DispatchOp>() : gd::DispatchOp();
    if (!producer || v.use_empty() || rowWidth(v) % 8 != 0) return false;
    const llvm::StringRef family = producer.getKernel();
    if (family != gd::kCoopAttentionKernel && family != std::string(gd::kGateUpKernel) + gd::kCoopSuffix)
      return false;
    for (OpOperand &use : v.getUses()) {
      auto reader = llvm::dyn_cast<gd::DispatchOp>(use.getOwner());
      if (!reader || !holdsOneOp(reader) || !reader.getKernel().ends_with(gd::kCoopSuffix)) return false;
      Operation &op = reader.getBody().front().front();
      if (!isa<gd::LinearOp, gd::MatMulOp>(op) || gd::outsideDispatch(op.getOperand(0)) != v) return false;
      if (auto linear = dyn_cast<gd::LinearOp>(op); linear && linear.getNorm()) return false;
      for (unsigned i = 1; i < op.getNumOperands(); ++i)
        if (gd::outsideDispatch(op.getOperand(i)) == v) return false; // also its residual, say
    }
    return true;
  }

  // `decode`: the one-token variant, where the dispatch has one (decode_grid). An op of a fusion group that
  // runs on its own takes the catalog's choice for it.
  KernelInstance specify(gd::DispatchOp dispatch, Operation *op, bool decode) {
    KernelInstance k;
    std::optional<gd::KernelChoice> own =
        holdsOneOp(dispatch) ? std::nullopt : gd::chooseKernel(op, *profile_);
    ArrayRef<int64_t> wg = own                                       ? ArrayRef<int64_t>(own->workgroup)
                           : decode && dispatch.getDecodeWorkgroup() ? *dispatch.getDecodeWorkgroup()
                                                                     : dispatch.getWorkgroup();
    k.source.workgroup = {wg[0], wg[1], wg[2]};
    auto define = [&](const std::string &name, const std::string &value) {
      k.source.defines.emplace_back(name, value);
    };
    auto bind = [&](const std::string &name, Access access, BindingSource origin) {
      plan::DType dtype = plan::DType::F32;
      if (origin.kind == BindingSource::Operand)
        dtype = operandDType(gd::outsideDispatch(op->getOperand(origin.index)));
      k.source.bindings.push_back({name, access, dtype});
      k.origins.push_back(origin);
    };
    auto operand = [](unsigned i) { return BindingSource{BindingSource::Operand, i}; };
    BindingSource result{BindingSource::Result, 0};
    const std::string family = own ? own->kernel : dispatch.getKernel().str();
    k.source.templateFile = family + ".glsl";

    // The kernel of a gerbil.matmul / gerbil.linear, whose operands are input, weight, [norm], [residual]: it
    // must have been formed for this workgroup size.
    auto takeLinearKernel = [&](KernelSource source) {
      requireFormedWorkgroup(source, wg, "dispatch '" + locationName(dispatch.getLoc()) + "'");
      k.source = std::move(source);
      unsigned next = 0;
      for (const KernelBinding &b : k.source.bindings)
        k.origins.push_back(b.name == "result"     ? result
                            : b.name == "partial"  ? BindingSource{BindingSource::ScratchPartials}
                            : b.name == "counters" ? BindingSource{BindingSource::ScratchCounters}
                                                   : operand(next++));
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case<gd::EmbeddingOp>([&](gd::EmbeddingOp e) {
          define("VOCAB", uintValue(e.getTable().getType().getDimSize(0)));
          define("HIDDEN", uintValue(rowWidth(e.getResult())));
          define("LOADS", uintValue(gd::kRowLoads));
          bind("ids", Access::TokenIds, operand(0));
          bind("table", Access::Read, operand(1));
          bind("result", Access::Write, result);
        })
        .Case<gd::PositionEmbeddingOp>([&](gd::PositionEmbeddingOp e) {
          define("POSITIONS", uintValue(e.getTable().getType().getDimSize(0)));
          define("HIDDEN", uintValue(rowWidth(e.getResult())));
          define("LOADS", uintValue(gd::kRowLoads));
          bind("table", Access::Read, operand(1));
          bind("result", Access::Write, result);
        })
        .Case<gd::RMSNormOp>([&](gd::RMSNormOp n) {
          define("ROW", uintValue(rowWidth(n.getInput())));
          define("GROUP", uintValue(n.getWeight().getType().getDimSize(0)));
          define("EPS", glslFloat(n.getEps().convertToDouble()));
          bind("x", Access::Read, operand(0));
          bind("w", Access::Read, operand(1));
          bind("result", Access::Write, result);
          k.source.needsReduction = true;
          k.source.subgroupOps = options_.subgroupOps;
        })
        .Case<gd::LayerNormOp>([&](gd::LayerNormOp n) {
          define("ROW", uintValue(rowWidth(n.getInput())));
          define("EPS", glslFloat(n.getEps().convertToDouble()));
          bind("x", Access::Read, operand(0));
          bind("w", Access::Read, operand(1));
          bind("bias", Access::Read, operand(2));
          bind("result", Access::Write, result);
          k.source.needsReduction = true;
          k.source.subgroupOps = options_.subgroupOps;
        })
        .Case<gd::MatMulOp, gd::LinearOp>([&](Operation *m) {
          // matmul, or linear with an RMSNorm prologue and/or a residual epilogue: the tiled or the
          // tensor-core kernel for prefill, as the catalog chose, and gemv for the one-token decode variant.
          auto shapeOf = [&](auto &spec) { describeProjection(m, spec); };
          if (decode) {
            // The one-token gemv (gemv.glsl).
            GemvSpec spec;
            shapeOf(spec);
            spec.subgroupOps = options_.subgroupOps;
            spec.workgroup = profile_->decodeGemvWorkgroup; // as the catalog's decode grid has it
            spec.rowFromPush = holdsOneOp(dispatch) && producesLogits(dispatch);
            requireF32Norm(m, spec, "dispatch '" + locationName(dispatch.getLoc()) + "'");
            takeLinearKernel(gemvKernel(spec));
            addGemvPrefetchOf(k, dispatch, "store_result(0u, value)",
                              "dispatch '" + locationName(dispatch.getLoc()) + "'");
            return;
          }
          // Prefill: the tiled or the tensor-core matmul, as the catalog chose.
          MatMulSpec spec;
          shapeOf(spec);
          if (spec.norm) spec.normWeight = operandDType(gd::outsideDispatch(m->getOperand(2)));
          bool coop = llvm::StringRef(family).ends_with(gd::kCoopSuffix);
          spec.variant = coop ? MatMulVariant::Coop : MatMulVariant::Tiled;
          if (coop) spec.coopTiling = mlir::gerbil::coopTilingFor(*profile_, spec.n, spec.k);
          spec.halfInput = coop && !spec.norm && handsOverHalf(gd::outsideDispatch(m->getOperand(0)));
          takeLinearKernel(matmulKernel(spec));
          SplitKScratch split = splitKScratch(spec, maxTokens_);
          k.scratchPartialBytes = split.partialBytes;
          k.scratchCounterBytes = split.counterBytes;
        })
        .Case<gd::AddOp, gd::MulOp>([&](Operation *e) {
          k.source.templateFile = "elementwise.glsl";
          define("N", uintValue(rowWidth(e->getResult(0))));
          define(isa<gd::AddOp>(e) ? "OP_ADD" : "OP_MUL", "1");
          bool bias = llvm::cast<RankedTensorType>(e->getOperand(1).getType()).getRank() == 1;
          define("RHS_IS_BIAS", bias ? "true" : "false");
          bind("a", Access::Read, operand(0));
          bind("b", Access::Read, operand(1));
          bind("result", Access::Write, result);
        })
        .Case<gd::SiLUOp, gd::GELUOp>([&](Operation *e) {
          k.source.templateFile = "elementwise.glsl";
          define("N", uintValue(rowWidth(e->getResult(0))));
          if (auto gelu = dyn_cast<gd::GELUOp>(e)) {
            define("OP_GELU", "1");
            define("GELU_TANH", gelu.getTanhApproximation() ? "1" : "0");
          } else {
            define("OP_SILU", "1");
          }
          bind("x", Access::Read, operand(0));
          bind("result", Access::Write, result);
        })
        .Case<gd::RoPEOp>([&](gd::RoPEOp r) {
          define("HEADS", uintValue(r.getNumHeads()));
          define("HEAD_DIM", uintValue(r.getHeadDim()));
          defineRotary(k.source, rotarySpec(r));
          define("LOADS", uintValue(gd::kRowLoads));
          bind("x", Access::Read, operand(0));
          bind("result", Access::Write, result);
        })
        .Case<gd::KVAppendOp>([&](gd::KVAppendOp a) {
          auto cache = module_.lookupSymbol<gd::KVCacheOp>(a.getCacheAttr());
          define("KV_HEADS", uintValue(cache.getNumKvHeads()));
          define("LOADS", uintValue(gd::kRowLoads));
          define("HEAD_DIM", uintValue(cache.getHeadDim()));
          define("SEQ", uintValue(options_.maxSequence));
          bind("k", Access::Read, operand(0));
          bind("v", Access::Read, operand(1));
          bind("k_cache", Access::Write, {BindingSource::CacheKeys, 0});
          bind("v_cache", Access::Write, {BindingSource::CacheValues, 0});
          k.cache = a.getCacheAttr();
        })
        .Case<gd::ArgmaxOp>([&](gd::ArgmaxOp a) {
          ArgmaxKernel kernel = argmaxKernel(rowWidth(a.getLogits()), options_.maxSequence);
          requireFormedWorkgroup(kernel.source, wg, "argmax '" + locationName(a.getLoc()) + "'");
          k.source = kernel.source;
          k.origins = {operand(0),
                       result,
                       {BindingSource::InputIds, 0},
                       {BindingSource::ScratchPartials, 0},
                       {BindingSource::ScratchCounters, 0}};
          k.scratchCounterBytes = kernel.scratchCounterBytes;
          k.scratchPartialBytes = kernel.scratchPartialBytes;
        })
        .Case<gd::AttentionOp>([&](gd::AttentionOp a) {
          // Prefill: tiles of queries (attention_prefill.glsl); decode: split over the cached positions
          // (attention_decode.glsl).
          if (decode) return specifyDecodeAttention(k, a);
          const bool coop = family == gd::kCoopAttentionKernel;
          AttentionSpec spec = attentionSpec(a);
          spec.halfResult = coop && handsOverHalf(yieldedResult(dispatch, a.getResult()));
          k.source = attentionKernel(spec, coop);
          requireFormedWorkgroup(k.source, wg, "dispatch '" + locationName(dispatch.getLoc()) + "'");
          k.origins = {operand(0), {BindingSource::CacheKeys, 0}, {BindingSource::CacheValues, 0}, result};
          k.cache = a.getCacheAttr();
          if (coop) {
            // The key splits' partial results and a counter per query tile.
            AttentionScratch scratch = coopAttentionScratch(spec, maxTokens_);
            k.origins.push_back({BindingSource::ScratchPartials, 0});
            k.origins.push_back({BindingSource::ScratchCounters, 0});
            k.scratchPartialBytes = scratch.partialBytes;
            k.scratchCounterBytes = scratch.counterBytes;
          }
        })
        .Default([&](Operation *other) {
          throw CodegenError("no kernel for '" + other->getName().getStringRef().str() + "'");
        });
    return k;
  }

  // The ops of a fusion group (gerbil-group-qkv, gerbil-group-gate-up): the projections in order (q, k, v or
  // gate, up), each followed by its bias add, then RoPE and the KV-cache write (q/k/v) or the activation and
  // the product (gate/up).
  struct GroupBody {
    bool qkv = false;
    SmallVector<Operation *> projections;
    SmallVector<Value> biases; // per projection; null: none
    SmallVector<Value> heads;  // per projection: its value after the bias add
    gd::RoPEOp ropeQ, ropeK;
    gd::KVAppendOp append;
    Operation *activation = nullptr, *product = nullptr;
    gd::LinearOp linear; // the first projection, where it is a gerbil.linear (its norm is the group's)
    gd::EmbeddingOp embedding; // the token embedding whose rows are the input (gerbil-fuse-embedding)
  };

  static GroupBody parseGroup(gd::DispatchOp dispatch) {
    const std::string label = locationName(dispatch.getLoc()),
                      family = withoutCoopSuffix(dispatch.getKernel());
    GroupBody g;
    for (Operation &op : dispatch.getBody().front().without_terminator()) {
      if (isa<gd::MatMulOp, gd::LinearOp>(op))
        g.projections.push_back(&op);
      else if (isa<gd::SiLUOp, gd::GELUOp>(op))
        g.activation = &op;
      else if (isa<gd::MulOp>(op))
        g.product = &op;
      else if (auto a = dyn_cast<gd::KVAppendOp>(op))
        g.append = a;
      else if (auto r = dyn_cast<gd::RoPEOp>(op))
        (g.ropeQ ? g.ropeK : g.ropeQ) = r;
      else if (auto e = dyn_cast<gd::EmbeddingOp>(op))
        g.embedding = e;
    }
    g.qkv = family == gd::kQKVKernel;
    if (g.projections.size() != (g.qkv ? 3u : 2u) ||
        (!g.qkv && (family != gd::kGateUpKernel || !g.activation || !g.product)))
      throw CodegenError("fusion group '" + label + "' (" + family +
                         ") does not hold the ops its kernel runs");
    for (Operation *projection : g.projections) {
      Value r = projection->getResult(0), bias;
      if (r.hasOneUse())
        if (auto add = dyn_cast<gd::AddOp>(*r.getUsers().begin());
            add && llvm::cast<RankedTensorType>(add.getRhs().getType()).getRank() == 1)
          bias = add.getRhs(), r = add.getResult();
      g.biases.push_back(bias);
      g.heads.push_back(r);
    }
    g.linear = dyn_cast<gd::LinearOp>(g.projections.front());
    return g;
  }

  // Prefill of a fusion group on cooperative matrices (kernel "<group>_coop", gerbil::groupPrefillKernel):
  // the projections with their bias adds (and for gate/up the activation product) as one matmul_coop.glsl
  // launch; the group's RoPE and KV-cache write after it (one rope_append launch where fusesRopeAppend,
  // else op by op). With an RMSNorm prologue, a norm launch before it normalises each row once and rounds
  // it to f16, into the scratch, for all of its workgroup columns (each column summed its tile's rows
  // again, which cost the 8B's q/k/v 13% on the H200, then loaded the f32 rows and the norm weight).
  std::vector<plan::Dispatch> lowerGroupPrefill(gd::DispatchOp dispatch) {
    const std::string label = locationName(dispatch.getLoc()), family = dispatch.getKernel().str();
    GroupBody g = parseGroup(dispatch);
    Operation *first = g.projections.front();
    MatMulSpec spec;
    spec.variant = MatMulVariant::Coop;
    spec.mode = g.qkv ? MatMulMode::QKV : MatMulMode::GateUp;
    spec.k = rowWidth(first->getOperand(0));
    spec.n = rowWidth(first->getResult(0));
    if (g.qkv)
      spec.nK = rowWidth(g.projections[1]->getResult(0)), spec.nV = rowWidth(g.projections[2]->getResult(0));
    spec.weight = operandDType(gd::outsideDispatch(first->getOperand(1)));
    // The norm runs in its own launch; the matmul stages its f16 rows.
    const bool norm = g.linear && g.linear.getNorm();
    spec.halfInput = norm;
    if (norm && operandDType(gd::outsideDispatch(g.linear.getNorm())) != plan::DType::F32)
      throw CodegenError("fusion group '" + label + "': the norm launch reads its weight as f32");
    spec.biasA = bool(g.biases[0]), spec.biasB = bool(g.biases[1]), spec.biasC = g.qkv && g.biases[2];
    if (auto gelu = dyn_cast_or_null<gd::GELUOp>(g.activation))
      spec.gelu = true, spec.geluTanh = gelu.getTanhApproximation();
    spec.halfResult = !g.qkv && handsOverHalf(yieldedResult(dispatch, g.product->getResult(0)));
    spec.coopTiling = gd::groupPrefillTiling(*profile_, !g.qkv, spec.k, spec.n, spec.nK, spec.nV);
    KernelInstance k;
    k.source = matmulKernel(spec);
    requireFormedWorkgroup(k.source, dispatch.getWorkgroup(), "fusion group '" + label + "'");
    const std::vector<std::string> parts =
        g.qkv ? std::vector<std::string>{"q", "k", "v"} : std::vector<std::string>{"gate", "up"};
    std::vector<plan::Dispatch> out;
    if (g.embedding) out.push_back(lower(dispatch, g.embedding, false)); // the rows the group reads
    // The scratch's partials: the norm launch's f16 rows first, then a split q/k/v's shares of its tiles.
    const uint64_t rowsBytes = norm ? static_cast<uint64_t>(maxTokens_ * spec.k) * 2 : 0;
    if (norm) {
      KernelInstance rows;
      const bool weighted = !groupNormFolded(g.projections, label);
      rows.source =
          normalizedRowsKernel(spec.k, g.linear.getEps()->convertToDouble(), weighted, options_.subgroupOps);
      rows.origins = {{BindingSource::ValueOf, 0, first->getOperand(0)}};
      if (weighted) rows.origins.push_back({BindingSource::ValueOf, 0, g.linear.getNorm()});
      rows.origins.push_back({BindingSource::ScratchPartials, 0});
      rows.scratchPartialBytes = rowsBytes;
      out.push_back(finish(dispatch, rows, perTokenGrid(dispatch.getContext(), 1), "norm_rows_f16",
                           label + ".norm", nullptr));
    }
    const SplitKScratch split = splitKScratch(spec, maxTokens_);
    const uint64_t splitOffset = llvm::alignTo(rowsBytes, kScratchRangeAlignment);
    k.scratchCounterBytes = split.counterBytes;
    for (const KernelBinding &b : k.source.bindings) {
      if (b.name == "x" && norm) { // the norm launch's f16 rows
        k.origins.push_back({BindingSource::ScratchPartials, 0, {}, 0, rowsBytes});
        continue;
      }
      if (b.name == "partial") {
        k.origins.push_back({BindingSource::ScratchPartials, 0, {}, splitOffset, split.partialBytes});
        continue;
      }
      if (b.name == "counters") {
        k.origins.push_back({BindingSource::ScratchCounters, 0});
        continue;
      }
      Value v;
      if (b.name == "x")
        v = first->getOperand(0);
      else if (b.name == "g")
        v = g.linear.getNorm();
      else if (b.name == "result")
        v = g.product->getResult(0);
      for (size_t i = 0; i < parts.size(); ++i) {
        if (b.name == "w_" + parts[i]) v = g.projections[i]->getOperand(1);
        if (b.name == "bias_" + parts[i]) v = g.biases[i];
        if (b.name == "result_" + parts[i]) v = g.heads[i];
      }
      if (!v) throw CodegenError("fusion group '" + label + "': no value for binding '" + b.name + "'");
      k.origins.push_back({BindingSource::ValueOf, 0, v});
    }
    out.push_back(finish(dispatch, k, dispatch.getGrid(), family, label, nullptr));
    if (fusesRopeAppend(g)) {
      out.push_back(lowerRopeAppend(dispatch, g));
      return out;
    }
    for (Operation &op : dispatch.getBody().front().without_terminator())
      if (isa<gd::RoPEOp, gd::KVAppendOp>(op)) out.push_back(lower(dispatch, &op, false));
    return out;
  }

  // The decode kernel of a fusion group: one gemv.glsl launch over all the group's weights, with the bias
  // adds, RoPE, KV-cache write or activation of its body in the epilogue.
  plan::Dispatch lowerGroup(gd::DispatchOp dispatch) {
    const std::string label = locationName(dispatch.getLoc()),
                      family = withoutCoopSuffix(dispatch.getKernel());
    Block &body = dispatch.getBody().front();
    Operation *yield = body.getTerminator();
    GroupBody g = parseGroup(dispatch);
    const bool qkv = g.qkv;
    SmallVector<Operation *> &projections = g.projections;
    gd::RoPEOp ropeQ = g.ropeQ, ropeK = g.ropeK;
    gd::KVAppendOp append = g.append;
    Operation *activation = g.activation;

    Operation *first = projections.front();
    auto linear = dyn_cast<gd::LinearOp>(first);
    GroupedGemvSpec spec;
    spec.qkv = qkv;
    spec.k = rowWidth(first->getOperand(0));
    spec.weight = operandDType(gd::outsideDispatch(first->getOperand(1)));
    spec.norm = linear && linear.getNorm();
    spec.normWeighted = !groupNormFolded(projections, label);
    if (spec.norm) spec.eps = linear.getEps()->convertToDouble();
    spec.subgroupOps = options_.subgroupOps;
    spec.workgroup = profile_->decodeGemvWorkgroup; // as groupDecodeKernel has it
    for (size_t i = 0; i < g.biases.size() && i < spec.biases.size(); ++i) spec.biases[i] = bool(g.biases[i]);
    if (g.embedding) {
      spec.embedding = true;
      spec.table = operandDType(gd::outsideDispatch(g.embedding.getTable()));
      spec.vocab = llvm::cast<RankedTensorType>(g.embedding.getTable().getType()).getDimSize(0);
    }
    if (qkv) {
      spec.nq = rowWidth(projections[0]->getResult(0));
      spec.nk = rowWidth(projections[1]->getResult(0));
      spec.nv = rowWidth(projections[2]->getResult(0));
      if (bool(ropeQ) != bool(ropeK))
        throw CodegenError("fusion group '" + label + "' rotates only one of q and k");
      if (ropeQ) spec.rope = rotarySpec(ropeQ);
      if (append) {
        spec.cacheHeadDim = module_.lookupSymbol<gd::KVCacheOp>(append.getCacheAttr()).getHeadDim();
        spec.maxSequence = options_.maxSequence;
      }
    } else {
      spec.n = rowWidth(projections[0]->getResult(0));
      auto gelu = dyn_cast<gd::GELUOp>(activation);
      spec.gelu = bool(gelu);
      spec.geluTanh = gelu && gelu.getTanhApproximation();
    }
    KernelInstance k;
    try {
      k.source = groupedGemvKernel(spec);
    } catch (const CodegenError &e) {
      throw CodegenError("fusion group '" + label + "': " + e.what());
    }
    // Each binding's value, by its name (groupedGemvKernel's order).
    const std::vector<std::string> parts =
        qkv ? std::vector<std::string>{"q", "k", "v"} : std::vector<std::string>{"gate", "up"};
    for (const KernelBinding &b : k.source.bindings) {
      auto valueOf = [](Value v) { return BindingSource{BindingSource::ValueOf, 0, v}; };
      const auto part = [&](const std::string &prefix) {
        return static_cast<size_t>(std::find(parts.begin(), parts.end(), b.name.substr(prefix.size())) -
                                   parts.begin());
      };
      if (b.name == "ids")
        k.origins.push_back(valueOf(g.embedding.getIds()));
      else if (b.name == "x")
        k.origins.push_back(valueOf(g.embedding ? g.embedding.getTable() : first->getOperand(0)));
      else if (b.name == "embedding")
        k.origins.push_back(valueOf(g.embedding.getResult()));
      else if (b.name.starts_with("w_"))
        k.origins.push_back(valueOf(projections[part("w_")]->getOperand(1)));
      else if (b.name == "g")
        k.origins.push_back(valueOf(linear.getNorm()));
      else if (b.name.starts_with("bias_"))
        k.origins.push_back(valueOf(g.biases[part("bias_")]));
      else if (b.name == "result_q" || b.name == "result")
        k.origins.push_back(valueOf(yield->getOperand(0)));
      else if (b.name == "result_k")
        k.origins.push_back(valueOf(yield->getOperand(1)));
      else if (b.name == "result_v")
        k.origins.push_back(valueOf(yield->getOperand(2)));
      else if (b.name == "k_cache")
        k.origins.push_back({BindingSource::CacheKeys, 0});
      else if (b.name == "v_cache")
        k.origins.push_back({BindingSource::CacheValues, 0});
      else
        throw CodegenError("fusion group '" + label + "': no value for binding '" + b.name + "'");
    }
    // The values' own types (an input or bias held otherwise than the f32 groupedGemvKernel assumes).
    for (size_t i = 0; i < k.origins.size(); ++i)
      if (k.origins[i].kind == BindingSource::ValueOf && k.source.bindings[i].access != Access::TokenIds)
        k.source.bindings[i].dtype = operandDType(gd::outsideDispatch(k.origins[i].value));
    if (append) k.cache = append.getCacheAttr();
    ArrayRef<int64_t> wg = *dispatch.getDecodeWorkgroup();
    requireFormedWorkgroup(k.source, wg, "fusion group '" + label + "'");
    // result_q is bound in every mode (MODE_QKV) and result in the others.
    addGemvPrefetchOf(k, dispatch, qkv ? "store_result_q(0u, value)" : "store_result(0u, value)",
                      "fusion group '" + label + "'");
    return finish(dispatch, k, *dispatch.getDecodeGrid(), family, label, nullptr);
  }

  // The shape, weight type, prologue and epilogue of a gerbil.matmul or gerbil.linear, for its GemvSpec or
  // MatMulSpec.
  template <class Spec> void describeProjection(Operation *m, Spec &spec) {
    auto linear = dyn_cast<gd::LinearOp>(m);
    spec.k = rowWidth(m->getOperand(0));
    spec.n = rowWidth(m->getResult(0));
    spec.norm = linear && linear.getNorm();
    spec.normWeighted = !normFolded(m);
    spec.residual = linear && linear.getResidual();
    if (spec.norm) spec.eps = linear.getEps()->convertToDouble();
    spec.weight = operandDType(gd::outsideDispatch(m->getOperand(1)));
  }

  // A decode gemv reads its RMSNorm prologue's weight as f32 (`what` names the dispatch at fault).
  void requireF32Norm(Operation *projection, const GemvSpec &spec, const std::string &what) {
    auto linear = dyn_cast<gd::LinearOp>(projection);
    if (spec.norm && operandDType(gd::outsideDispatch(linear.getNorm())) != plan::DType::F32)
      throw CodegenError(what + ": the decode gemv reads its norm weight as f32");
  }

  // The decode kernel of a logits projection grouped with its argmax (gerbil-fuse-logits-argmax): the
  // one-row gemv that also picks the greedy token (gemv.glsl with ARGMAX).
  plan::Dispatch lowerLogitsArgmax(gd::DispatchOp dispatch) {
    const std::string label = locationName(dispatch.getLoc());
    Block &body = dispatch.getBody().front();
    Operation *projection = &body.front(), *yield = body.getTerminator();
    auto argmax = dyn_cast_or_null<gd::ArgmaxOp>(projection->getNextNode());
    if (!isa<gd::MatMulOp, gd::LinearOp>(projection) || !argmax ||
        argmax.getLogits() != projection->getResult(0) || yield->getNumOperands() != 2 ||
        yield->getOperand(0) != projection->getResult(0) || yield->getOperand(1) != argmax.getResult())
      throw CodegenError("fusion group '" + label + "' (" + gd::kLogitsArgmaxKernel +
                         ") does not hold a projection and the argmax of its logits");
    auto linear = dyn_cast<gd::LinearOp>(projection);
    GemvSpec spec;
    describeProjection(projection, spec);
    requireF32Norm(projection, spec, "fusion group '" + label + "'");
    spec.subgroupOps = options_.subgroupOps;
    spec.rowFromPush = true;
    spec.argmax = true;
    spec.maxSequence = options_.maxSequence;
    KernelInstance k;
    k.source = gemvKernel(spec);
    requireFormedWorkgroup(k.source, *dispatch.getDecodeWorkgroup(), "fusion group '" + label + "'");
    for (const KernelBinding &b : k.source.bindings) {
      auto valueOf = [](Value v) { return BindingSource{BindingSource::ValueOf, 0, v}; };
      k.origins.push_back(b.name == "x"         ? valueOf(projection->getOperand(0))
                          : b.name == "w"       ? valueOf(projection->getOperand(1))
                          : b.name == "g"       ? valueOf(linear.getNorm())
                          : b.name == "result"  ? valueOf(yield->getOperand(0))
                          : b.name == "token"   ? valueOf(yield->getOperand(1))
                          : b.name == "ids"     ? BindingSource{BindingSource::InputIds}
                          : b.name == "partial" ? BindingSource{BindingSource::ScratchPartials}
                                                : BindingSource{BindingSource::ScratchCounters});
    }
    const GemvScratch scratch = gemvScratch(spec);
    k.scratchCounterBytes = scratch.counterBytes;
    k.scratchPartialBytes = scratch.partialBytes;
    return finish(dispatch, k, *dispatch.getDecodeGrid(), gd::kLogitsArgmaxKernel, label, nullptr);
  }

  AttentionSpec attentionSpec(gd::AttentionOp a) const {
    AttentionSpec spec{static_cast<int64_t>(a.getNumHeads()),
                       static_cast<int64_t>(a.getNumKvHeads()),
                       static_cast<int64_t>(a.getHeadDim()),
                       options_.maxSequence,
                       a.getScale().convertToDouble(),
                       a.getSlidingWindow() ? static_cast<int64_t>(*a.getSlidingWindow()) : 0};
    spec.halfCache = cacheHalf_;
    return spec;
  }

  static RotarySpec rotarySpec(gd::RoPEOp r) {
    RotarySpec spec;
    spec.headDim = r.getHeadDim();
    spec.rotaryDim = r.getRotaryDim();
    spec.invFreq.assign(r.getInvFreq().begin(), r.getInvFreq().end());
    spec.attentionScaling = r.getAttentionScaling().convertToDouble();
    return spec;
  }

  // Whether a q/k/v group's RoPE of q and k and cache write run in prefill as one launch (rope_append.glsl):
  // the body holds them as the decode kernel takes them, both rotations alike, the rotated keys used only
  // by the write, one position. Otherwise they run op by op.
  bool fusesRopeAppend(const GroupBody &g) {
    if (!g.qkv || !g.ropeQ || !g.ropeK || !g.append) return false;
    gd::RoPEOp q = g.ropeQ, k = g.ropeK;
    gd::KVAppendOp append = g.append;
    if (append.getKeys() != k.getResult() || !k.getResult().hasOneUse() ||
        q.getStartPos() != k.getStartPos() || append.getStartPos() != q.getStartPos() ||
        q.getHeadDim() != k.getHeadDim() || q.getRotaryDim() != k.getRotaryDim() ||
        q.getInvFreq() != k.getInvFreq() || q.getAttentionScaling() != k.getAttentionScaling())
      return false;
    auto cache = module_.lookupSymbol<gd::KVCacheOp>(append.getCacheAttr());
    return static_cast<int64_t>(cache.getHeadDim()) == static_cast<int64_t>(q.getHeadDim()) &&
           static_cast<int64_t>(cache.getNumKvHeads()) == static_cast<int64_t>(k.getNumHeads());
  }

  // The rope_append launch of a group that fusesRopeAppend.
  plan::Dispatch lowerRopeAppend(gd::DispatchOp dispatch, const GroupBody &g) {
    gd::RoPEOp q = g.ropeQ, k = g.ropeK;
    gd::KVAppendOp append = g.append;
    KernelInstance kernel;
    const RotarySpec rotary = rotarySpec(q);
    kernel.source = ropeAppendKernel(rotary, q.getNumHeads(), k.getNumHeads(), options_.maxSequence);
    kernel.origins = {{BindingSource::ValueOf, 0, q.getInput()},
                      {BindingSource::ValueOf, 0, k.getInput()},
                      {BindingSource::ValueOf, 0, append.getValues()},
                      {BindingSource::ValueOf, 0, q.getResult()},
                      {BindingSource::CacheKeys, 0},
                      {BindingSource::CacheValues, 0}};
    kernel.cache = append.getCacheAttr();
    AffineMap grid =
        perTokenGrid(dispatch.getContext(), ropeAppendColumns(rotary, q.getNumHeads(), k.getNumHeads()));
    return finish(dispatch, kernel, grid, "rope_append", locationName(append.getLoc()), nullptr);
  }

  // The weights a decode dispatch prefetches (gerbil-prefetch-weights): their ranges and bindings.
  std::pair<std::vector<PrefetchRange>, std::vector<BindingSource>> prefetchOf(gd::DispatchOp dispatch,
                                                                               const std::string &what) {
    std::vector<PrefetchRange> prefetch;
    std::vector<BindingSource> prefetched;
    std::optional<ArrayAttr> weights = dispatch.getPrefetchWeights();
    if (!weights) return {};
    ArrayRef<int64_t> sizes = *dispatch.getPrefetchBytes();
    std::vector<int64_t> strides(sizes.size(), 16);
    if (std::optional<ArrayRef<int64_t>> given = dispatch.getPrefetchStrides())
      strides.assign(given->begin(), given->end());
    for (auto [name, bytes, stride] : llvm::zip(*weights, sizes, strides)) {
      std::string symbol = llvm::cast<FlatSymbolRefAttr>(name).getValue().str();
      auto found = weightIndex_.find(symbol);
      if (found == weightIndex_.end())
        throw CodegenError(what + " prefetches '" + symbol + "', which is not a weight");
      if (static_cast<uint64_t>(bytes) > plan_.weights[found->second].bytes())
        throw CodegenError(what + " prefetches " + std::to_string(bytes) + " bytes of '" + symbol +
                           "', which has " + std::to_string(plan_.weights[found->second].bytes()));
      prefetch.push_back({bytes, stride});
      prefetched.push_back({BindingSource::Weight, static_cast<unsigned>(found->second)});
    }
    return {prefetch, prefetched};
  }

  // A decode gemv's prefetch workers (gerbil-prefetch-weights' spread-pages), before its own workgroups.
  void addGemvPrefetchOf(KernelInstance &k, gd::DispatchOp dispatch, const std::string &sink,
                         const std::string &what) {
    auto [prefetch, prefetched] = prefetchOf(dispatch, what);
    k.prefetches = true;
    if (prefetch.empty()) return;
    k.leadingWorkers = addGemvPrefetch(k.source, prefetch, sink);
    k.origins.insert(k.origins.end(), prefetched.begin(), prefetched.end());
  }

  // Whether a dispatch's prefetch is a launch beside it: every one with CodegenOptions::prefetchBeside, else
  // where gerbil-prefetch-weights chose it (a large model's).
  bool prefetchesBeside(gd::DispatchOp dispatch) const {
    return options_.prefetchBeside || (dispatch && dispatch.getPrefetchBeside());
  }

  // A decode attention's prefetch as a launch of its own (prefetchesBeside), or none where it prefetches
  // nothing.
  std::optional<plan::Dispatch> lowerPrefetchBeside(gd::DispatchOp dispatch, const std::string &label) {
    auto [prefetch, prefetched] = prefetchOf(dispatch, "decode attention '" + label + "'");
    if (prefetch.empty()) return std::nullopt;
    PrefetchLaunch launch = prefetchLaunch(prefetch);
    KernelInstance k;
    k.source = std::move(launch.source);
    k.origins = {{BindingSource::ScratchSink, 0}};
    k.origins.insert(k.origins.end(), prefetched.begin(), prefetched.end());
    return finish(dispatch, k, constantGrid(dispatch.getContext(), {launch.workers, 1, 1}), "prefetch",
                  label + ".prefetch", nullptr);
  }

  // Split-KV attention of one query token (attention_decode.glsl), with its scratch: a counter per
  // workgroup column and the partial softmax results of every split; and the weights its dispatch
  // prefetches (gerbil-prefetch-weights).
  void specifyDecodeAttention(KernelInstance &k, gd::AttentionOp a) {
    const std::string what = "decode attention '" + locationName(a.getLoc()) + "'";
    // With prefetchBeside the prefetch is a launch of its own (lowerPrefetchBeside).
    auto dispatch = a->getParentOfType<gd::DispatchOp>();
    auto [prefetch, prefetched] = prefetchesBeside(dispatch)
                                      ? std::pair<std::vector<PrefetchRange>, std::vector<BindingSource>>{}
                                      : prefetchOf(dispatch, what);
    DecodeAttentionKernel kernel =
        decodeAttentionKernel(attentionSpec(a), options_.subgroupOps, profile_->decodeAttention, prefetch);
    requireFormedWorkgroup(kernel.source, k.source.workgroup, what);
    k.source = kernel.source;
    k.origins = {{BindingSource::Operand, 0},         {BindingSource::CacheKeys, 0},
                 {BindingSource::CacheValues, 0},     {BindingSource::Result, 0},
                 {BindingSource::ScratchPartials, 0}, {BindingSource::ScratchCounters, 0}};
    k.origins.insert(k.origins.end(), prefetched.begin(), prefetched.end());
    k.prefetches = true;
    k.cache = a.getCacheAttr();
    k.scratchCounterBytes = kernel.scratchCounterBytes;
    k.scratchPartialBytes = kernel.scratchPartialBytes;
    k.grid = kernel.grid;
    if (k.scratchCounterBytes > kScratchPartialsOffset)
      throw CodegenError("attention has " + std::to_string(kernel.grid[0]) +
                         " workgroup columns, more than the scratch holds");
  }

  // The plan dispatches of one dispatch: itself, or for a fusion group in prefill one per op of its body.
  std::vector<plan::Dispatch> lowerSchedule(gd::DispatchOp dispatch, bool decode) {
    if (holdsOneOp(dispatch)) {
      Operation *op = &dispatch.getBody().front().front();
      plan::Dispatch lowered = lower(dispatch, op, decode);
      if (decode && prefetchesBeside(dispatch) && isa<gd::AttentionOp>(op) && dispatch.getDecodeGrid())
        if (std::optional<plan::Dispatch> beside = lowerPrefetchBeside(dispatch, lowered.label)) {
          lowered.overlapsNext = true; // the prefetch reads weights only: nothing the attention writes
          return {lowered, *beside};
        }
      return {lowered};
    }
    if (decode && dispatch.getKernel() == gd::kLogitsArgmaxKernel) return {lowerLogitsArgmax(dispatch)};
    if (decode && dispatch.getDecodeGrid()) return {lowerGroup(dispatch)};
    if (!decode && dispatch.getKernel().ends_with(gd::kCoopSuffix)) return lowerGroupPrefill(dispatch);
    // Op by op, but a q/k/v group's RoPE and cache write as one launch after its projections.
    std::optional<GroupBody> group;
    if (withoutCoopSuffix(dispatch.getKernel()) == gd::kQKVKernel) group = parseGroup(dispatch);
    const bool fuseRope = group && fusesRopeAppend(*group);
    std::vector<plan::Dispatch> ops;
    for (Operation &op : dispatch.getBody().front().without_terminator())
      if (!fuseRope || !isa<gd::RoPEOp, gd::KVAppendOp>(op)) ops.push_back(lower(dispatch, &op, false));
    if (fuseRope) ops.push_back(lowerRopeAppend(dispatch, *group));
    return ops;
  }

  plan::Dispatch lower(gd::DispatchOp dispatch, Operation *op, bool decode) {
    decode = decode && dispatch.getDecodeGrid().has_value();
    KernelInstance k = specify(dispatch, op, decode);
    if (decode && dispatch.getPrefetchWeights() && !k.prefetches)
      throw CodegenError("dispatch '" + locationName(dispatch.getLoc()) + "' (" + dispatch.getKernel().str() +
                         ") prefetches weights, which only decode attention and gemv launches can");
    std::optional<gd::KernelChoice> own =
        holdsOneOp(dispatch) ? std::nullopt : gd::chooseKernel(op, *profile_);
    AffineMap grid = own ? own->grid : decode ? *dispatch.getDecodeGrid() : dispatch.getGrid();
    if (k.grid) grid = constantGrid(dispatch.getContext(), {(*k.grid)[0], (*k.grid)[1], (*k.grid)[2]});
    std::string family = own ? own->kernel : dispatch.getKernel().str();
    // A decode variant is not a tensor-core kernel: name it by its family (linear, attention).
    if (decode) family = withoutCoopSuffix(family);
    return finish(dispatch, k, grid, family, locationName(own ? op->getLoc() : dispatch.getLoc()), op);
  }

  // The plan dispatch of a kernel instance; `op` resolves its Operand and Result bindings.
  plan::Dispatch finish(gd::DispatchOp dispatch, KernelInstance k, AffineMap grid, const std::string &family,
                        const std::string &label, Operation *op) {
    plan::Dispatch d;
    d.label = label;
    if (k.scratchCounterBytes > kScratchPartialsOffset)
      throw CodegenError("dispatch '" + label + "' needs " + std::to_string(k.scratchCounterBytes / 4) +
                         " counters, more than the scratch holds (" +
                         std::to_string(kScratchPartialsOffset / 4) +
                         "): a shorter prefill chunk needs fewer");
    bool bindsCache = false;
    for (const BindingSource &origin : k.origins) {
      switch (origin.kind) {
      case BindingSource::Operand:
        d.bindings.push_back(valueBinding(dispatch, op->getOperand(origin.index)));
        break;
      case BindingSource::Result:
        d.bindings.push_back(valueBinding(dispatch, op->getResult(origin.index)));
        break;
      case BindingSource::ValueOf:
        d.bindings.push_back(valueBinding(dispatch, origin.value));
        break;
      case BindingSource::InputIds:
        d.bindings.push_back(plan_.inputIds);
        break;
      case BindingSource::Weight:
        d.bindings.push_back({plan::BufferKind::Weight, origin.index, 0, 0});
        break;
      case BindingSource::ScratchCounters:
        d.bindings.push_back(
            {plan::BufferKind::Scratch, 0, 0, std::max<uint64_t>(k.scratchCounterBytes, 16)});
        plan_.scratchBytes = std::max(plan_.scratchBytes, kScratchPartialsOffset);
        break;
      case BindingSource::ScratchSink:
        d.bindings.push_back(
            {plan::BufferKind::Scratch, 0, kScratchPartialsOffset - kScratchSinkBytes, kScratchSinkBytes});
        plan_.scratchBytes = std::max(plan_.scratchBytes, kScratchPartialsOffset);
        break;
      case BindingSource::ScratchPartials: {
        const uint64_t offset = kScratchPartialsOffset + origin.scratchOffset,
                       bytes = origin.scratchBytes ? origin.scratchBytes : k.scratchPartialBytes;
        d.bindings.push_back({plan::BufferKind::Scratch, 0, offset, bytes});
        plan_.scratchBytes = std::max(plan_.scratchBytes, offset + bytes);
        break;
      }
      case BindingSource::CacheKeys:
      case BindingSource::CacheValues: {
        uint64_t layer = cacheLayer_.at(k.cache.getValue().str());
        uint64_t offset =
            layer * 2 * layerCacheBytes_ + (origin.kind == BindingSource::CacheValues ? layerCacheBytes_ : 0);
        d.bindings.push_back({plan::BufferKind::KVCache, 0, offset, layerCacheBytes_});
        bindsCache = true;
        break;
      }
      }
    }
    if (bindsCache && cacheHalf_ && holdCacheInHalf(k.source) != 2)
      throw CodegenError("dispatch '" + label + "' binds the KV cache but not as k_cache and v_cache");
    d.bindings.push_back({plan::BufferKind::State, 0, 0, plan_.stateBytes});
    d.grid = gridOf(dispatch, grid);
    if (k.leadingWorkers > 0) { // a decode grid: constant
      if (d.grid[0].mulT != 0)
        throw CodegenError("dispatch '" + label + "': prefetch workers in a grid that grows with T");
      d.grid[0] = plan::GridDim{0, d.grid[0].evaluate(1) + k.leadingWorkers, 1};
    }
    d.kernel = kernelIndex(k.source, family, label);
    return d;
  }

  std::array<plan::GridDim, 3> gridOf(gd::DispatchOp dispatch, AffineMap map) {
    std::array<plan::GridDim, 3> grid;
    auto constantAt = [&](AffineExpr e, int64_t tokens) {
      AffineExpr folded = e.replaceSymbols({getAffineConstantExpr(tokens, e.getContext())});
      auto c = llvm::dyn_cast<AffineConstantExpr>(folded);
      if (!c) throw CodegenError("grid expression is not affine in T");
      return c.getValue();
    };
    for (unsigned i = 0; i < 3; ++i) {
      AffineExpr e = map.getResult(i);
      int64_t div = 1;
      if (auto bin = llvm::dyn_cast<AffineBinaryOpExpr>(e); bin && bin.getKind() == AffineExprKind::CeilDiv) {
        auto rhs = llvm::dyn_cast<AffineConstantExpr>(bin.getRHS());
        if (!rhs) throw CodegenError("grid divisor must be constant");
        div = rhs.getValue();
        e = bin.getLHS();
      }
      int64_t at0 = constantAt(e, 0), at1 = constantAt(e, 1);
      if (constantAt(e, 7) != at0 + 7 * (at1 - at0))
        throw CodegenError("grid of '" + locationName(dispatch.getLoc()) + "' is not linear in T");
      grid[i] = {at1 - at0, at0, div};
    }
    return grid;
  }

  uint32_t kernelIndex(KernelSource source, const std::string &family, const std::string &label) {
    for (const KernelDefine &define : options_.kernelDefines)
      if (appliesTo(define, source)) setDefine(source, define.name, define.value);
    source.byAddress = options_.bufferAddresses;
    if (profile_->cooperativeMatrixApi == mlir::gerbil::CooperativeMatrixApi::KHR)
      useKhrCooperativeMatrix(source);
    std::string glsl = writeKernel(source);
    if (auto it = kernelBySource_.find(glsl); it != kernelBySource_.end()) return it->second;
    plan::Kernel kernel;
    kernel.name = family + "." + std::to_string(plan_.kernels.size());
    if (options_.glsl)
      *options_.glsl << "// ---- kernel " << kernel.name << " (first used by " << label << ")\n"
                     << glsl << "\n";
    kernel.spirv =
        compiler_.compile(glsl, kernel.name + " (" + label + ")",
                          source.khrCooperativeMatrix ? ShaderCompiler::CooperativeMatrices::RetargetToKhr
                                                      : ShaderCompiler::CooperativeMatrices::AsWritten);
    plan::Requirements &needs = plan_.requires_;
    if (source.khrCooperativeMatrix && needs.cooperativeMatrixShapes.empty())
      needs.cooperativeMatrixShapes.push_back(mlir::gerbil::kCooperativeMatrixShape);
    needs.maxSharedMemoryBytes =
        std::max({needs.maxSharedMemoryBytes, workgroupMemoryBytes(kernel.spirv), source.sharedMemoryBytes});
    for (const std::string &extension : source.deviceExtensions)
      if (std::find(needs.deviceExtensions.begin(), needs.deviceExtensions.end(), extension) ==
          needs.deviceExtensions.end())
        needs.deviceExtensions.push_back(extension);
    needs.shaderFloat16 = needs.shaderFloat16 || source.needsFloat16;
    needs.storageBuffer16BitAccess = needs.storageBuffer16BitAccess || usesHalfValues(source);
    needs.vulkanMemoryModel = needs.vulkanMemoryModel || source.needsVulkanMemoryModel;
    if (source.subgroupSize) {
      if (needs.subgroupSize && needs.subgroupSize != source.subgroupSize)
        throw CodegenError("kernel " + kernel.name + " assumes subgroups of " +
                           std::to_string(source.subgroupSize) + ", another kernel " +
                           std::to_string(needs.subgroupSize));
      needs.subgroupSize = source.subgroupSize;
    }
    if (source.subgroupOps) {
      plan_.requires_.subgroupArithmetic = true;
      plan_.requires_.minSubgroupSize = kMinSubgroupSize;
    }
    kernel.numBindings = static_cast<uint32_t>(source.bindings.size()) + 1; // + the state buffer
    needs.pushConstantBytes =
        std::max(needs.pushConstantBytes, plan::pushConstantBytes(plan_.bufferAccess, kernel));
    kernel.workgroupSize = {static_cast<uint32_t>(source.workgroup[0]),
                            static_cast<uint32_t>(source.workgroup[1]),
                            static_cast<uint32_t>(source.workgroup[2])};
    uint32_t index = static_cast<uint32_t>(plan_.kernels.size());
    plan_.kernels.push_back(std::move(kernel));
    kernelBySource_.emplace(std::move(glsl), index);
    return index;
  }

  uint64_t largestBinding() const {
    uint64_t largest = layerCacheBytes_;
    for (const plan::Weight &w : plan_.weights) largest = std::max(largest, w.bytes());
    for (const plan::Dispatch &d : plan_.prefill)
      for (const plan::Binding &b : d.bindings) largest = std::max(largest, b.size);
    return largest;
  }

  ModuleOp module_;
  CodegenOptions options_;
  plan::Plan plan_;
  ShaderCompiler compiler_;
  std::optional<mlir::gerbil::TargetProfile> profile_;
  int64_t maxTokens_ = 0;
  uint64_t layerCacheBytes_ = 0;
  bool cacheHalf_ = false; // the KV cache holds f16 (its bindings hold halfValues)
  std::map<std::string, size_t> weightIndex_;
  std::map<std::string, int64_t> cacheLayer_;
  std::map<std::string, uint32_t> kernelBySource_;
};

} // namespace

plan::Plan buildPlan(ModuleOp module, const CodegenOptions &options) {
  return PlanBuilder(module, options).build();
}

} // namespace gerbil::codegen
