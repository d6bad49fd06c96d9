#include "compiler/generator/Generator.h"

#include "gerbil/Dialect/GerbilDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;
namespace names = ::gerbil::weight_names;
namespace gd = mlir::gerbil;

namespace gerbil {
namespace {

class ModuleBuilder {
public:
  ModuleBuilder(MLIRContext &ctx, const ModelDescription &model)
      : ctx_(ctx), model_(model), b_(&ctx), f32_(b_.getF32Type()) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc("model"));
    module_ = *module;
    module_->setAttr("gerbil.model", describeModel());
    b_.setInsertionPointToEnd(module_.getBody());
    for (const WeightDescription &w : model_.weights) declareWeight(w);
    for (int64_t i = 0; i < model_.numLayers; ++i)
      b_.create<gd::KVCacheOp>(loc(cacheName(i)), b_.getStringAttr(cacheName(i)), b_.getI64IntegerAttr(i),
                               b_.getI64IntegerAttr(model_.numKVHeads), b_.getI64IntegerAttr(model_.headDim),
                               /*element_type=*/mlir::TypeAttr());
    buildForward();
    return module;
  }

private:
  static std::string cacheName(int64_t layer) { return "kv_cache." + std::to_string(layer); }

  Location loc(const std::string &name) { return NameLoc::get(b_.getStringAttr(name)); }

  RankedTensorType rows(int64_t width) { return RankedTensorType::get({ShapedType::kDynamic, width}, f32_); }

  DictionaryAttr describeModel() {
    auto ints = [&](const std::vector<int64_t> &v) { return b_.getI64ArrayAttr(v); };
    SmallVector<StringRef> ignored(model_.ignoredKeys.begin(), model_.ignoredKeys.end());
    SmallVector<NamedAttribute> attrs = {
        b_.getNamedAttr("architecture", b_.getStringAttr(model_.architecture)),
        b_.getNamedAttr("family", b_.getStringAttr(model_.family)),
        b_.getNamedAttr("hidden_size", b_.getI64IntegerAttr(model_.hiddenSize)),
        b_.getNamedAttr("num_layers", b_.getI64IntegerAttr(model_.numLayers)),
        b_.getNamedAttr("vocab_size", b_.getI64IntegerAttr(model_.vocabSize)),
        b_.getNamedAttr("max_position_embeddings", b_.getI64IntegerAttr(model_.maxPositionEmbeddings)),
        b_.getNamedAttr("bos_token_ids", ints(model_.bosTokenIds)),
        b_.getNamedAttr("eos_token_ids", ints(model_.eosTokenIds)),
        b_.getNamedAttr("ignored_keys", b_.getStrArrayAttr(ignored)),
    };
    return b_.getDictionaryAttr(attrs);
  }

  void declareWeight(const WeightDescription &w) {
    auto type = RankedTensorType::get(w.shape, f32_);
    SmallVector<StringRef> keys(w.source.keys.begin(), w.source.keys.end());
    auto op = b_.create<gd::WeightOp>(
        loc(w.name), b_.getStringAttr(w.name), TypeAttr::get(type), b_.getStrArrayAttr(keys),
        w.source.transpose ? b_.getUnitAttr() : nullptr, nullptr, nullptr, nullptr);
    if (w.source.sliceDim >= 0)
      op.setSliceAttr(b_.getDenseI64ArrayAttr({w.source.sliceDim, w.source.sliceStart, w.source.sliceLength}));
    weightTypes_[w.name] = type;
  }

  // A weight as a value of @forward; the description must have it.
  Value weight(const std::string &name) {
    if (auto it = refs_.find(name); it != refs_.end()) return it->second;
    auto type = weightTypes_.find(name);
    if (type == weightTypes_.end())
      throw FrontendError(model_.specFile + ": the " + model_.family + " structure needs weight '" + name +
                          "', which the arch spec does not map");
    Value ref = b_.create<gd::WeightRefOp>(loc(name), type->second, name);
    refs_[name] = ref;
    return ref;
  }
  bool hasWeight(const std::string &name) const { return weightTypes_.count(name) != 0; }

