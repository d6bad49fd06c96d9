// Which kernel family runs each graph op, with its workgroup size and grid. Dispatch formation records
// these choices in the IR and codegen writes the kernel that matches them, so both read this one table.
#pragma once

#include "gerbil/Passes/KernelShapes.h"
#include "gerbil/Passes/TargetProfile.h"

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Operation.h"

#include "gerbil/Dialect/GerbilDialect.h"

#include <array>
#include <optional>
#include <string>

namespace mlir::gerbil {

struct KernelChoice {
  std::string kernel;                  // family name: "matmul", "rms_norm", ...
  std::array<int64_t, 3> workgroup;    // local size
  AffineMap grid;                      // ()[T] -> (x, y, z)
  std::optional<AffineMap> decodeGrid; // the grid of a one-token variant decode runs, if the family has one
  std::array<int64_t, 3> decodeWorkgroup = {0, 0, 0}; // and its workgroup size
};

// The grouped projections (gerbil-group-qkv, gerbil-group-gate-up): one gemv.glsl launch in decode over
// all the group's weights. q/k/v: ceil(N / rows) workgroups for each of q, k and v (rotary pairs stay in one
// workgroup). gate/up: ceil(N / outputs) workgroups. `workgroup`: gemvShape's least workgroup (0: its own).
inline constexpr const char *kQKVKernel = "linear_qkv";
inline constexpr const char *kGateUpKernel = "linear_gate_up";
KernelChoice qkvKernel(MLIRContext *ctx, int64_t k, int64_t nq, int64_t nk, int64_t nv,
                       int64_t workgroup = 0);
KernelChoice gateUpKernel(MLIRContext *ctx, int64_t k, int64_t n, int64_t workgroup = 0);
// A grouped projection's decode launch (kQKVKernel, kGateUpKernel) in the profile's gemv workgroups, where
// it names them (TargetProfile::decodeGemvWorkgroup); std::nullopt otherwise, or for other dispatches. The
// grouping passes choose without a target; dispatch formation applies the target's.
std::optional<KernelChoice> groupDecodeKernel(DispatchOp group, const TargetProfile &profile);
// The logits projection with the greedy argmax (gerbil-fuse-logits-argmax): one gemv.glsl launch in decode
// that writes the logits and picks the token (gemvArgmaxGrid's workgroups); prefill runs both ops.
inline constexpr const char *kLogitsArgmaxKernel = "linear_argmax";
KernelChoice logitsArgmaxKernel(MLIRContext *ctx, int64_t k, int64_t n);

// Prefill of a grouped projection dispatch (kQKVKernel or kGateUpKernel) where the target has cooperative
// matrices and the group's weights are f16 or bf16 with K a multiple of 8: one launch over all of its
// weights (matmul_coop.glsl's MODE_QKV / MODE_GATE_UP), kernel family "<group>_coop", that shares the staged
// input between them; the group's RoPE and KV-cache write still run after it, op by op. std::nullopt:
// prefill runs every op of the group on its own.
inline constexpr const char *kCoopSuffix = "_coop";
// The family of prefill attention on cooperative matrices (attention_prefill_coop.glsl).
inline constexpr const char *kCoopAttentionKernel = "attention_coop";
// Its tiling is groupPrefillTiling (TargetProfile.h); a gate/up launch also needs subgroup blocks of whole
// gate/up fragment pairs.
std::optional<KernelChoice> groupPrefillKernel(DispatchOp group, const TargetProfile &profile);

// Whether a matmul of reduction width k may run on cooperative matrices under `profile` (matmul_coop.glsl
// loads 16 bytes of weights at a time); it also needs f16 or bf16 weights on the device.
bool usesCoopMatMul(const TargetProfile &profile, int64_t k);

// A value of a dispatch body as its dispatch sees it: a block argument of the body is the dispatch's operand;
// any other value is itself.
Value outsideDispatch(Value v);
// The weight_ref a linear's RMSNorm prologue reads its weight from (outside any dispatch); null where the
// linear has no norm or the weight is not a weight_ref.
WeightRefOp normWeightOf(LinearOp linear);
// A weight's element type on the device: the layout pass's device dtype, else the checkpoint's.
Type deviceElementType(WeightOp weight);
// The device element type of the weight that `v` is (a weight_ref, or a dispatch body's argument bound to
// one), looked up from `from`; null where `v` is no weight.
Type weightDeviceType(Value v, Operation *from);
// Whether a device element type is a 16-bit float (f16, or bf16 where the layout pass kept it); false for
// null.
bool isHalfType(Type dtype);

// std::nullopt for ops that are not computations (weight_ref, func.return). `profile` chooses among the
// kernel families of a target (the tensor-core matmul of `nvidia`); `maxSequence`, the KV cache's positions
// where known (0: not), cuts the decode attention's splits to what the cache holds, as codegen does.
std::optional<KernelChoice>
chooseKernel(Operation *op, const TargetProfile &profile = targetProfiles().front(), int64_t maxSequence = 0);

} // namespace mlir::gerbil
