#include "compiler/codegen/PlanBuilder.h"

#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/ShaderCompiler.h"

#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
namespace gd = mlir::gerbil;

namespace gerbil::codegen {
namespace {

// Where a kernel binding's buffer comes from, relative to its dispatch.
struct BindingSource {
  enum Kind { Operand, Result, CacheKeys, CacheValues, InputIds } kind;
  unsigned index = 0;
};

struct KernelInstance {
  KernelSource source;
  std::vector<BindingSource> origins;  // parallel to source.bindings
  FlatSymbolRefAttr cache;
};

std::string uintValue(int64_t v) { return std::to_string(v) + "u"; }

int64_t rowWidth(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1); }

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

    for (Operation &op : forward.getBody().front()) {
      if (auto dispatch = dyn_cast<gd::DispatchOp>(op)) {
        plan_.prefill.push_back(lower(dispatch, false));
        plan_.decode.push_back(lower(dispatch, true));
      }
      else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        plan_.logits = arenaBinding(ret.getOperand(0));
        // A greedy token result comes from the argmax dispatch, which must be the step's last.
        plan_.gpuArgmax = ret.getNumOperands() == 2 && !plan_.prefill.empty() &&
                          plan_.kernels[plan_.prefill.back().kernel].name.rfind("argmax.", 0) == 0;
      }
      else if (!isa<gd::WeightRefOp>(op))
        throw CodegenError("'" + op.getName().getStringRef().str() + "' is outside any dispatch");
    }
    plan_.requires_.maxStorageBufferRange = largestBinding();
    plan::validate(plan_, "generated plan");
    return std::move(plan_);
  }

