// The gerbil pass pipeline: verification, layout, dispatch formation, memory planning.
#ifndef GERBIL_PASSES_TD
#define GERBIL_PASSES_TD

include "mlir/Pass/PassBase.td"

def GerbilVerifyModel : Pass<"gerbil-verify-model", "::mlir::ModuleOp"> {
  let summary = "Checks model-level invariants the op verifiers cannot see";
  let description = [{
    One `func.func @forward(tensor<?xi32>, index) -> tensor<?xVxf32>`; every weight and KV cache used;
    each cache appended to before it is attended over; with `dispatched`, no computation left outside a
    `gerbil.dispatch`.
  }];
  let options = [
    Option<"dispatched", "dispatched", "bool", "false",
           "Also require every computation to be inside a gerbil.dispatch">
  ];
}

def GerbilAssignLayout : Pass<"gerbil-assign-layout", "::mlir::ModuleOp"> {
  let summary = "Chooses the device dtype and layout of every weight";
  let description = [{
    Sets `device_dtype` on each `gerbil.weight`: the element type the runtime converts the checkpoint
    tensor to at load. Norm weights and biases stay f32 (they are small and precision-sensitive); matrices
    take the requested dtype.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"f32\"", "Device dtype of weight matrices: f32 or f16">
  ];
}

def GerbilFuseNormPrologue : Pass<"gerbil-fuse-norm-prologue", "::mlir::func::FuncOp"> {
  let summary = "Fuses an RMSNorm into the prologue of the matmuls that read it";
  let description = [{
    An RMSNorm over whole rows whose every user is a gerbil.matmul is removed; each matmul becomes a
    gerbil.linear with the norm's weight and eps, normalising its input rows itself.
  }];
}

def GerbilFuseResidual : Pass<"gerbil-fuse-residual", "::mlir::func::FuncOp"> {
  let summary = "Fuses a residual add into the epilogue of the projection it adds";
  let description = [{
    add(h, p) where p is a gerbil.matmul or gerbil.linear used only by the add becomes one gerbil.linear
    with h as its residual.
  }];
}

def GerbilFormDispatches : Pass<"gerbil-form-dispatches", "::mlir::func::FuncOp"> {
  let summary = "Wraps every computation into a gerbil.dispatch: one kernel launch each";
  let description = [{
    Each compute op becomes a `gerbil.dispatch` whose body holds the op, with the kernel family, the
    workgroup size and the grid as an affine map of the token count T chosen by the kernel catalog.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"generic\"",
           "Target profile (generic, nvidia): which kernel families the catalog chooses">
  ];
}

def GerbilPlanMemory : Pass<"gerbil-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Places every activation in one arena, sharing space by liveness";
  let description = [{
    Each dispatch result gets an offset in the activation arena, sized for `max-tokens` rows; values whose
    live ranges do not overlap share bytes. Sets `arena_offsets` on each dispatch and
    `gerbil.arena_bytes` / `gerbil.max_tokens` on the function.
  }];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", "512", "Most tokens one step processes (the prefill chunk)">,
    Option<"alignment", "alignment", "int64_t", "256", "Byte alignment of every activation">
  ];
}

#endif // GERBIL_PASSES_TD
