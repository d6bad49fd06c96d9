// Memory planning: all activations share one arena. Each dispatch result is live from its dispatch to its
// last use; a best-fit allocator over those ranges lets values that are never live together share bytes.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILPLANMEMORY
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

// Free space of the arena as [offset, size) blocks, merged on release.
class ArenaAllocator {
public:
  explicit ArenaAllocator(int64_t alignment) : alignment_(alignment) {}

  int64_t allocate(int64_t bytes) {
    bytes = align(bytes);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes && (best == free_.end() || it->second < best->second)) best = it;
    if (best == free_.end()) {
      // Grow the arena; a free block at its end is extended rather than wasted.
      int64_t offset = end_;
      if (!free_.empty() && std::prev(free_.end())->first + std::prev(free_.end())->second == end_) {
        offset = std::prev(free_.end())->first;
        free_.erase(std::prev(free_.end()));
      }
      end_ = offset + bytes;
      return offset;
    }
    int64_t offset = best->first, remaining = best->second - bytes;
    free_.erase(best);
    if (remaining > 0) free_[offset + bytes] = remaining;
    return offset;
  }

  void release(int64_t offset, int64_t bytes) {
    bytes = align(bytes);
    auto [it, inserted] = free_.emplace(offset, bytes);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  int64_t size() const { return end_; }

private:
  int64_t align(int64_t v) const { return (v + alignment_ - 1) / alignment_ * alignment_; }
  int64_t alignment_;
  int64_t end_ = 0;
  std::map<int64_t, int64_t> free_;
};

int64_t elementBytes(Type t) { return t.isF16() || t.isBF16() ? 2 : 4; }

struct PlanMemoryPass : mlir::gerbil::impl::GerbilPlanMemoryBase<PlanMemoryPass> {
  using GerbilPlanMemoryBase::GerbilPlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (maxTokens <= 0 || alignment <= 0) {
      func.emitError() << "max-tokens and alignment must be positive";
      return signalPassFailure();
    }
    SmallVector<DispatchOp> dispatches(func.getOps<DispatchOp>());
    llvm::DenseMap<Operation *, size_t> order;
    for (auto [i, d] : llvm::enumerate(dispatches)) order[d] = i;

    // The step after which each value is dead; values reaching func.return live to the end.
    llvm::DenseMap<Value, size_t> lastUse;
    for (DispatchOp d : dispatches)
      for (Value result : d.getResults()) {
        size_t last = order[d];
        for (Operation *user : result.getUsers()) {
          if (isa<func::ReturnOp>(user)) last = dispatches.size();
          else if (auto it = order.find(user); it != order.end()) last = std::max(last, it->second);
        }
        lastUse[result] = last;
      }

    ArenaAllocator arena(alignment);
    std::multimap<size_t, std::pair<int64_t, int64_t>> releases;  // step -> (offset, bytes)
    llvm::DenseMap<Value, int64_t> offsets;
    for (auto [step, d] : llvm::enumerate(dispatches)) {
      // Operands must stay valid while the kernel runs, so release only after the step that last reads them.
      SmallVector<int64_t> resultOffsets;
      for (Value result : d.getResults()) {
        FailureOr<int64_t> bytes = valueBytes(d, result);
        if (failed(bytes)) return signalPassFailure();
        int64_t offset = arena.allocate(*bytes);
        resultOffsets.push_back(offset);
        if (lastUse[result] < dispatches.size()) releases.emplace(lastUse[result], std::make_pair(offset, *bytes));
      }
      d.setArenaOffsetsAttr(DenseI64ArrayAttr::get(&getContext(), resultOffsets));
      // A fusion group runs op by op in prefill: the values its body passes between them live during this
      // step only, beside its operands and results.
      SmallVector<int64_t> internalOffsets;
      for (Value value : internalValues(d)) {
        FailureOr<int64_t> bytes = valueBytes(d, value);
        if (failed(bytes)) return signalPassFailure();
        internalOffsets.push_back(arena.allocate(*bytes));
        releases.emplace(step, std::make_pair(internalOffsets.back(), *bytes));
      }
      if (!internalOffsets.empty())
        d.setInternalOffsetsAttr(DenseI64ArrayAttr::get(&getContext(), internalOffsets));
      auto [begin, end] = releases.equal_range(step);
      for (auto it = begin; it != end; ++it) arena.release(it->second.first, it->second.second);
      releases.erase(begin, end);
    }
    Builder b(&getContext());
    func->setAttr("gerbil.arena_bytes", b.getI64IntegerAttr(std::max<int64_t>(arena.size(), alignment)));
    func->setAttr("gerbil.max_tokens", b.getI64IntegerAttr(maxTokens));
  }

  // Results of the body's ops that the yield does not return, in body order.
  static SmallVector<Value> internalValues(DispatchOp d) {
    SmallVector<Value> values;
    Block &body = d.getBody().front();
    for (Operation &op : body.without_terminator())
      for (Value r : op.getResults())
        if (!llvm::is_contained(body.getTerminator()->getOperands(), r)) values.push_back(r);
    return values;
  }

  FailureOr<int64_t> valueBytes(DispatchOp d, Value v) {
    auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
    if (!type) return d.emitOpError() << "result " << v.getType() << " is not a ranked tensor";
    int64_t bytes = elementBytes(type.getElementType());
    for (int64_t dim : type.getShape()) bytes *= ShapedType::isDynamic(dim) ? int64_t(maxTokens) : dim;
    return bytes;
  }
};

} // namespace
