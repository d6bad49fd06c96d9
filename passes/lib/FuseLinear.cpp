// Fusion into gerbil.linear, the matmul kernel with a prologue and an epilogue:
//   gerbil-fuse-norm-prologue: an RMSNorm over whole rows whose every user is a matmul disappears; each
//     matmul normalises its own input rows (the reduction is tiny next to reading the weights).
//   gerbil-fuse-residual: add(h, matmul(x)) where the add is the matmul's only user becomes one linear
//     with h as its residual.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILFUSENORMPROLOGUE
#define GEN_PASS_DEF_GERBILFUSERESIDUAL
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

struct FuseNormProloguePass : mlir::gerbil::impl::GerbilFuseNormPrologueBase<FuseNormProloguePass> {
  void runOnOperation() override {
    SmallVector<RMSNormOp> norms;
    getOperation().walk([&](RMSNormOp norm) { norms.push_back(norm); });
    for (RMSNormOp norm : norms) {
      auto row = llvm::cast<RankedTensorType>(norm.getInput().getType()).getDimSize(1);
      bool wholeRow = norm.getWeight().getType().getDimSize(0) == row;
      bool onlyMatmuls = !norm->use_empty() && llvm::all_of(norm->getUsers(), [&](Operation *user) {
        auto mm = dyn_cast<MatMulOp>(user);
        return mm && mm.getInput() == norm.getResult();
      });
      if (!wholeRow || !onlyMatmuls) continue;
      for (Operation *user : llvm::make_early_inc_range(norm->getUsers())) {
        auto mm = cast<MatMulOp>(user);
        OpBuilder b(mm);
        auto linear = b.create<LinearOp>(mm.getLoc(), mm.getType(), norm.getInput(), mm.getWeight(), norm.getWeight(),
                                         Value(), norm.getEpsAttr());
        mm.replaceAllUsesWith(linear.getResult());
        mm.erase();
      }
      norm.erase();
    }
  }
};

struct FuseResidualPass : mlir::gerbil::impl::GerbilFuseResidualBase<FuseResidualPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      if (add.getLhs().getType() != add.getRhs().getType()) continue;  // a bias, not a residual
      for (int side = 0; side < 2; ++side) {
        Value product = side == 0 ? add.getRhs() : add.getLhs(), residual = side == 0 ? add.getLhs() : add.getRhs();
        Operation *producer = product.getDefiningOp();
        if (!producer || !product.hasOneUse() || !isa<MatMulOp, LinearOp>(producer)) continue;
        if (auto linear = dyn_cast<LinearOp>(producer); linear && linear.getResidual()) continue;
        OpBuilder b(add);
        LinearOp fused;
        if (auto mm = dyn_cast<MatMulOp>(producer))
          fused = b.create<LinearOp>(add.getLoc(), add.getType(), mm.getInput(), mm.getWeight(), Value(), residual,
                                     FloatAttr());
        else {
          auto linear = cast<LinearOp>(producer);
          fused = b.create<LinearOp>(add.getLoc(), add.getType(), linear.getInput(), linear.getWeight(),
                                     linear.getNorm(), residual, linear.getEpsAttr());
        }
        // The fused op takes the projection's name, so profiles still show which matmul it is.
        fused->setLoc(producer->getLoc());
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        producer->erase();
        break;
      }
    }
  }
};

} // namespace
