// Norm-weight folding: a matrix read only by projections that normalise their input with the same RMSNorm
// weight g gets `scale_columns_by = @g`; the runtime stores W · diag(g) and the kernels leave g out.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "llvm/ADT/StringMap.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILFOLDNORMWEIGHTS
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

// The symbol of the norm weight that `use` normalises with, where the use is a gerbil.linear's matrix
// operand with a norm prologue (the norm read outside any dispatch through a weight_ref); else null.
StringAttr normOfMatrixUse(OpOperand &use) {
  auto linear = dyn_cast<LinearOp>(use.getOwner());
  if (!linear || use.get() != linear.getWeight()) return {};
  WeightRefOp ref = normWeightOf(linear);
  return ref ? ref.getNameAttr().getAttr() : StringAttr();
}

// Every use of `value` that is not passing it into a dispatch: a dispatch's operand stands for the block
// argument of its body.
void forEachReader(Value value, llvm::function_ref<void(OpOperand &)> fn) {
  for (OpOperand &use : value.getUses()) {
    if (auto dispatch = dyn_cast<DispatchOp>(use.getOwner()))
      forEachReader(dispatch.getBody().front().getArgument(use.getOperandNumber()), fn);
    else
      fn(use);
  }
}

struct FoldNormWeightsPass : mlir::gerbil::impl::GerbilFoldNormWeightsBase<FoldNormWeightsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Per matrix: the norm all of its readers normalise with, or null once one reader does not.
    llvm::StringMap<StringAttr> normOf;
    module.walk([&](WeightRefOp ref) {
      auto [entry, first] = normOf.try_emplace(ref.getName());
      forEachReader(ref.getResult(), [&, &entry = entry, &first = first](OpOperand &use) {
        StringAttr norm = normOfMatrixUse(use);
        if (first)
          entry->second = norm, first = false;
        else if (entry->second != norm)
          entry->second = {};
      });
    });
    SymbolTable symbols(module);
    for (auto weight : module.getOps<WeightOp>()) {
      auto found = normOf.find(weight.getSymName());
      if (found == normOf.end() || !found->second) continue;
      auto norm = symbols.lookup<WeightOp>(found->second);
      auto type = llvm::cast<RankedTensorType>(weight.getType());
      auto normType = norm ? llvm::dyn_cast<RankedTensorType>(norm.getType()) : RankedTensorType();
      // Only a whole-row norm (not a per-head one) of the matrix's row length.
      if (!normType || type.getRank() != 2 || normType.getRank() != 1 ||
          normType.getDimSize(0) != type.getDimSize(1))
        continue;
      weight.setScaleColumnsByAttr(FlatSymbolRefAttr::get(found->second));
    }
  }
};

} // namespace
