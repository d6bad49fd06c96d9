// Grouped projections: projections that read the same input become one dispatch, a fusion group whose
// body holds the ops it replaces. Decode runs the group as one kernel (gemv.glsl reads every weight of the
// group in one launch and applies the epilogue); prefill runs the body op by op.
//   gerbil-group-qkv: the q, k and v projections of one attention (with their bias adds).
//   gerbil-fuse-rope-kv-write: RoPE of q and k and the KV-cache write move into that group.
//   gerbil-group-gate-up: gate and up of a gated MLP with act(gate) * up.
//   gerbil-fuse-logits-argmax: the logits projection with the greedy argmax of its logits.
#include "gerbil/Dialect/GerbilDialect.h"
#include "gerbil/Passes/KernelCatalog.h"
#include "gerbil/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::gerbil {
#define GEN_PASS_DEF_GERBILGROUPQKV
#define GEN_PASS_DEF_GERBILFUSEROPEKVWRITE
#define GEN_PASS_DEF_GERBILGROUPGATEUP
#define GEN_PASS_DEF_GERBILFUSELOGITSARGMAX
#include "gerbil/Passes/Passes.h.inc"
} // namespace mlir::gerbil

using namespace mlir;
using namespace mlir::gerbil;

namespace {

int64_t rowWidth(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1);
}

bool isBiasAdd(Operation *op) {
  auto add = dyn_cast_or_null<AddOp>(op);
  return add && llvm::cast<RankedTensorType>(add.getRhs().getType()).getRank() == 1;
}

// A projection that can join a group: a matmul, or a linear without a residual epilogue.
bool isGroupable(Operation *op) {
  if (isa_and_nonnull<MatMulOp>(op)) return true;
  auto linear = dyn_cast_or_null<LinearOp>(op);
  return linear && !linear.getResidual();
}

// Projections of one group must read the same input through the same norm prologue.
bool sameInput(Operation *a, Operation *b) {
  auto normOf = [](Operation *op) {
    auto linear = dyn_cast<LinearOp>(op);
    return linear ? std::make_pair(linear.getNorm(), linear.getEpsAttr())
                  : std::make_pair(Value(), FloatAttr());
  };
  return a->getOperand(0) == b->getOperand(0) && normOf(a) == normOf(b);
}

// The projection a value comes from through bias adds, RMSNorms and RoPE (how the attention's queries, keys
// and values are traced back to their projections), or null.
Operation *projectionBehind(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (isGroupable(op)) return op;
    if (isBiasAdd(op))
      v = op->getOperand(0);
    else if (auto rope = dyn_cast<RoPEOp>(op))
      v = rope.getInput();
    else if (auto norm = dyn_cast<RMSNormOp>(op))
      v = norm.getInput();
    else
      return nullptr;
  }
  return nullptr;
}

// A projection with the bias add that is its only user, if any: the ops that join the group, and the value
// the group yields for it.
struct Member {
  SmallVector<Operation *, 2> ops;
  Value head;
};

Member memberFrom(Operation *projection) {
  Member m{{projection}, projection->getResult(0)};
  Value result = projection->getResult(0);
  if (result.hasOneUse() && isBiasAdd(*result.getUsers().begin()) &&
      result.getUsers().begin()->getOperand(0) == result) {
    m.ops.push_back(*result.getUsers().begin());
    m.head = m.ops.back()->getResult(0);
  }
  return m;
}

// The member whose head is `head` (a projection, or the bias add of one), or nothing.
std::optional<Member> memberEndingAt(Value head) {
  Operation *op = head.getDefiningOp();
  if (isGroupable(op)) return Member{{op}, head};
  if (isBiasAdd(op) && isGroupable(op->getOperand(0).getDefiningOp()) && op->getOperand(0).hasOneUse())
    return Member{{op->getOperand(0).getDefiningOp(), op}, head};
  return std::nullopt;
}

// The name of the group's location: the first projection's, with `from` replaced by `to`
// ("layers.0.attn.q_proj" -> "layers.0.attn.qkv_proj"), so that profiles name the group.
Location groupLocation(Operation *first, StringRef from, StringRef to) {
  auto name = llvm::dyn_cast<NameLoc>(first->getLoc());
  if (!name) return first->getLoc();
  StringRef text = name.getName().getValue();
  std::string renamed = text.ends_with(from) ? text.drop_back(from.size()).str() : (text + ".").str();
  renamed.append(to.begin(), to.end());
  return NameLoc::get(StringAttr::get(first->getContext(), renamed));
}

void setChoice(DispatchOp dispatch, const KernelChoice &choice) {
  dispatch.setDecodeGridAttr(AffineMapAttr::get(*choice.decodeGrid));
  dispatch.setDecodeWorkgroup(choice.decodeWorkgroup);
}

