// Weight prefetch: a decode attention launch leaves the memory system idle, so it loads the weights of the
// projections after it into the L2 (attention_decode.glsl's prefetch workgroups), where they read faster.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILPREFETCHWEIGHTS
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

// The prefetch bindings attention_decode.glsl has.
constexpr size_t kMaxPrefetchedWeights = 4;
constexpr int64_t kPrefetchGranule = 16; // the kernel loads 16 bytes at a time

struct Matrix {
  FlatSymbolRefAttr name;
  int64_t bytes;
};

// The weight matrices a dispatch reads (its operands that are weight_refs of rank-2 weights), with their
// bytes on the device.
SmallVector<Matrix> matricesOf(DispatchOp dispatch) {
  SmallVector<Matrix> matrices;
  for (Value operand : dispatch.getOperands()) {
    auto ref = operand.getDefiningOp<WeightRefOp>();
    if (!ref) continue;
    auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(dispatch, ref.getNameAttr());
    if (!weight) continue;
    auto type = llvm::cast<RankedTensorType>(weight.getType());
    if (type.getRank() != 2) continue;
    Type element = weight.getDeviceDtype() ? *weight.getDeviceDtype() : type.getElementType();
    int64_t bytes = type.getNumElements() * ((element.getIntOrFloatBitWidth() + 7) / 8);
    if (llvm::none_of(matrices, [&](const Matrix &m) { return m.name == ref.getNameAttr(); }))
      matrices.push_back({ref.getNameAttr(), bytes});
  }
  return matrices;
}

int64_t roundDown(int64_t bytes) {
  return bytes / kPrefetchGranule * kPrefetchGranule;
}

// Prefill's kernel may be the tensor-core one; decode's is attention_decode.glsl either way.
bool isDecodeAttention(DispatchOp dispatch) {
  StringRef kernel = dispatch.getKernel();
  return (kernel == "attention" || kernel == kCoopAttentionKernel) && dispatch.getDecodeGrid().has_value();
}

struct PrefetchWeightsPass : mlir::gerbil::impl::GerbilPrefetchWeightsBase<PrefetchWeightsPass> {
  using GerbilPrefetchWeightsBase::GerbilPrefetchWeightsBase;

  void runOnOperation() override {
    if (bytes < 0) {
      getOperation().emitError() << "gerbil-prefetch-weights: bytes must not be negative, got "
                                 << static_cast<int64_t>(bytes);
      return signalPassFailure();
    }
    if (bytes == 0) return;
    SmallVector<DispatchOp> dispatches(getOperation().getOps<DispatchOp>());
    for (size_t i = 0; i < dispatches.size(); ++i)
      if (isDecodeAttention(dispatches[i]))
        prefetchAfter(dispatches[i], ArrayRef(dispatches).drop_front(i + 1));
  }

  void prefetchAfter(DispatchOp host, ArrayRef<DispatchOp> after) {
    SmallVector<Attribute> names;
    SmallVector<int64_t> sizes;
    int64_t left = roundDown(static_cast<int64_t>(bytes));
    for (DispatchOp next : after) {
      if (isDecodeAttention(next) || left < kPrefetchGranule) break;
      SmallVector<Matrix> matrices = matricesOf(next);
      if (matrices.empty()) continue;
      if (names.size() + matrices.size() > kMaxPrefetchedWeights) break;
      int64_t total = 0;
      for (const Matrix &m : matrices) total += m.bytes;
      // What does not all fit is shared out equally: a grouped projection's workgroups read the same rows
      // of each of its matrices.
      const int64_t share = total <= left ? 0 : roundDown(left / static_cast<int64_t>(matrices.size()));
      if (total > left && share == 0) break;
      for (const Matrix &m : matrices) {
        int64_t taken = share ? std::min(roundDown(m.bytes), share) : roundDown(m.bytes);
        if (taken == 0) continue;
        names.push_back(m.name);
        sizes.push_back(taken);
        left -= taken;
      }
      if (share) break;
    }
    if (names.empty()) return;
    OpBuilder builder(host);
    host.setPrefetchWeightsAttr(builder.getArrayAttr(names));
    host.setPrefetchBytesAttr(builder.getDenseI64ArrayAttr(sizes));
  }
};

} // namespace
