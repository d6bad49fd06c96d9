#include "gerbil/Passes/KernelCatalog.h"

#include "gerbil/Dialect/GerbilDialect.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gerbil;

namespace {

int64_t rowWidth(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1); }

// Whether a matmul's weight is f16 or bf16 on the device (the layout pass has set its device dtype).
bool hasHalfWeights(Operation *mm) {
  auto ref = mm->getOperand(1).getDefiningOp<WeightRefOp>();
  if (!ref) return false;
  auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(mm, ref.getNameAttr());
  if (!weight) return false;
  Type dtype = weight.getDeviceDtype() ? *weight.getDeviceDtype()
                                       : llvm::cast<RankedTensorType>(weight.getType()).getElementType();
  return dtype.isF16() || dtype.isBF16();
}

KernelChoice choice(MLIRContext *ctx, StringRef kernel, int64_t wg, AffineExpr x, AffineExpr y) {
  AffineExpr one = getAffineConstantExpr(1, ctx);
  return {kernel.str(), {wg, 1, 1}, AffineMap::get(0, 1, {x, y, one}, ctx), std::nullopt};
}

} // namespace

bool mlir::gerbil::usesCoopMatMul(const TargetProfile &profile, int64_t k) {
  return profile.cooperativeMatrix && k % kGemvLoad == 0;
}

std::optional<KernelChoice> mlir::gerbil::chooseKernel(Operation *op, const TargetProfile &profile) {
  MLIRContext *ctx = op->getContext();
  AffineExpr tokens = getAffineSymbolExpr(0, ctx);
  auto constant = [&](int64_t c) { return getAffineConstantExpr(c, ctx); };
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };

  return llvm::TypeSwitch<Operation *, std::optional<KernelChoice>>(op)
      .Case<EmbeddingOp>([&](auto) { return choice(ctx, "embedding", 64, tokens, constant(1)); })
      .Case<PositionEmbeddingOp>(
          [&](auto) { return choice(ctx, "position_embedding", 64, tokens, constant(1)); })
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
          CoopMatMulTiling tiling = coopTilingFor(profile, n);
          c = choice(ctx, family + "_coop", tiling.workgroup(), constant(ceilDiv(n, tiling.tileN)),
                     tokens.ceilDiv(tiling.tileT));
        }
        if (k % kGemvLoad == 0)
          c.decodeGrid = AffineMap::get(0, 1, {constant(ceilDiv(n, kGemvRows)), constant(1), constant(1)}, ctx);
        return c;
      })
      .Case<AddOp, MulOp, SiLUOp, GELUOp>([&](Operation *e) {
        int64_t n = rowWidth(e->getResult(0));
        return choice(ctx, e->getName().stripDialect(), kElementwiseGroup,
                      constant(ceilDiv(n, kElementwiseGroup)), tokens);
      })
      .Case<RoPEOp>([&](auto) { return choice(ctx, "rope", 64, tokens, constant(1)); })
      .Case<KVAppendOp>([&](auto) { return choice(ctx, "kv_append", 64, tokens, constant(1)); })
      .Case<ArgmaxOp>([&](auto) { return choice(ctx, "argmax", 256, constant(1), constant(1)); })
      .Case<AttentionOp>([&](AttentionOp attn) {
        KernelChoice c = choice(ctx, "attention", kAttentionWorkgroup, constant(attn.getNumHeads()),
                                tokens.ceilDiv(kAttentionQueryTile));
        c.decodeGrid = AffineMap::get(0, 1, {constant(attn.getNumHeads()), constant(1), constant(1)}, ctx);
        return c;
      })
      .Default([](Operation *) { return std::nullopt; });
}
