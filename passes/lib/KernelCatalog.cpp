#include "gerbil/Passes/KernelCatalog.h"

#include "gerbil/Dialect/GerbilDialect.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gerbil;

bool mlir::gerbil::isHalfType(Type dtype) {
  return dtype && (dtype.isF16() || dtype.isBF16());
}

namespace {

int64_t rowWidth(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1);
}

// Whether a weight is f16 or bf16 on the device (the layout pass has set its device dtype).
bool isHalfOnDevice(WeightOp weight) {
  return isHalfType(deviceElementType(weight));
}

// Whether a matmul's weight is f16 or bf16 on the device.
bool hasHalfWeights(Operation *mm) {
  // Inside a dispatch (an op of a grouped projection that prefill runs on its own) the weight is a block
  // argument of the dispatch body.
  return isHalfType(weightDeviceType(mm->getOperand(1), mm));
}

// Whether the model's matrices are f16 or bf16 on the device: plans of f32 weights keep f32 arithmetic
// everywhere (the tensor-core attention rounds its operands to f16).
bool modelHasHalfWeights(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module) return false;
  bool half = false;
  module.walk([&](WeightOp weight) {
    if (llvm::cast<RankedTensorType>(weight.getType()).getRank() != 2) return WalkResult::advance();
    half = isHalfOnDevice(weight);
    return WalkResult::interrupt();
  });
  return half;
}

// Grid (x, y, z): z the K splits of a tensor-core matmul, else 1.
KernelChoice choice(MLIRContext *ctx, StringRef kernel, int64_t wg, AffineExpr x, AffineExpr y,
                    int64_t z = 1) {
  return {kernel.str(),
          {wg, 1, 1},
          AffineMap::get(0, 1, {x, y, getAffineConstantExpr(z, ctx)}, ctx),
          std::nullopt};
}

} // namespace

namespace {
KernelChoice decodeOnly(MLIRContext *ctx, StringRef kernel, int64_t workgroup, int64_t groups) {
  AffineExpr one = getAffineConstantExpr(1, ctx);
  AffineMap grid = AffineMap::get(0, 1, {getAffineConstantExpr(groups, ctx), one, one}, ctx);
  // Prefill runs the group's ops one by one with their own choices; `grid` is the decode grid too.
  return {kernel.str(), {workgroup, 1, 1}, grid, grid, {workgroup, 1, 1}};
}
int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
} // namespace

KernelChoice mlir::gerbil::qkvKernel(MLIRContext *ctx, int64_t k, int64_t nq, int64_t nk, int64_t nv,
                                     int64_t workgroup) {
  GemvShape shape = qkvShape(k, nq, nk, nv, workgroup);
  int64_t groups = ceilDiv(nq, shape.rows) + ceilDiv(nk, shape.rows) + ceilDiv(nv, shape.rows);
  return decodeOnly(ctx, kQKVKernel, shape.workgroup, groups);
}

KernelChoice mlir::gerbil::gateUpKernel(MLIRContext *ctx, int64_t k, int64_t n, int64_t workgroup) {
  GemvShape shape = gemvShape(k, n, true, workgroup);
  return decodeOnly(ctx, kGateUpKernel, shape.workgroup, ceilDiv(n, shape.outputs()));
}

KernelChoice mlir::gerbil::logitsArgmaxKernel(MLIRContext *ctx, int64_t k, int64_t n) {
  return decodeOnly(ctx, kLogitsArgmaxKernel, gemvShape(k, n, false).workgroup, gemvArgmaxGrid(k, n).groups);
}

namespace {
// The projections of a grouped projection's dispatch (q, k, v or gate, up), in order; empty for other
// dispatches.
SmallVector<Operation *> groupProjections(DispatchOp group) {
  const bool qkv = group.getKernel() == kQKVKernel, gateUp = group.getKernel() == kGateUpKernel;
  SmallVector<Operation *> projections;
  if (!qkv && !gateUp) return projections;
  for (Operation &op : group.getBody().front().without_terminator())
    if (isa<MatMulOp, LinearOp>(op)) projections.push_back(&op);
  if (projections.size() != (qkv ? 3u : 2u)) projections.clear();
  return projections;
}
} // namespace

