// Weight prefetch: a decode attention launch leaves the memory system idle, so it loads the weights of the
// projections after it into the L2 (attention_decode.glsl's prefetch workgroups), where they read faster,
// and touches their pages so that their address translations are cached; with spread-pages each decode
// gemv touches the next launch's pages instead (gemv.glsl's prefetch workgroups).
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILPREFETCHWEIGHTS
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

// The prefetch bindings attention_decode.glsl has, and how many of them may load data (the rest touch pages).
constexpr size_t kMaxPrefetched = 8, kMaxPrefetchedData = 4;
constexpr int64_t kPrefetchGranule = 16; // the kernel loads 16 bytes at a time

struct Matrix {
  FlatSymbolRefAttr name;
  int64_t bytes;
};

int64_t deviceBytes(WeightOp weight) {
  return llvm::cast<RankedTensorType>(weight.getType()).getNumElements() *
         ((deviceElementType(weight).getIntOrFloatBitWidth() + 7) / 8);
}

// The weight matrices a dispatch reads (its operands that are weight_refs of rank-2 weights), with their
// bytes on the device.
SmallVector<Matrix> matricesOf(DispatchOp dispatch) {
  SmallVector<Matrix> matrices;
  for (Value operand : dispatch.getOperands()) {
    auto ref = operand.getDefiningOp<WeightRefOp>();
    if (!ref) continue;
    auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(dispatch, ref.getNameAttr());
    if (!weight) continue;
    if (llvm::cast<RankedTensorType>(weight.getType()).getRank() != 2) continue;
    int64_t bytes = deviceBytes(weight);
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

// A projection whose decode launch is gemv.glsl (linear, matmul, grouped; tensor-core in prefill or not),
// which can hold prefetch workers; not the logits projection that picks the token (the last launch).
bool isDecodeGemv(DispatchOp dispatch) {
  StringRef kernel = dispatch.getKernel();
  return (kernel.starts_with("linear") || kernel.starts_with("matmul")) && kernel != kLogitsArgmaxKernel &&
         dispatch.getDecodeGrid().has_value();
}

struct PrefetchWeightsPass : mlir::gerbil::impl::GerbilPrefetchWeightsBase<PrefetchWeightsPass> {
  using GerbilPrefetchWeightsBase::GerbilPrefetchWeightsBase;

  void runOnOperation() override {
    if (bytes < 0 || dataLaunches < 0 || pageBytes < 0 || pageBytes % kPrefetchGranule != 0 ||
        maxLaunchBytes < 0 || minModelBytes < 0 || largeModelBytes < 0 || largeModelBudget < 0) {
      getOperation().emitError() << "gerbil-prefetch-weights: bytes, data-launches, max-launch-bytes, "
                                    "min-model-bytes, large-model-bytes and large-model-budget must not be "
                                    "negative and page-bytes must be a multiple of 16, got "
                                 << static_cast<int64_t>(bytes) << ", " << static_cast<int64_t>(dataLaunches)
                                 << ", " << static_cast<int64_t>(maxLaunchBytes) << ", "
                                 << static_cast<int64_t>(minModelBytes) << ", "
                                 << static_cast<int64_t>(largeModelBytes) << ", "
                                 << static_cast<int64_t>(largeModelBudget) << " and "
                                 << static_cast<int64_t>(pageBytes);
      return signalPassFailure();
    }
    const int64_t weightBytes = modelBytes();
    pages_ = pageBytes > 0 && weightBytes >= minModelBytes;
    large_ = largeModelBudget > 0 && weightBytes >= largeModelBytes;
    budget_ = large_ ? largeModelBudget : bytes;
    launchLimit_ = large_ ? 0 : maxLaunchBytes;
    if (budget_ == 0 && !pages_) return;
    SmallVector<DispatchOp> dispatches(getOperation().getOps<DispatchOp>());
    for (size_t i = 0; i < dispatches.size(); ++i) {
      ArrayRef<DispatchOp> after = ArrayRef(dispatches).drop_front(i + 1);
      if (isDecodeAttention(dispatches[i]))
        prefetchAfter(dispatches[i], after);
      else if (pages_ && spreadPages && isDecodeGemv(dispatches[i]))
        touchNextPages(dispatches[i], after);
    }
  }

  // spread-pages: a gemv touches the pages of the next launch that reads matrices, unless an attention
  // comes first (which touches them itself).
  void touchNextPages(DispatchOp host, ArrayRef<DispatchOp> after) {
    SmallVector<SmallVector<Matrix>> lists = readersAfter(after);
    if (lists.empty()) return;
    SmallVector<Attribute> names;
    SmallVector<int64_t> sizes, strides;
    for (const Matrix &m : lists.front()) {
      if (roundDown(m.bytes) == 0 || names.size() == kMaxPrefetched) continue;
      names.push_back(m.name);
      sizes.push_back(roundDown(m.bytes));
      strides.push_back(pageBytes);
    }
    setPrefetch(host, names, sizes, strides);
  }

  static void setPrefetch(DispatchOp host, ArrayRef<Attribute> names, ArrayRef<int64_t> sizes,
                          ArrayRef<int64_t> strides) {
    if (names.empty()) return;
    OpBuilder builder(host);
    host.setPrefetchWeightsAttr(builder.getArrayAttr(names));
    host.setPrefetchBytesAttr(builder.getDenseI64ArrayAttr(sizes));
    host.setPrefetchStridesAttr(builder.getDenseI64ArrayAttr(strides));
  }

  // The device bytes of every weight of the module.
  int64_t modelBytes() {
    int64_t total = 0;
    auto module = getOperation()->getParentOfType<ModuleOp>();
    if (!module) return 0;
    module.walk([&](WeightOp weight) { total += deviceBytes(weight); });
    return total;
  }

  // The matrices of the dispatches `after` an attention, up to the next attention, a list for each dispatch
  // that reads any.
  static SmallVector<SmallVector<Matrix>> readersAfter(ArrayRef<DispatchOp> after) {
    SmallVector<SmallVector<Matrix>> lists;
    for (DispatchOp next : after) {
      if (isDecodeAttention(next)) break;
      SmallVector<Matrix> matrices = matricesOf(next);
      if (!matrices.empty()) lists.push_back(std::move(matrices));
    }
    return lists;
  }

  void prefetchAfter(DispatchOp host, ArrayRef<DispatchOp> after) {
    SmallVector<Attribute> names;
    SmallVector<int64_t> sizes, strides;
    auto add = [&](const Matrix &m, int64_t size, int64_t stride) {
      names.push_back(m.name);
      sizes.push_back(size);
      strides.push_back(stride);
    };
    SmallVector<SmallVector<Matrix>> lists = readersAfter(after);
    // The data: whole matrices while the budget lasts, then a share of it for each matrix of the next.
    llvm::StringMap<int64_t> loaded;
    int64_t left = roundDown(budget_);
    for (ArrayRef<Matrix> matrices : ArrayRef(lists).take_front(dataLaunches)) {
      if (left < kPrefetchGranule || names.size() + matrices.size() > kMaxPrefetchedData) break;
      int64_t total = 0;
      for (const Matrix &m : matrices) total += m.bytes;
      // Mid-sized launches save no more than the attention waits for their bytes.
      if (launchLimit_ > 0 && total > launchLimit_) continue;
      // What does not all fit is shared out equally: a grouped projection's workgroups read the same rows
      // of each of its matrices.
      const int64_t share = total <= left ? 0 : roundDown(left / static_cast<int64_t>(matrices.size()));
      if (total > left && share == 0) break;
      for (const Matrix &m : matrices) {
        int64_t taken = share ? std::min(roundDown(m.bytes), share) : roundDown(m.bytes);
        if (taken == 0) continue;
        add(m, taken, kPrefetchGranule);
        loaded[m.name.getValue()] = taken;
        left -= taken;
      }
      if (share) break;
    }
    // The pages: a word of each page of every matrix not loaded whole, so that the launches after find
    // their address translations cached (with spread-pages, only the next launch's: each gemv touches its
    // successor's).
    if (pages_)
      for (ArrayRef<Matrix> matrices : ArrayRef(lists).take_front(spreadPages ? 1 : lists.size()))
        for (const Matrix &m : matrices) {
          auto found = loaded.find(m.name.getValue());
          if ((found != loaded.end() && found->second == roundDown(m.bytes)) || roundDown(m.bytes) == 0)
            continue;
          if (names.size() == kMaxPrefetched) break;
          add(m, roundDown(m.bytes), pageBytes);
        }
    setPrefetch(host, names, sizes, strides);
    if (large_ && host.getPrefetchWeights()) host.setPrefetchBeside(true);
  }

  bool pages_ = false; // page words are read (page-bytes, and a model of at least min-model-bytes)
  bool large_ = false; // a model of at least large-model-bytes, with a large-model-budget
  int64_t budget_ = 0, launchLimit_ = 0; // the data's bytes and launch limit for this model
};

} // namespace
