#include "gerbil/Passes/Passes.h"
#include "gerbil/Passes/TargetProfile.h"

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
  std::optional<TargetProfile> profile = parseTarget(options.target);
  auto chosen = [&](int64_t given, int64_t TargetProfile::*field) {
    return given >= 0 ? given : profile ? (*profile).*field : 0;
  };
  pm.addNestedPass<func::FuncOp>(createGerbilPrefetchWeights(GerbilPrefetchWeightsOptions{
      chosen(options.prefetchBytes, &TargetProfile::decodePrefetchBytes),
      chosen(options.prefetchPageBytes, &TargetProfile::decodePrefetchPageBytes)}));
  pm.addNestedPass<func::FuncOp>(createGerbilPlanMemory(GerbilPlanMemoryOptions{options.maxTokens, 256}));
  pm.addPass(createGerbilVerifyModel(GerbilVerifyModelOptions{true}));
}
