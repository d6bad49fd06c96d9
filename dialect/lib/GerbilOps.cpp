// Verifiers of the gerbil ops: every shape, head count and dtype is checked where the op is built or parsed.
#include "gerbil/Dialect/GerbilDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::gerbil;

namespace {

RankedTensorType rankedType(Value v) { return llvm::dyn_cast<RankedTensorType>(v.getType()); }

// The static size of an activation's row ([?, N] -> N), or an error.
FailureOr<int64_t> rowSize(Operation *op, Value v, StringRef what) {
  auto type = rankedType(v);
  if (!type || type.getRank() != 2 || ShapedType::isDynamic(type.getDimSize(1)))
    return op->emitOpError() << what << " must be a [T, N] tensor with a static N, got " << v.getType();
  return type.getDimSize(1);
}

LogicalResult sameRows(Operation *op, Value a, Value b) {
  auto ta = rankedType(a), tb = rankedType(b);
  if (ta.getDimSize(0) != tb.getDimSize(0))
    return op->emitOpError() << "token dimension differs between " << a.getType() << " and " << b.getType();
  return success();
}

template <typename SymbolOp>
FailureOr<SymbolOp> lookupSymbol(Operation *op, SymbolTableCollection &table, FlatSymbolRefAttr name,
                                 StringRef kind) {
  auto found = table.lookupNearestSymbolFrom<SymbolOp>(op, name);
  if (!found) return op->emitOpError() << "refers to " << name << ", which is not a " << kind;
  return found;
}

} // namespace

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  auto type = llvm::dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 1 || type.getRank() > 2)
    return emitOpError() << "weight must be a static rank-1 or rank-2 tensor, got " << getType();
  for (int64_t d : type.getShape())
    if (d <= 0) return emitOpError() << "weight dimensions must be positive";
  if (getKeys().empty()) return emitOpError() << "needs at least one checkpoint key";
  if (auto slice = getSlice()) {
    if (slice->size() != 3) return emitOpError() << "slice must be [dim, start, length]";
    int64_t dim = (*slice)[0], start = (*slice)[1], length = (*slice)[2];
    if (dim < 0 || dim >= type.getRank() || start < 0 || length != type.getDimSize(dim))
      return emitOpError() << "slice [" << dim << ", " << start << ", " << length
                           << "] does not match the weight shape";
  }
  if (auto dtype = getDeviceDtype()) {
    Type t = *dtype;
    if (!t.isF32() && !t.isF16() && !t.isBF16())
      return emitOpError() << "device_dtype must be f32, f16 or bf16, got " << t;
  }
  return success();
}

LogicalResult WeightOp::verifySymbolUses(SymbolTableCollection &table) {
  auto by = getScaleColumnsByAttr();
  if (!by) return success();
  auto scale = lookupSymbol<WeightOp>(*this, table, by, "gerbil.weight");
  if (failed(scale)) return failure();
  auto type = llvm::cast<RankedTensorType>(getType());
  auto scaleType = llvm::cast<RankedTensorType>(scale->getType());
  if (type.getRank() != 2 || scaleType.getRank() != 1 || scaleType.getDimSize(0) != type.getDimSize(1) ||
      scale->getScaleColumnsBy())
    return emitOpError() << "scale_columns_by " << by << " must be an unscaled vector of its row length ("
                         << type.getDimSize(type.getRank() - 1) << "), got " << scaleType;
  return success();
}

LogicalResult WeightRefOp::verifySymbolUses(SymbolTableCollection &table) {
  auto weight = lookupSymbol<WeightOp>(*this, table, getNameAttr(), "gerbil.weight");
  if (failed(weight)) return failure();
  if (weight->getType() != getType())
    return emitOpError() << "type " << getType() << " differs from the weight's " << weight->getType();
  return success();
}

