#include "gerbil/Passes/Passes.h"
#include "gerbil/Passes/TargetProfile.h"

void mlir::gerbil::buildGerbilPipeline(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createGerbilVerifyModel());
  // Verification runs first, on the graph as generated; fusion rewrites it before dispatch formation.
  pm.addPass(createGerbilAssignLayout(GerbilAssignLayoutOptions{options.weightDtype, options.kvDtype}));
  if (options.fuse) {
    pm.addNestedPass<func::FuncOp>(createGerbilFuseNormPrologue());
    pm.addNestedPass<func::FuncOp>(createGerbilFuseResidual());
    pm.addNestedPass<func::FuncOp>(createGerbilGroupQKV());
    pm.addNestedPass<func::FuncOp>(createGerbilFuseRopeKVWrite());
    if (options.fuseEmbedding) pm.addNestedPass<func::FuncOp>(createGerbilFuseEmbedding());
    pm.addNestedPass<func::FuncOp>(createGerbilGroupGateUp());
    if (options.fuseLogitsArgmax) pm.addNestedPass<func::FuncOp>(createGerbilFuseLogitsArgmax());
    pm.addPass(createGerbilFoldNormWeights());
  }
  pm.addNestedPass<func::FuncOp>(
      createGerbilFormDispatches(GerbilFormDispatchesOptions{options.target, options.maxSequence}));
  std::optional<TargetProfile> profile = parseTarget(options.target);
  auto chosen = [&](int64_t given, int64_t TargetProfile::*field) {
    return given >= 0 ? given : profile ? (*profile).*field : 0;
  };
  // A budget or stride given on the command line applies to every launch and model; the profile's only
  // where it pays.
  auto threshold = [&](int64_t given, int64_t TargetProfile::*field) {
    return given >= 0 || !profile ? 0 : (*profile).*field;
  };
  GerbilPrefetchWeightsOptions prefetch;
  prefetch.bytes = chosen(options.prefetchBytes, &TargetProfile::decodePrefetchBytes);
  prefetch.pageBytes = chosen(options.prefetchPageBytes, &TargetProfile::decodePrefetchPageBytes);
  prefetch.maxLaunchBytes = threshold(options.prefetchBytes, &TargetProfile::decodePrefetchMaxLaunchBytes);
  prefetch.minModelBytes = threshold(options.prefetchPageBytes, &TargetProfile::decodePrefetchMinModelBytes);
  // A budget given applies to large models too.
  prefetch.largeModelBudget = threshold(options.prefetchBytes, &TargetProfile::decodeLargeModelPrefetchBytes);
  prefetch.largeModelBytes = profile ? profile->decodePrefetchMinModelBytes : 0;
  prefetch.spreadPages = options.spreadPages;
  pm.addNestedPass<func::FuncOp>(createGerbilPrefetchWeights(prefetch));
  pm.addNestedPass<func::FuncOp>(createGerbilPlanMemory(GerbilPlanMemoryOptions{options.maxTokens, 256}));
  pm.addPass(createGerbilVerifyModel(GerbilVerifyModelOptions{true}));
}
