// Model-level verification: what no single op's verifier can see.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILVERIFYMODEL
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

struct VerifyModelPass : mlir::gerbil::impl::GerbilVerifyModelBase<VerifyModelPass> {
  using GerbilVerifyModelBase::GerbilVerifyModelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError() << "the model has no func.func @forward";
      return signalPassFailure();
    }
    if (failed(verifySignature(forward)) || failed(verifyStateUse(module, forward)) ||
        (dispatched && failed(verifyDispatched(forward))))
      return signalPassFailure();
  }

  LogicalResult verifySignature(func::FuncOp f) {
    FunctionType type = f.getFunctionType();
    auto ids = type.getNumInputs() == 2 ? llvm::dyn_cast<RankedTensorType>(type.getInput(0)) : nullptr;
    bool idsOk = ids && ids.getRank() == 1 && ids.isDynamicDim(0) && ids.getElementType().isInteger(32);
    bool posOk = type.getNumInputs() == 2 && type.getInput(1).isIndex();
    unsigned results = type.getNumResults();
    auto logits = results >= 1 ? llvm::dyn_cast<RankedTensorType>(type.getResult(0)) : nullptr;
    bool logitsOk = logits && logits.getRank() == 2 && logits.isDynamicDim(0) && !logits.isDynamicDim(1) &&
                    logits.getElementType().isF32();
    auto token = results == 2 ? llvm::dyn_cast<RankedTensorType>(type.getResult(1)) : nullptr;
    bool tokenOk = results == 1 || (token && token.getShape() == ArrayRef<int64_t>{1} &&
                                    token.getElementType().isInteger(32));
    if (!idsOk || !posOk || !logitsOk || !tokenOk || results > 2)
      return f.emitError() << "@forward must be (tensor<?xi32>, index) -> (tensor<?xVxf32>[, tensor<1xi32>]), got "
                           << type;
    return success();
  }

  LogicalResult verifyStateUse(ModuleOp module, func::FuncOp f) {
    llvm::StringSet<> usedWeights, appended, attended;
    WalkResult walk = f.walk([&](Operation *op) -> WalkResult {
      if (auto ref = dyn_cast<WeightRefOp>(op)) usedWeights.insert(ref.getName());
      if (auto append = dyn_cast<KVAppendOp>(op)) appended.insert(append.getCache());
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        if (!appended.contains(attention.getCache()))
          return attention.emitOpError() << "attends over " << attention.getCacheAttr()
                                         << " before any gerbil.kv_append writes it";
        attended.insert(attention.getCache());
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted()) return failure();
    for (auto weight : module.getOps<WeightOp>())
      if (!usedWeights.contains(weight.getSymName()))
        return weight.emitOpError() << "is never used by @forward";
    for (auto cache : module.getOps<KVCacheOp>())
      if (!attended.contains(cache.getSymName())) return cache.emitOpError() << "is never attended over";
    return success();
  }

  LogicalResult verifyDispatched(func::FuncOp f) {
    for (Operation &op : f.getBody().front()) {
      if (isa<DispatchOp, WeightRefOp, func::ReturnOp>(op)) continue;
      return op.emitOpError() << "is outside any gerbil.dispatch after dispatch formation";
    }
    return success();
  }
};

} // namespace