LogicalResult KVCacheOp::verify() {
  if (static_cast<int64_t>(getLayer()) < 0 || static_cast<int64_t>(getNumKvHeads()) <= 0 || static_cast<int64_t>(getHeadDim()) <= 0)
    return emitOpError() << "layer must be >= 0, num_kv_heads and head_dim positive";
  if (auto type = getElementType(); type && !type->isF32() && !type->isF16())
    return emitOpError() << "element_type must be f32 or f16, not " << *type;
  return success();
}

Type KVCacheOp::deviceElementType() {
  if (auto type = getElementType()) return *type;
  return Float32Type::get(getContext());
}

//===----------------------------------------------------------------------===//
// Graph ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  auto table = rankedType(getTable());
  if (table.getRank() != 2) return emitOpError() << "table must be [vocab, hidden]";
  auto hidden = rowSize(*this, getResult(), "result");
  if (failed(hidden)) return failure();
  if (*hidden != table.getDimSize(1))
    return emitOpError() << "result width " << *hidden << " differs from the table's " << table.getDimSize(1);
  if (rankedType(getIds()).getDimSize(0) != rankedType(getResult()).getDimSize(0))
    return emitOpError() << "one row per token id expected";
  return success();
}

LogicalResult PositionEmbeddingOp::verify() {
  auto table = rankedType(getTable());
  if (table.getRank() != 2) return emitOpError() << "table must be [positions, hidden]";
  auto hidden = rowSize(*this, getResult(), "result");
  if (failed(hidden)) return failure();
  if (*hidden != table.getDimSize(1))
    return emitOpError() << "result width " << *hidden << " differs from the table's " << table.getDimSize(1);
  return success();
}

LogicalResult RMSNormOp::verify() {
  auto n = rowSize(*this, getInput(), "input");
  if (failed(n)) return failure();
  auto weight = rankedType(getWeight());
  if (weight.getRank() != 1) return emitOpError() << "weight must be rank 1";
  int64_t group = weight.getDimSize(0);
  if (*n % group != 0)
    return emitOpError() << "weight of " << group << " does not divide the row of " << *n;
  if (getInput().getType() != getResult().getType()) return emitOpError() << "result type must match input";
  if (getEps().convertToDouble() <= 0) return emitOpError() << "eps must be positive";
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto n = rowSize(*this, getInput(), "input");
  if (failed(n)) return failure();
  for (Value v : {getWeight(), getBias()}) {
    auto t = rankedType(v);
    if (t.getRank() != 1 || t.getDimSize(0) != *n)
      return emitOpError() << "weight and bias must be [" << *n << "], got " << v.getType();
  }
  if (getInput().getType() != getResult().getType()) return emitOpError() << "result type must match input";
  return success();
}

LogicalResult MatMulOp::verify() {
  auto k = rowSize(*this, getInput(), "input");
  auto n = rowSize(*this, getResult(), "result");
  if (failed(k) || failed(n)) return failure();
  auto weight = rankedType(getWeight());
  if (weight.getRank() != 2) return emitOpError() << "weight must be [N, K]";
  if (weight.getDimSize(1) != *k)
    return emitOpError() << "weight " << getWeight().getType() << " does not take inputs of " << *k;
  if (weight.getDimSize(0) != *n)
    return emitOpError() << "weight " << getWeight().getType() << " does not give outputs of " << *n;
  return sameRows(*this, getInput(), getResult());
}

LogicalResult LinearOp::verify() {
  auto k = rowSize(*this, getInput(), "input");
  auto n = rowSize(*this, getResult(), "result");
  if (failed(k) || failed(n)) return failure();
  auto weight = rankedType(getWeight());
  if (weight.getRank() != 2 || weight.getDimSize(1) != *k || weight.getDimSize(0) != *n)
    return emitOpError() << "weight " << getWeight().getType() << " does not map rows of " << *k << " to " << *n;
  if (getNorm()) {
    auto norm = rankedType(getNorm());
    if (norm.getRank() != 1 || norm.getDimSize(0) != *k)
      return emitOpError() << "norm weight " << getNorm().getType() << " does not match rows of " << *k;
    if (!getEps() || getEps()->convertToDouble() <= 0) return emitOpError() << "a norm prologue needs a positive eps";
  }
  if (getResidual() && getResidual().getType() != getResult().getType())
    return emitOpError() << "residual " << getResidual().getType() << " must have the result's type";
  return sameRows(*this, getInput(), getResult());
}

