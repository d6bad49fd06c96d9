#include "gerbil/Passes/Passes.h"

void mlir::gerbil::buildGerbilPipeline(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createGerbilVerifyModel());
  // Verification runs first, on the graph as generated; fusion rewrites it before dispatch formation.
  pm.addPass(createGerbilAssignLayout(GerbilAssignLayoutOptions{options.weightDtype}));
  if (options.fuse) {
    pm.addNestedPass<func::FuncOp>(createGerbilFuseNormPrologue());
    pm.addNestedPass<func::FuncOp>(createGerbilFuseResidual());
    pm.addNestedPass<func::FuncOp>(createGerbilGroupQKV());
    pm.addNestedPass<func::FuncOp>(createGerbilFuseRopeKVWrite());
    pm.addNestedPass<func::FuncOp>(createGerbilGroupGateUp());
    if (options.fuseLogitsArgmax) pm.addNestedPass<func::FuncOp>(createGerbilFuseLogitsArgmax());
    pm.addPass(createGerbilFoldNormWeights());
  }
  pm.addNestedPass<func::FuncOp>(createGerbilFormDispatches(GerbilFormDispatchesOptions{options.target}));
  pm.addNestedPass<func::FuncOp>(createGerbilPlanMemory(GerbilPlanMemoryOptions{options.maxTokens, 256}));
  pm.addPass(createGerbilVerifyModel(GerbilVerifyModelOptions{true}));
}