private:
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
      weight.deviceDType = dtypeOf(w.getDeviceDtype() ? *w.getDeviceDtype() : type.getElementType());
      weight.transpose = w.getTranspose();
      if (auto slice = w.getSlice()) {
        weight.sliceDim = static_cast<int32_t>((*slice)[0]);
        weight.sliceStart = (*slice)[1];
        weight.sliceLength = (*slice)[2];
      }
      weightIndex_[weight.name] = plan_.weights.size();
      plan_.weights.push_back(std::move(weight));
    }
  }

  void readCaches() {
    int64_t layers = 0, kvHeads = 0, headDim = 0;
    for (auto c : module_.getOps<gd::KVCacheOp>()) {
      layers = std::max<int64_t>(layers, c.getLayer() + 1);
      kvHeads = c.getNumKvHeads();
      headDim = c.getHeadDim();
      cacheLayer_[c.getSymName().str()] = c.getLayer();
    }
    layerCacheBytes_ = static_cast<uint64_t>(kvHeads * options_.maxSequence * headDim) * 4;
    plan_.kvCache = {layers, kvHeads, headDim, plan::DType::F32, "LHSd", 2 * layerCacheBytes_ * layers};
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
    return {plan::BufferKind::Arena, 0, static_cast<uint64_t>((*producer.getArenaOffsets())[result.getResultNumber()]),
            valueBytes(v)};
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
    if (auto ref = v.getDefiningOp<gd::WeightRefOp>()) return plan_.weights[weightIndex_.at(ref.getName().str())].deviceDType;
    return dtypeOf(llvm::cast<RankedTensorType>(v.getType()).getElementType());
  }

  // `decode`: the one-token variant, where the dispatch has one (decode_grid).
  KernelInstance specify(gd::DispatchOp dispatch, Operation *op, bool decode) {
    KernelInstance k;
    ArrayRef<int64_t> wg =
        decode && dispatch.getDecodeWorkgroup() ? *dispatch.getDecodeWorkgroup() : dispatch.getWorkgroup();
    k.source.workgroup = {wg[0], wg[1], wg[2]};
    auto define = [&](const std::string &name, const std::string &value) { k.source.defines.emplace_back(name, value); };
    auto bind = [&](const std::string &name, Access access, BindingSource origin) {
      plan::DType dtype = plan::DType::F32;
      if (origin.kind == BindingSource::Operand) dtype = operandDType(dispatch.getOperand(origin.index));
      k.source.bindings.push_back({name, access, dtype});
      k.origins.push_back(origin);
    };
    auto operand = [](unsigned i) { return BindingSource{BindingSource::Operand, i}; };
    BindingSource result{BindingSource::Result, 0};
    const std::string family = dispatch.getKernel().str();
    k.source.templateFile = family + ".glsl";

    llvm::TypeSwitch<Operation *>(op)
        .Case<gd::EmbeddingOp>([&](gd::EmbeddingOp e) {
          define("VOCAB", uintValue(e.getTable().getType().getDimSize(0)));
          define("HIDDEN", uintValue(rowWidth(e.getResult())));
          bind("ids", Access::TokenIds, operand(0));
          bind("table", Access::Read, operand(1));
          bind("result", Access::Write, result);
        })
        .Case<gd::PositionEmbeddingOp>([&](gd::PositionEmbeddingOp e) {
          define("POSITIONS", uintValue(e.getTable().getType().getDimSize(0)));
          define("HIDDEN", uintValue(rowWidth(e.getResult())));
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
        })
        .Case<gd::LayerNormOp>([&](gd::LayerNormOp n) {
          define("ROW", uintValue(rowWidth(n.getInput())));
          define("EPS", glslFloat(n.getEps().convertToDouble()));
          bind("x", Access::Read, operand(0));
          bind("w", Access::Read, operand(1));
          bind("bias", Access::Read, operand(2));
          bind("result", Access::Write, result);
          k.source.needsReduction = true;
        })
        .Case<gd::MatMulOp, gd::LinearOp>([&](Operation *m) {
          // matmul, or linear with an RMSNorm prologue and/or a residual epilogue: one template each for
          // prefill (matmul.glsl) and the one-token decode variant (gemv.glsl).
          auto linear = dyn_cast<gd::LinearOp>(m);
          bool norm = linear && linear.getNorm(), residual = linear && linear.getResidual();
          define("K", uintValue(rowWidth(m->getOperand(0))));
          define("N", uintValue(rowWidth(m->getResult(0))));
          define("NORM_PROLOGUE", norm ? "1" : "0");
          define("RESIDUAL", residual ? "1" : "0");
          if (norm) define("EPS", glslFloat(linear.getEps()->convertToDouble()));
          k.source.templateFile = decode ? "gemv.glsl" : "matmul.glsl";
          if (decode) {
            defineGemv(k, "MODE_SINGLE", rowWidth(m->getOperand(0)), rowWidth(m->getResult(0)),
                       operandDType(dispatch.getOperand(1))); // the body sees block arguments
          } else {
            define("ROWS", uintValue(gd::kMatMulRows));
            define("TOKENS", uintValue(gd::kMatMulTokens));
          }
          bind("x", Access::Read, operand(0));
          bind("w", Access::Read, operand(1));
          // Operand order of gerbil.linear: input, weight, [norm], [residual].
          unsigned next = 2;
          if (norm) bind("g", Access::Read, operand(next++));
          if (residual) bind("residual", Access::Read, operand(next++));
          bind("result", Access::Write, result);
          if (decode) addGemvViews(k);
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
          define("ROTARY_DIM", uintValue(r.getRotaryDim()));
          define("ATTENTION_SCALING", glslFloat(r.getAttentionScaling().convertToDouble()));
          std::string values;
          for (double f : r.getInvFreq()) values += (values.empty() ? "" : ", ") + glslFloat(static_cast<float>(f));
          define("INV_FREQ_VALUES", values);
          bind("x", Access::Read, operand(0));
          bind("result", Access::Write, result);
        })
        .Case<gd::KVAppendOp>([&](gd::KVAppendOp a) {
          auto cache = module_.lookupSymbol<gd::KVCacheOp>(a.getCacheAttr());
          define("KV_HEADS", uintValue(cache.getNumKvHeads()));
          define("HEAD_DIM", uintValue(cache.getHeadDim()));
          define("SEQ", uintValue(options_.maxSequence));
          bind("k", Access::Read, operand(0));
          bind("v", Access::Read, operand(1));
          bind("k_cache", Access::Write, {BindingSource::CacheKeys, 0});
          bind("v_cache", Access::Write, {BindingSource::CacheValues, 0});
          k.cache = a.getCacheAttr();
        })
        .Case<gd::ArgmaxOp>([&](gd::ArgmaxOp a) {
          define("VOCAB", uintValue(rowWidth(a.getLogits())));
          define("SEQ", uintValue(options_.maxSequence));
          bind("logits", Access::Read, operand(0));
          bind("result", Access::TokenIdsWrite, result);
          bind("ids", Access::TokenIdsWrite, {BindingSource::InputIds, 0});
        })
        .Case<gd::AttentionOp>([&](gd::AttentionOp a) {
          define("HEADS", uintValue(a.getNumHeads()));
          define("KV_HEADS", uintValue(a.getNumKvHeads()));
          define("HEAD_DIM", uintValue(a.getHeadDim()));
          define("SEQ", uintValue(options_.maxSequence));
          define("SCALE", glslFloat(a.getScale().convertToDouble()));
          define("WINDOW", uintValue(a.getSlidingWindow() ? *a.getSlidingWindow() : 0));
          bind("q", Access::Read, operand(0));
          bind("k_cache", Access::Read, {BindingSource::CacheKeys, 0});
          bind("v_cache", Access::Read, {BindingSource::CacheValues, 0});
          bind("result", Access::Write, result);
          k.cache = a.getCacheAttr();
          k.source.needsReduction = true;
        })
        .Default([&](Operation *other) {
          throw CodegenError("no kernel for '" + other->getName().getStringRef().str() + "'");
        });
    return k;
  }

  // The defines of gemv.glsl for a K -> N projection (N outputs; with MODE_GATE_UP, N gate/up pairs).
  void defineGemv(KernelInstance &k, const std::string &mode, int64_t kDim, int64_t n, plan::DType weights) {
    gd::GemvShape shape = gd::gemvShape(kDim, n, mode == "MODE_GATE_UP");
    auto define = [&](const std::string &name, const std::string &value) {
      k.source.defines.emplace_back(name, value);
    };
    for (const char *m : {"MODE_SINGLE", "MODE_GATE_UP", "MODE_QKV"}) define(m, mode == m ? "1" : "0");
    int64_t perLoad = weights == plan::DType::F32 ? 4 : 8;
    define("ROWS", uintValue(shape.rows));
    define("SLOTS", uintValue(shape.slots()));
    define("X_TILE", uintValue(shape.xTile));
    define("X_VEC4", kDim % 4 == 0 ? "1" : "0");
    define("VEC_LOADS", kDim % perLoad == 0 ? "1" : "0");
    define("W_PACKED16", weights == plan::DType::F32 ? "0" : "1");
    define("W_BF16", weights == plan::DType::BF16 ? "1" : "0");
    k.source.subgroupOps = options_.subgroupOps;
  }

  // 16-byte views of the gemv's input, norm weight and weight matrices.
  static void addGemvViews(KernelInstance &k) {
    for (auto &b : k.source.bindings)
      if (b.name == "x" || b.name == "g" || b.name.rfind("w", 0) == 0) b.vec4View = true;
  }

  plan::Dispatch lower(gd::DispatchOp dispatch, bool decode) {
    decode = decode && dispatch.getDecodeGrid().has_value();
    Block &body = dispatch.getBody().front();
    if (body.getOperations().size() != 2)
      throw CodegenError("dispatch '" + locationName(dispatch.getLoc()) + "' holds more than one op");
    Operation *op = &body.front();
    KernelInstance k = specify(dispatch, op, decode);

    plan::Dispatch d;
    d.label = locationName(dispatch.getLoc());
    for (const BindingSource &origin : k.origins) {
      switch (origin.kind) {
      case BindingSource::Operand: d.bindings.push_back(operandBinding(dispatch.getOperand(origin.index))); break;
      case BindingSource::Result: d.bindings.push_back(arenaBinding(dispatch.getResult(origin.index))); break;
      case BindingSource::InputIds: d.bindings.push_back(plan_.inputIds); break;
      case BindingSource::CacheKeys:
      case BindingSource::CacheValues: {
        uint64_t layer = cacheLayer_.at(k.cache.getValue().str());
        uint64_t offset = layer * 2 * layerCacheBytes_ + (origin.kind == BindingSource::CacheValues ? layerCacheBytes_ : 0);
        d.bindings.push_back({plan::BufferKind::KVCache, 0, offset, layerCacheBytes_});
        break;
      }
      }
    }
    d.bindings.push_back({plan::BufferKind::State, 0, 0, plan_.stateBytes});
    d.grid = gridOf(dispatch, decode ? *dispatch.getDecodeGrid() : dispatch.getGrid());
    d.kernel = kernelIndex(k.source, dispatch);
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

  uint32_t kernelIndex(const KernelSource &source, gd::DispatchOp dispatch) {
    std::string glsl = writeKernel(source);
    if (auto it = kernelBySource_.find(glsl); it != kernelBySource_.end()) return it->second;
    plan::Kernel kernel;
    kernel.name = dispatch.getKernel().str() + "." + std::to_string(plan_.kernels.size());
    if (options_.glsl) *options_.glsl << "// ---- kernel " << kernel.name << " (first used by " << locationName(dispatch.getLoc()) << ")\n" << glsl << "\n";
    kernel.spirv = compiler_.compile(glsl, kernel.name + " (" + locationName(dispatch.getLoc()) + ")");
    plan_.requires_.maxSharedMemoryBytes =
        std::max(plan_.requires_.maxSharedMemoryBytes, workgroupMemoryBytes(kernel.spirv));
    if (source.subgroupOps) {
      plan_.requires_.subgroupArithmetic = true;
      plan_.requires_.minSubgroupSize = kMinSubgroupSize;
    }
    kernel.numBindings = static_cast<uint32_t>(source.bindings.size()) + 1;  // + the state buffer
    kernel.workgroupSize = {static_cast<uint32_t>(source.workgroup[0]), static_cast<uint32_t>(source.workgroup[1]),
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
  int64_t maxTokens_ = 0;
  uint64_t layerCacheBytes_ = 0;
  std::map<std::string, size_t> weightIndex_;
  std::map<std::string, int64_t> cacheLayer_;
  std::map<std::string, uint32_t> kernelBySource_;
};

} // namespace

plan::Plan buildPlan(ModuleOp module, const CodegenOptions &options) { return PlanBuilder(module, options).build(); }

} // namespace gerbil::codegen
