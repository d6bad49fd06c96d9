// Layout: the device dtype of every weight, and what the KV caches hold. Matrices take the requested dtype;
// vectors (norm weights, biases) stay f32, being small and precision-sensitive. Every weight is row-major
// [rows, cols] on the device, which the generic kernels read with coalesced loads along a row.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILASSIGNLAYOUT
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

struct AssignLayoutPass : mlir::gerbil::impl::GerbilAssignLayoutBase<AssignLayoutPass> {
  using GerbilAssignLayoutBase::GerbilAssignLayoutBase;

  void runOnOperation() override {
    Builder b(&getContext());
    auto typeNamed = [&](llvm::StringRef option, llvm::StringRef name) -> Type {
      if (name == "f32") return b.getF32Type();
      if (name == "f16") return b.getF16Type();
      getOperation().emitError() << "gerbil-assign-layout: " << option << " must be f32 or f16, got '" << name
                                 << "'";
      return {};
    };
    Type matrixType = typeNamed("dtype", dtype), cacheType = typeNamed("kv-dtype", kvDtype);
    if (!matrixType || !cacheType) return signalPassFailure();
    for (auto cache : getOperation().getOps<KVCacheOp>()) cache.setElementTypeAttr(TypeAttr::get(cacheType));
    for (auto weight : getOperation().getOps<WeightOp>()) {
      auto type = llvm::cast<RankedTensorType>(weight.getType());
      // 16-bit weights are read two per 32-bit word, so their rows must have an even length.
      bool matrix = type.getRank() == 2 && type.getDimSize(1) % 2 == 0;
      weight.setDeviceDtypeAttr(TypeAttr::get(matrix ? matrixType : b.getF32Type()));
    }
  }
};

} // namespace
