#include "gerbil/Passes/Passes.h"

void mlir::gerbil::buildGerbilPipeline(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createGerbilVerifyModel());
  pm.addPass(createGerbilAssignLayout(GerbilAssignLayoutOptions{options.weightDtype}));
  pm.addNestedPass<func::FuncOp>(createGerbilFormDispatches());
  pm.addNestedPass<func::FuncOp>(createGerbilPlanMemory(GerbilPlanMemoryOptions{options.maxTokens, 256}));
  pm.addPass(createGerbilVerifyModel(GerbilVerifyModelOptions{true}));
}
