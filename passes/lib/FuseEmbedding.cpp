// gerbil-fuse-embedding: the token embedding joins the first grouped q/k/v projection, whose decode gemv
// reads the token's row of the table as its input (one launch a token fewer).
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILFUSEEMBEDDING
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

struct FuseEmbeddingPass : mlir::gerbil::impl::GerbilFuseEmbeddingBase<FuseEmbeddingPass> {
  void runOnOperation() override {
    SmallVector<EmbeddingOp> embeddings;
    getOperation().walk([&](EmbeddingOp e) {
      if (!e->getParentOfType<DispatchOp>()) embeddings.push_back(e);
    });
    for (EmbeddingOp embedding : embeddings) fuse(embedding);
  }

  // Whether the decode gemv can take the table's rows as its input: f32 rows, or f16 rows beside f16 or bf16
  // matrices (8 halves to each 16-byte load of weights).
  static bool readableInput(EmbeddingOp embedding, DispatchOp group) {
    Type table = weightDeviceType(embedding.getTable(), embedding);
    if (table && table.isF32()) return true;
    for (Operation &op : group.getBody().front())
      if (isa<MatMulOp, LinearOp>(op)) {
        return table && table.isF16() && isHalfType(weightDeviceType(op.getOperand(1), group));
      }
    return false;
  }

  // The q/k/v group whose input is the embedding's rows, where every other reader of the rows comes after it
  // (they will read the group's new result).
  static DispatchOp readingGroup(EmbeddingOp embedding) {
    DispatchOp group;
    for (OpOperand &use : embedding->getUses())
      if (auto d = dyn_cast<DispatchOp>(use.getOwner());
          d && d.getKernel() == kQKVKernel && d.getDecodeGrid() && use.getOperandNumber() == 0)
        group = d;
    if (!group) return {};
    for (Operation *user : embedding->getUsers())
      if (user != group && !group->isBeforeInBlock(user)) return {};
    return group;
  }

  void fuse(EmbeddingOp embedding) {
    DispatchOp group = readingGroup(embedding);
    if (!group || !readableInput(embedding, group)) return;
    // Operands: the ids in place of the rows, the table last; results: the group's, then the rows.
    SmallVector<Value> operands(group.getOperands());
    operands[0] = embedding.getIds();
    operands.push_back(embedding.getTable());
    SmallVector<Type> types(group.getResultTypes());
    types.push_back(embedding.getType());
    OpBuilder b(group);
    auto fused = b.create<DispatchOp>(group.getLoc(), types, operands, group.getKernel(), group.getGrid(),
                                      group.getWorkgroup());
    fused.setDecodeGridAttr(group.getDecodeGridAttr());
    fused.setDecodeWorkgroupAttr(group.getDecodeWorkgroupAttr());

    Block &body = fused.getBody().front(), &old = group.getBody().front();
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    auto rows = inner.create<EmbeddingOp>(embedding.getLoc(), embedding.getType(), body.getArgument(0),
                                          body.getArguments().back());
    IRMapping mapping;
    mapping.map(old.getArgument(0), rows.getResult());
    for (unsigned i = 1; i < old.getNumArguments(); ++i) mapping.map(old.getArgument(i), body.getArgument(i));
    for (Operation &op : old.without_terminator()) inner.clone(op, mapping);
    SmallVector<Value> yields;
    for (Value v : old.getTerminator()->getOperands()) yields.push_back(mapping.lookup(v));
    yields.push_back(rows.getResult());
    inner.create<YieldOp>(group.getLoc(), yields);

    group.replaceAllUsesWith(fused.getResults().drop_back());
    group.erase();
    embedding.getResult().replaceAllUsesWith(fused.getResults().back());
    embedding.erase();
  }
};

} // namespace