LogicalResult AddOp::verify() {
  auto n = rowSize(*this, getLhs(), "lhs");
  if (failed(n)) return failure();
  auto rhs = rankedType(getRhs());
  if (rhs.getRank() == 1) {
    if (rhs.getDimSize(0) != *n)
      return emitOpError() << "bias " << getRhs().getType() << " does not match rows of " << *n;
  } else if (getRhs().getType() != getLhs().getType()) {
    return emitOpError() << "operands must have the same type or rhs must be a bias";
  }
  if (getResult().getType() != getLhs().getType()) return emitOpError() << "result type must match lhs";
  return success();
}

LogicalResult RoPEOp::verify() {
  auto n = rowSize(*this, getInput(), "input");
  if (failed(n)) return failure();
  int64_t heads = getNumHeads(), headDim = getHeadDim(), rotary = getRotaryDim();
  if (heads <= 0 || headDim <= 0 || heads * headDim != *n)
    return emitOpError() << "num_heads × head_dim must equal the row size " << *n;
  if (rotary <= 0 || rotary > headDim || rotary % 2 != 0)
    return emitOpError() << "rotary_dim must be even and within head_dim";
  if (static_cast<int64_t>(getInvFreq().size()) != rotary / 2)
    return emitOpError() << "inv_freq needs rotary_dim / 2 = " << rotary / 2 << " entries";
  return success();
}

LogicalResult KVAppendOp::verifySymbolUses(SymbolTableCollection &table) {
  auto cache = lookupSymbol<KVCacheOp>(*this, table, getCacheAttr(), "gerbil.kv_cache");
  if (failed(cache)) return failure();
  int64_t width = cache->getNumKvHeads() * cache->getHeadDim();
  for (Value v : {getKeys(), getValues()}) {
    auto n = rowSize(*this, v, "keys and values");
    if (failed(n)) return failure();
    if (*n != width)
      return emitOpError() << "rows of " << *n << " do not match the cache's " << cache->getNumKvHeads()
                           << " kv heads × " << cache->getHeadDim();
  }
  return sameRows(*this, getKeys(), getValues());
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), headDim = getHeadDim();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitOpError() << "num_heads, num_kv_heads and head_dim must be positive";
  if (heads % kvHeads != 0)
    return emitOpError() << "num_kv_heads (" << kvHeads << ") must divide num_heads (" << heads << ")";
  for (Value v : {getQueries(), getResult()}) {
    auto n = rowSize(*this, v, "queries and result");
    if (failed(n)) return failure();
    if (*n != heads * headDim)
      return emitOpError() << "rows of " << *n << " are not num_heads × head_dim = " << heads * headDim;
  }
  if (auto window = getSlidingWindow(); window && *window <= 0)
    return emitOpError() << "sliding_window must be positive";
  return sameRows(*this, getQueries(), getResult());
}

LogicalResult AttentionOp::verifySymbolUses(SymbolTableCollection &table) {
  auto cache = lookupSymbol<KVCacheOp>(*this, table, getCacheAttr(), "gerbil.kv_cache");
  if (failed(cache)) return failure();
  if (cache->getNumKvHeads() != getNumKvHeads() || cache->getHeadDim() != getHeadDim())
    return emitOpError() << "kv heads / head_dim differ from the cache " << getCacheAttr();
  return success();
}