  Value norm(Value x, const std::string &prefix, const std::string &label) {
    if (model_.norm == NormKind::LayerNorm)
      return b_.create<gd::LayerNormOp>(loc(label), x.getType(), x, weight(prefix + ".weight"),
                                            weight(prefix + ".bias"), b_.getF64FloatAttr(model_.normEps));
    return b_.create<gd::RMSNormOp>(loc(label), x.getType(), x, weight(prefix + ".weight"),
                                        b_.getF64FloatAttr(model_.normEps));
  }

  // x · Wᵀ (+ bias when `biased`).
  Value linear(Value x, const std::string &prefix, bool biased, const std::string &label) {
    Value w = weight(prefix + ".weight");
    int64_t out = llvm::cast<RankedTensorType>(w.getType()).getDimSize(0);
    Value y = b_.create<gd::MatMulOp>(loc(label), rows(out), x, w);
    if (biased) y = b_.create<gd::AddOp>(loc(label + ".bias"), y.getType(), y, weight(prefix + ".bias"));
    return y;
  }

  Value activation(Value x, const std::string &label) {
    switch (model_.activation) {
    case Activation::SiLU: return b_.create<gd::SiLUOp>(loc(label), x.getType(), x);
    case Activation::GELUTanh: return b_.create<gd::GELUOp>(loc(label), x.getType(), x, b_.getBoolAttr(true));
    case Activation::GELU: return b_.create<gd::GELUOp>(loc(label), x.getType(), x, b_.getBoolAttr(false));
    }
    return x;
  }

  Value rope(Value x, Value pos, int64_t heads, const std::string &label) {
    const RopeDescription &r = model_.rope;
    return b_.create<gd::RoPEOp>(loc(label), x.getType(), x, pos, b_.getI64IntegerAttr(heads),
                                     b_.getI64IntegerAttr(model_.headDim), b_.getI64IntegerAttr(r.rotaryDim),
                                     b_.getDenseF64ArrayAttr(r.invFreq), b_.getF64FloatAttr(r.attentionScaling));
  }

  Value attentionBlock(Value h, Value pos, int64_t i) {
    auto name = [&](const std::string &leaf) { return names::layer(i, leaf); };
    Value x = norm(h, name("attn_norm"), name("attn_norm"));
    Value q = linear(x, name("attn.q_proj"), model_.attentionBias, name("attn.q_proj"));
    Value k = linear(x, name("attn.k_proj"), model_.attentionBias, name("attn.k_proj"));
    Value v = linear(x, name("attn.v_proj"), model_.attentionBias, name("attn.v_proj"));
    if (model_.qkNorm) {
      q = b_.create<gd::RMSNormOp>(loc(name("attn.q_norm")), q.getType(), q, weight(name("attn.q_norm.weight")),
                                       b_.getF64FloatAttr(model_.normEps));
      k = b_.create<gd::RMSNormOp>(loc(name("attn.k_norm")), k.getType(), k, weight(name("attn.k_norm.weight")),
                                       b_.getF64FloatAttr(model_.normEps));
    }
    if (model_.positions == PositionKind::Rotary) {
      q = rope(q, pos, model_.numHeads, name("attn.q_rope"));
      k = rope(k, pos, model_.numKVHeads, name("attn.k_rope"));
    }
    auto cache = FlatSymbolRefAttr::get(&ctx_, cacheName(i));
    b_.create<gd::KVAppendOp>(loc(name("attn.kv_append")), k, v, pos, cache);
    std::optional<int64_t> window;
    if (i < static_cast<int64_t>(model_.layers.size())) window = model_.layers[i].slidingWindow;
    Value a = b_.create<gd::AttentionOp>(
        loc(name("attn.attention")), q.getType(), q, pos, cache, b_.getI64IntegerAttr(model_.numHeads),
        b_.getI64IntegerAttr(model_.numKVHeads), b_.getI64IntegerAttr(model_.headDim),
        b_.getF64FloatAttr(model_.attentionScale), window ? b_.getI64IntegerAttr(*window) : IntegerAttr());
    Value o = linear(a, name("attn.o_proj"), model_.outputBias, name("attn.o_proj"));
    return b_.create<gd::AddOp>(loc(name("attn.residual")), h.getType(), h, o);
  }

