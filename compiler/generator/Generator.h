// Builds the gerbil dialect module of a model: one func.func @forward(input_ids, start_pos) -> logits, its
// weights as gerbil.weight symbols and one gerbil.kv_cache per layer.
#pragma once

#include "compiler/frontend/ModelDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace gerbil {

// Loads the dialects the generated module uses into `context`.
void loadGerbilDialects(mlir::MLIRContext &context);

// Throws FrontendError if the description lacks a weight its structure needs.
mlir::OwningOpRef<mlir::ModuleOp> generateModule(mlir::MLIRContext &context, const ModelDescription &model);

} // namespace gerbil
