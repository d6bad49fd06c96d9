// Dispatch formation: every computation becomes one gerbil.dispatch, i.e. one kernel launch; the grouping
// passes' dispatches get their prefill launch where the target runs a group as one (groupPrefillKernel).
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILFORMDISPATCHES
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

struct FormDispatchesPass : mlir::gerbil::impl::GerbilFormDispatchesBase<FormDispatchesPass> {
  using GerbilFormDispatchesBase::GerbilFormDispatchesBase;

  void runOnOperation() override {
    profile_ = parseTarget(target);
    if (!profile_) {
      getOperation().emitError() << "unknown target profile '" << target << "'";
      return signalPassFailure();
    }
    SmallVector<Operation *> computations;
    getOperation().walk([&](Operation *op) {
      if (op->getParentOfType<DispatchOp>() || isa<DispatchOp>(op)) return;
      if (chooseKernel(op, *profile_, maxSequence)) computations.push_back(op);
    });
    for (Operation *op : computations)
      if (failed(wrap(op))) return signalPassFailure();
    // The grouping passes' dispatches: decode in the target's gemv workgroups where it names them, prefill
    // as one launch where the target allows it (else the group's grid is its decode grid).
    getOperation().walk([&](DispatchOp group) {
      if (std::optional<KernelChoice> decode = groupDecodeKernel(group, *profile_)) {
        group.setGrid(decode->grid);
        group.setWorkgroup(decode->workgroup);
        group.setDecodeGridAttr(AffineMapAttr::get(*decode->decodeGrid));
        group.setDecodeWorkgroup(decode->decodeWorkgroup);
      }
      if (std::optional<KernelChoice> prefill = groupPrefillKernel(group, *profile_)) {
        group.setKernel(prefill->kernel);
        group.setGrid(prefill->grid);
        group.setWorkgroup(prefill->workgroup);
      }
    });
  }

  LogicalResult wrap(Operation *op) {
    std::optional<KernelChoice> kernel = chooseKernel(op, *profile_, maxSequence);
    OpBuilder builder(op);
    auto dispatch = builder.create<DispatchOp>(op->getLoc(), op->getResultTypes(), op->getOperands(),
                                               kernel->kernel, kernel->grid, kernel->workgroup);
    if (kernel->decodeGrid) {
      dispatch.setDecodeGridAttr(AffineMapAttr::get(*kernel->decodeGrid));
      dispatch.setDecodeWorkgroup(kernel->decodeWorkgroup);
    }
    Block &body = dispatch.getBody().front();
    IRMapping mapping;
    mapping.map(op->getOperands(), body.getArguments());
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    Operation *clone = inner.clone(*op, mapping);
    inner.create<YieldOp>(op->getLoc(), clone->getResults());
    op->replaceAllUsesWith(dispatch.getResults());
    op->erase();
    return success();
  }

  std::optional<TargetProfile> profile_;
};

} // namespace