  Value mlpBlock(Value h, int64_t i) {
    auto name = [&](const std::string &leaf) { return names::layer(i, leaf); };
    Value x = norm(h, name("mlp_norm"), name("mlp_norm"));
    Value m;
    if (model_.mlp == MlpKind::Gated) {
      Value gate = linear(x, name("mlp.gate_proj"), model_.mlpBias, name("mlp.gate_proj"));
      Value up = linear(x, name("mlp.up_proj"), model_.mlpBias, name("mlp.up_proj"));
      Value act = activation(gate, name("mlp.act"));
      m = b_.create<gd::MulOp>(loc(name("mlp.gate_mul")), up.getType(), act, up);
    } else {
      m = activation(linear(x, name("mlp.up_proj"), model_.mlpBias, name("mlp.up_proj")), name("mlp.act"));
    }
    Value d = linear(m, name("mlp.down_proj"), model_.mlpBias, name("mlp.down_proj"));
    return b_.create<gd::AddOp>(loc(name("mlp.residual")), h.getType(), h, d);
  }

  void buildForward() {
    auto ids = RankedTensorType::get({ShapedType::kDynamic}, b_.getI32Type());
    auto logitsType = rows(model_.vocabSize);
    auto tokenType = RankedTensorType::get({1}, b_.getI32Type());
    auto fn = b_.create<func::FuncOp>(loc("forward"), "forward",
                                      b_.getFunctionType({ids, b_.getIndexType()}, {logitsType, tokenType}));
    Block *entry = fn.addEntryBlock();
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(entry);
    Value inputIds = entry->getArgument(0), pos = entry->getArgument(1);

    Value h = b_.create<gd::EmbeddingOp>(loc("embed_tokens"), rows(model_.hiddenSize), inputIds,
                                             weight(names::kEmbedTokens));
    if (model_.positions == PositionKind::Learned) {
      Value p = b_.create<gd::PositionEmbeddingOp>(loc("embed_positions"), rows(model_.hiddenSize), inputIds,
                                                       weight(names::kEmbedPositions), pos);
      h = b_.create<gd::AddOp>(loc("embed_sum"), h.getType(), h, p);
    }
    for (int64_t i = 0; i < model_.numLayers; ++i) h = mlpBlock(attentionBlock(h, pos, i), i);
    h = norm(h, "final_norm", "final_norm");
    Value head = weight(model_.tiedEmbeddings || !hasWeight(names::kLMHead) ? names::kEmbedTokens : names::kLMHead);
    Value logits = b_.create<gd::MatMulOp>(loc("lm_head"), logitsType, h, head);
    Value token = b_.create<gd::ArgmaxOp>(loc("argmax"), tokenType, logits);
    b_.create<func::ReturnOp>(loc("forward"), ValueRange{logits, token});
  }

  MLIRContext &ctx_;
  const ModelDescription &model_;
  OpBuilder b_;
  Type f32_;
  ModuleOp module_;
  std::map<std::string, RankedTensorType> weightTypes_;
  std::map<std::string, Value> refs_;
};

} // namespace

void loadGerbilDialects(MLIRContext &context) {
  context.loadDialect<gd::GerbilDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> generateModule(MLIRContext &context, const ModelDescription &model) {
  loadGerbilDialects(context);
  return ModuleBuilder(context, model).build();
}

} // namespace gerbil