std::optional<KernelChoice> mlir::gerbil::groupDecodeKernel(DispatchOp group, const TargetProfile &profile) {
  SmallVector<Operation *> projections = groupProjections(group);
  if (projections.empty() || !profile.decodeGemvWorkgroup) return std::nullopt;
  const int64_t k = rowWidth(projections.front()->getOperand(0)), wg = profile.decodeGemvWorkgroup;
  auto rows = [&](size_t i) { return rowWidth(projections[i]->getResult(0)); };
  return group.getKernel() == kQKVKernel ? qkvKernel(group.getContext(), k, rows(0), rows(1), rows(2), wg)
                                         : gateUpKernel(group.getContext(), k, rows(0), wg);
}

std::optional<KernelChoice> mlir::gerbil::groupPrefillKernel(DispatchOp group, const TargetProfile &profile) {
  StringRef kernel = group.getKernel();
  const bool qkv = kernel == kQKVKernel, gateUp = kernel == kGateUpKernel;
  if (!(qkv || gateUp) || !profile.cooperativeMatrix) return std::nullopt;
  SmallVector<Operation *> projections = groupProjections(group);
  if (projections.empty()) return std::nullopt;
  int64_t k = rowWidth(projections.front()->getOperand(0));
  for (Operation *p : projections)
    if (!usesCoopMatMul(profile, k) || !hasHalfWeights(p) ||
        (isa<LinearOp>(p) && cast<LinearOp>(p).getResidual()))
      return std::nullopt;
  MLIRContext *ctx = group.getContext();
  int64_t n = rowWidth(projections.front()->getResult(0));
  int64_t nK = qkv ? rowWidth(projections[1]->getResult(0)) : 0,
          nV = qkv ? rowWidth(projections[2]->getResult(0)) : 0;
  CoopMatMulTiling tiling = groupPrefillTiling(profile, gateUp, k, n, nK, nV);
  if (gateUp && (tiling.tileN / tiling.warpsN) % 32 != 0) return std::nullopt;
  int64_t columns = gateUp ? coopGateUpColumns(tiling, n) : coopQKVColumns(tiling, n, nK, nV);
  AffineExpr tokens = getAffineSymbolExpr(0, ctx);
  KernelChoice c = choice(ctx, (kernel + kCoopSuffix).str(), tiling.workgroup(),
                          getAffineConstantExpr(columns, ctx), tokens.ceilDiv(tiling.tileT), tiling.splitK);
  c.decodeGrid = group.getDecodeGrid();
  ArrayRef<int64_t> wg = *group.getDecodeWorkgroup();
  c.decodeWorkgroup = {wg[0], wg[1], wg[2]};
  return c;
}

Value mlir::gerbil::outsideDispatch(Value v) {
  auto arg = llvm::dyn_cast<BlockArgument>(v);
  if (!arg) return v;
  auto dispatch = llvm::dyn_cast_or_null<DispatchOp>(arg.getOwner()->getParentOp());
  return dispatch ? dispatch.getOperand(arg.getArgNumber()) : v;
}

Type mlir::gerbil::deviceElementType(WeightOp weight) {
  return weight.getDeviceDtype() ? *weight.getDeviceDtype()
                                 : llvm::cast<RankedTensorType>(weight.getType()).getElementType();
}

Type mlir::gerbil::weightDeviceType(Value v, Operation *from) {
  auto ref = outsideDispatch(v).getDefiningOp<WeightRefOp>();
  auto weight = ref ? SymbolTable::lookupNearestSymbolFrom<WeightOp>(from, ref.getNameAttr()) : WeightOp();
  return weight ? deviceElementType(weight) : Type();
}

WeightRefOp mlir::gerbil::normWeightOf(LinearOp linear) {
  return linear.getNorm() ? outsideDispatch(linear.getNorm()).getDefiningOp<WeightRefOp>() : WeightRefOp();
}

bool mlir::gerbil::usesCoopMatMul(const TargetProfile &profile, int64_t k) {
  return profile.cooperativeMatrix && k % kCoopMatMulLoad == 0;
}

