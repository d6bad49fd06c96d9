#include "gerbil/Passes/KernelCatalog.h"

#include "gerbil/Dialect/GerbilDialect.h"

#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::gerbil;

namespace {

int64_t rowWidth(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1); }

KernelChoice choice(MLIRContext *ctx, StringRef kernel, int64_t wg, AffineExpr x, AffineExpr y) {
  AffineExpr one = getAffineConstantExpr(1, ctx);
  return {kernel.str(), {wg, 1, 1}, AffineMap::get(0, 1, {x, y, one}, ctx), std::nullopt};
}

} // namespace

GemvShape mlir::gerbil::gemvShape(int64_t k, int64_t n, bool pairedRows) {
  GemvShape shape;
  shape.pairedRows = pairedRows;
  shape.workgroup = k >= 4096 ? 256 : k >= 2048 ? 128 : 64;
  // At least ~512 workgroups where N allows; at most 16 dot products (registers) per invocation.
  shape.rows = n >= 512 * 16 ? 16 : n >= 512 * 8 ? 8 : n >= 512 * 4 ? 4 : 2;
  if (pairedRows) shape.rows = std::min<int64_t>(shape.rows, 8);
  int64_t tiles = (k + kGemvMaxXTile - 1) / kGemvMaxXTile;
  shape.xTile = std::min(k, ((k + tiles - 1) / tiles + 7) / 8 * 8);
  return shape;
}

std::optional<KernelChoice> mlir::gerbil::chooseKernel(Operation *op) {
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
        KernelChoice c = choice(ctx, isa<LinearOp>(mm) ? "linear" : "matmul", 64, constant(ceilDiv(n, kMatMulRows)),
                                tokens.ceilDiv(kMatMulTokens));
        GemvShape gemv = gemvShape(k, n, false);
        c.decodeGrid = AffineMap::get(0, 1, {constant(ceilDiv(n, gemv.rows)), constant(1), constant(1)}, ctx);
        c.decodeWorkgroup = {gemv.workgroup, 1, 1};
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
        return choice(ctx, "attention", 64, constant(attn.getNumHeads()), tokens);
      })
      .Default([](Operation *) { return std::nullopt; });
}