// Replaces `ops` (all in one block; each after the ops of the group it reads) by a dispatch at the place
// of the earliest, whose body holds them in the given order and yields `heads`. Fails, changing nothing, when
// another value of the group is used outside it or an operand is defined after the first op by anything but a
// weight_ref (which is moved up).
FailureOr<DispatchOp> makeGroup(ArrayRef<Operation *> ops, ArrayRef<Value> heads, const KernelChoice &choice,
                                Location loc) {
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  llvm::SetVector<Value> operands;
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!members.contains(v.getDefiningOp())) operands.insert(v);
    for (Value r : op->getResults())
      if (!llvm::is_contained(heads, r) &&
          llvm::any_of(r.getUsers(), [&](Operation *user) { return !members.contains(user); }))
        return failure();
  }
  Operation *first = ops.front();
  for (Operation *op : ops)
    if (op->isBeforeInBlock(first)) first = op;
  SmallVector<Operation *> toMove;
  for (Value v : operands)
    if (Operation *def = v.getDefiningOp(); def && first->isBeforeInBlock(def)) {
      if (!isa<WeightRefOp>(def)) return failure();
      toMove.push_back(def);
    }
  for (Operation *def : toMove) def->moveBefore(first);

  OpBuilder b(first);
  SmallVector<Type> types;
  for (Value h : heads) types.push_back(h.getType());
  auto dispatch = b.create<DispatchOp>(loc, types, operands.getArrayRef(), choice.kernel, choice.grid,
                                       ArrayRef<int64_t>(choice.workgroup));
  setChoice(dispatch, choice);
  Block &body = dispatch.getBody().front();
  IRMapping mapping;
  mapping.map(operands.getArrayRef(), body.getArguments());
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  for (Operation *op : ops) inner.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value h : heads) yielded.push_back(mapping.lookup(h));
  inner.create<YieldOp>(loc, yielded);
  for (auto [h, r] : llvm::zip(heads, dispatch.getResults())) Value(h).replaceAllUsesWith(r);
  for (Operation *op : llvm::reverse(ops)) op->erase();
  return dispatch;
}

struct GroupQKVPass : mlir::gerbil::impl::GerbilGroupQKVBase<GroupQKVPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp attention : attentions) {
      KVAppendOp append;
      for (Operation *op = attention->getPrevNode(); op && !append; op = op->getPrevNode())
        if (auto a = dyn_cast<KVAppendOp>(op); a && a.getCacheAttr() == attention.getCacheAttr()) append = a;
      if (!append) continue;
      Operation *q = projectionBehind(attention.getQueries()), *k = projectionBehind(append.getKeys()),
                *v = projectionBehind(append.getValues());
      if (!q || !k || !v || q == k || k == v || q == v || !sameInput(q, k) || !sameInput(q, v)) continue;
      SmallVector<Operation *> ops;
      SmallVector<Value> heads;
      for (Operation *projection : {q, k, v}) {
        Member m = memberFrom(projection);
        ops.append(m.ops.begin(), m.ops.end());
        heads.push_back(m.head);
      }
      KernelChoice choice = qkvKernel(&getContext(), rowWidth(q->getOperand(0)), rowWidth(q->getResult(0)),
                                      rowWidth(k->getResult(0)), rowWidth(v->getResult(0)));
      (void)makeGroup(ops, heads, choice, groupLocation(q, "q_proj", "qkv_proj"));
    }
  }
};

bool sameRotation(RoPEOp a, RoPEOp b) {
  return a.getStartPos() == b.getStartPos() && a.getHeadDim() == b.getHeadDim() &&
         a.getRotaryDim() == b.getRotaryDim() && a.getInvFreq() == b.getInvFreq() &&
         a.getAttentionScalingAttr() == b.getAttentionScalingAttr();
}

struct FuseRopeKVWritePass : mlir::gerbil::impl::GerbilFuseRopeKVWriteBase<FuseRopeKVWritePass> {
  void runOnOperation() override {
    SmallVector<DispatchOp> groups;
    getOperation().walk([&](DispatchOp d) {
      if (d.getKernel() == kQKVKernel && d.getNumResults() == 3) groups.push_back(d);
    });
    for (DispatchOp group : groups) fuse(group);
  }