std::optional<KernelChoice> mlir::gerbil::chooseKernel(Operation *op, const TargetProfile &profile,
                                                       int64_t maxSequence) {
  MLIRContext *ctx = op->getContext();
  AffineExpr tokens = getAffineSymbolExpr(0, ctx);
  auto constant = [&](int64_t c) { return getAffineConstantExpr(c, ctx); };
  // The row kernels (KernelShapes.h): each token's row of `rows` over workgroups of kRowLoads per invocation.
  auto rowKernel = [&](StringRef kernel, Value rows) {
    return choice(ctx, kernel, kRowWorkgroup, tokens,
                  constant(ceilDiv(rowWidth(rows), kRowWorkgroup * kRowLoads)));
  };

  return llvm::TypeSwitch<Operation *, std::optional<KernelChoice>>(op)
      .Case<EmbeddingOp>([&](EmbeddingOp e) { return rowKernel("embedding", e.getResult()); })
      .Case<PositionEmbeddingOp>(
          [&](PositionEmbeddingOp e) { return rowKernel("position_embedding", e.getResult()); })
      .Case<RMSNormOp>([&](RMSNormOp norm) {
        int64_t groups = rowWidth(norm.getInput()) / norm.getWeight().getType().getDimSize(0);
        return choice(ctx, "rms_norm", 64, constant(groups), tokens);
      })
      .Case<LayerNormOp>([&](auto) { return choice(ctx, "layer_norm", 64, tokens, constant(1)); })
      .Case<MatMulOp, LinearOp>([&](Operation *mm) {
        int64_t n = rowWidth(mm->getResult(0)), k = rowWidth(mm->getOperand(0));
        std::string family = isa<LinearOp>(mm) ? "linear" : "matmul";
        KernelChoice c = choice(ctx, family, kMatMulWorkgroup, constant(ceilDiv(n, kMatMulRows)),
                                tokens.ceilDiv(kMatMulTokens));
        if (usesCoopMatMul(profile, k) && hasHalfWeights(mm)) {
          CoopMatMulTiling tiling = coopTilingFor(profile, n, k);
          c = choice(ctx, family + kCoopSuffix, tiling.workgroup(), constant(coopTiles(tiling, n)),
                     tokens.ceilDiv(tiling.tileT), tiling.splitK);
        }
        GemvShape gemv = gemvShape(k, n, false, profile.decodeGemvWorkgroup);
        c.decodeGrid = AffineMap::get(0, 1, {constant(ceilDiv(n, gemv.rows)), constant(1), constant(1)}, ctx);
        c.decodeWorkgroup = {gemv.workgroup, 1, 1};
        return c;
      })
      .Case<AddOp, MulOp, SiLUOp, GELUOp>([&](Operation *e) {
        int64_t n = rowWidth(e->getResult(0));
        return choice(ctx, e->getName().stripDialect(), kElementwiseGroup,
                      constant(ceilDiv(n, kElementwiseGroup)), tokens);
      })
      .Case<RoPEOp>([&](RoPEOp r) { return rowKernel("rope", r.getResult()); })
      .Case<KVAppendOp>([&](KVAppendOp a) { return rowKernel("kv_append", a.getKeys()); })
      .Case<ArgmaxOp>([&](ArgmaxOp a) {
        return choice(ctx, "argmax", kArgmaxWorkgroup, constant(argmaxGroups(rowWidth(a.getLogits()))),
                      constant(1));
      })
      .Case<AttentionOp>([&](AttentionOp attn) {
        KernelChoice c = choice(ctx, "attention", kAttentionWorkgroup, constant(attn.getNumHeads()),
                                tokens.ceilDiv(kAttentionQueryTile));
        if (profile.cooperativeMatrix && fitsCoopAttention(attn.getHeadDim()) && modelHasHalfWeights(attn)) {
          c = choice(ctx, kCoopAttentionKernel, 32 * kCoopAttentionWarps, constant(attn.getNumHeads()),
                     tokens.ceilDiv(kCoopAttentionQueryTile));
          c.grid = AffineMap::get(0, 1,
                                  {c.grid.getResult(0), c.grid.getResult(1),
                                   constant(coopAttentionKeySplits(attn.getNumHeads()))},
                                  ctx);
        }
        auto cache = SymbolTable::lookupNearestSymbolFrom<KVCacheOp>(attn, attn.getCacheAttr());
        const bool halfCache = cache && cache.deviceElementType().isF16();
        DecodeAttentionShape d =
            decodeAttentionShape(attn.getNumHeads(), attn.getNumKvHeads(), attn.getHeadDim(), halfCache,
                                 maxSequence, profile.decodeAttention);
        c.decodeGrid = AffineMap::get(
            0, 1, {constant(attn.getNumKvHeads() * d.headGroups), constant(d.splits), constant(1)}, ctx);
        c.decodeWorkgroup = {d.workgroup, 1, 1};
        return c;
      })
      .Default([](Operation *) { return std::nullopt; });
}