LogicalResult ArgmaxOp::verify() {
  if (failed(rowSize(*this, getLogits(), "logits"))) return failure();
  if (getToken().getType().getDimSize(0) != 1) return emitOpError() << "gives one token: tensor<1xi32>";
  return success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

void DispatchOp::build(OpBuilder &builder, OperationState &state, TypeRange results, ValueRange operands,
                       StringRef kernel, AffineMap grid, ArrayRef<int64_t> workgroup) {
  state.addOperands(operands);
  state.addTypes(results);
  state.addAttribute(getKernelAttrName(state.name), builder.getStringAttr(kernel));
  state.addAttribute(getGridAttrName(state.name), AffineMapAttr::get(grid));
  state.addAttribute(getWorkgroupAttrName(state.name), builder.getDenseI64ArrayAttr(workgroup));
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value v : operands) block->addArgument(v.getType(), state.location);
}

LogicalResult DispatchOp::verify() {
  AffineMap grid = getGrid();
  if (grid.getNumDims() != 0 || grid.getNumSymbols() != 1 || grid.getNumResults() != 3)
    return emitOpError() << "grid must be ()[T] -> (x, y, z), got " << getGridAttr();
  if (getWorkgroup().size() != 3) return emitOpError() << "workgroup must have three sizes";
  for (int64_t s : getWorkgroup())
    if (s <= 0) return emitOpError() << "workgroup sizes must be positive";
  Block &block = getBody().front();
  if (block.getNumArguments() != getOperands().size())
    return emitOpError() << "body takes " << block.getNumArguments() << " arguments for "
                         << getOperands().size() << " operands";
  for (auto [arg, operand] : llvm::zip(block.getArguments(), getOperands()))
    if (arg.getType() != operand.getType()) return emitOpError() << "body argument types differ from operands";
  auto yield = llvm::cast<YieldOp>(block.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yielded types differ from the results";
  if (auto decode = getDecodeGrid(); decode && (decode->getNumDims() != 0 || decode->getNumSymbols() != 1 ||
                                                decode->getNumResults() != 3))
    return emitOpError() << "decode_grid must be ()[T] -> (x, y, z)";
  if (auto wg = getDecodeWorkgroup();
      wg && (wg->size() != 3 || llvm::any_of(*wg, [](int64_t s) { return s <= 0; })))
    return emitOpError() << "decode_workgroup must have three positive sizes";
  if (getDecodeWorkgroup().has_value() != getDecodeGrid().has_value())
    return emitOpError() << "decode_grid and decode_workgroup go together";
  if (auto offsets = getArenaOffsets(); offsets && offsets->size() != getNumResults())
    return emitOpError() << "needs one arena offset per result";
  if (getPrefetchWeights().has_value() != getPrefetchBytes().has_value())
    return emitOpError() << "prefetch_weights and prefetch_bytes go together";
  if (auto weights = getPrefetchWeights()) {
    if (!getDecodeGrid()) return emitOpError() << "prefetches weights but has no decode variant";
    ArrayRef<int64_t> sizes = *getPrefetchBytes();
    if (weights->size() != sizes.size())
      return emitOpError() << "needs one prefetch_bytes per prefetched weight";
    for (int64_t bytes : sizes)
      if (bytes <= 0 || bytes % 16 != 0)
        return emitOpError() << "prefetch_bytes must be positive multiples of 16, got " << bytes;
    if (std::optional<ArrayRef<int64_t>> strides = getPrefetchStrides()) {
      if (strides->size() != sizes.size())
        return emitOpError() << "needs one prefetch_strides per prefetched weight";
      for (int64_t stride : *strides)
        if (stride <= 0 || stride % 16 != 0)
          return emitOpError() << "prefetch_strides must be positive multiples of 16, got " << stride;
    }
  } else if (getPrefetchStrides()) {
    return emitOpError() << "prefetch_strides without prefetch_weights";
  }
  if (getPrefetchBeside() && !getPrefetchWeights())
    return emitOpError() << "prefetch_beside without prefetch_weights";
  // Codegen launches only an attention's prefetch beside it (a gemv's workers come before its own).
  if (getPrefetchBeside() && !getKernel().starts_with("attention"))
    return emitOpError() << "prefetch_beside on a '" << getKernel() << "' dispatch (attentions only)";
  return success();
}

#define GET_OP_CLASSES
#include "gerbil/Dialect/GerbilOps.cpp.inc"