  void fuse(DispatchOp group) {
    Value q = group.getResult(0), k = group.getResult(1), v = group.getResult(2);
    if (!v.hasOneUse() || !k.hasOneUse()) return;
    auto append = dyn_cast<KVAppendOp>(*v.getUsers().begin());
    if (!append || append.getValues() != v) return;
    RoPEOp ropeK = append.getKeys().getDefiningOp<RoPEOp>(), ropeQ;
    if (ropeK) {
      if (ropeK.getInput() != k || !ropeK->hasOneUse() || !q.hasOneUse()) return;
      ropeQ = dyn_cast<RoPEOp>(*q.getUsers().begin());
      if (!ropeQ || !sameRotation(ropeQ, ropeK) || ropeK.getStartPos() != append.getStartPos()) return;
    } else if (append.getKeys() != k) {
      return;
    }
    // The group takes the kv_append's place; what reads the (rotated) q must come after it.
    Value head = ropeQ ? ropeQ.getResult() : q;
    if (llvm::any_of(head.getUsers(), [&](Operation *user) { return user->isBeforeInBlock(append); })) return;

    SmallVector<Value> operands(group.getOperands());
    if (!llvm::is_contained(operands, append.getStartPos())) operands.push_back(append.getStartPos());
    OpBuilder b(append);
    auto fused = b.create<DispatchOp>(group.getLoc(), TypeRange{head.getType()}, operands, group.getKernel(),
                                      group.getGrid(), group.getWorkgroup());
    fused.setDecodeGridAttr(group.getDecodeGridAttr());
    fused.setDecodeWorkgroupAttr(group.getDecodeWorkgroupAttr());
    Block &body = fused.getBody().front(), &old = group.getBody().front();
    IRMapping mapping;
    for (auto [value, arg] : llvm::zip(operands, body.getArguments())) mapping.map(value, arg);
    mapping.map(old.getArguments(), body.getArguments().take_front(old.getNumArguments()));
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    for (Operation &op : old.without_terminator()) inner.clone(op, mapping);
    auto yield = cast<YieldOp>(old.getTerminator());
    for (auto [result, value] : llvm::zip(group.getResults(), yield.getValues()))
      mapping.map(result, mapping.lookup(value));
    if (ropeQ) {
      inner.clone(*ropeQ, mapping);
      inner.clone(*ropeK, mapping);
    }
    inner.clone(*append, mapping);
    inner.create<YieldOp>(group.getLoc(), ValueRange{mapping.lookup(head)});
    head.replaceAllUsesWith(fused.getResult(0));
    append.erase();
    if (ropeQ) {
      ropeK.erase();
      ropeQ.erase();
    }
    group.erase();
  }
};

struct GroupGateUpPass : mlir::gerbil::impl::GerbilGroupGateUpBase<GroupGateUpPass> {
  void runOnOperation() override {
    SmallVector<MulOp> products;
    getOperation().walk([&](MulOp m) { products.push_back(m); });
    for (MulOp mul : products)
      for (int side = 0; side < 2; ++side)
        if (succeeded(group(mul, mul->getOperand(side), mul->getOperand(1 - side)))) break;
  }

  LogicalResult group(MulOp mul, Value activated, Value upHead) {
    Operation *act = activated.getDefiningOp();
    if (!isa_and_nonnull<SiLUOp, GELUOp>(act) || !activated.hasOneUse() || !upHead.hasOneUse())
      return failure();
    Value gateHead = act->getOperand(0);
    if (!gateHead.hasOneUse()) return failure();
    std::optional<Member> gate = memberEndingAt(gateHead), up = memberEndingAt(upHead);
    if (!gate || !up || !sameInput(gate->ops.front(), up->ops.front())) return failure();
    SmallVector<Operation *> ops(gate->ops.begin(), gate->ops.end());
    ops.append(up->ops.begin(), up->ops.end());
    ops.append({act, mul});
    Operation *projection = gate->ops.front();
    KernelChoice choice =
        gateUpKernel(&getContext(), rowWidth(projection->getOperand(0)), rowWidth(projection->getResult(0)));
    return makeGroup(ops, {mul.getResult()}, choice, groupLocation(projection, "gate_proj", "gate_up_proj"));
  }
};

struct FuseLogitsArgmaxPass : mlir::gerbil::impl::GerbilFuseLogitsArgmaxBase<FuseLogitsArgmaxPass> {
  void runOnOperation() override {
    SmallVector<ArgmaxOp> argmaxes;
    getOperation().walk([&](ArgmaxOp a) { argmaxes.push_back(a); });
    for (ArgmaxOp argmax : argmaxes) {
      Operation *projection = argmax.getLogits().getDefiningOp();
      if (!isGroupable(projection) || argmax->getParentOfType<DispatchOp>()) continue;
      KernelChoice choice = logitsArgmaxKernel(&getContext(), rowWidth(projection->getOperand(0)),
                                               rowWidth(projection->getResult(0)));
      // The logits stay a result of the group: @forward returns them beside the token.
      (void)makeGroup({projection, argmax}, {projection->getResult(0), argmax.getResult()}, choice,
                      projection->getLoc());
    }
  }
};

} // namespace
