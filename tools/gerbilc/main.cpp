// gerbilc: compiles a HuggingFace config.json into a gerbil plan.
#include "compiler/driver/Driver.h"
#include "tools/CliHelpers.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"gerbilc: ahead-of-time compiler of transformer language models.\n"
               "Turns a HuggingFace config.json into a plan of SPIR-V kernels for gerbil-exec."};
  gerbil::CompileOptions options;
  bool list = false, stats = false, json = false;
  app.add_option("config", options.configPath, "The model's config.json");
  app.add_option("-o,--output", options.outputPath, "Output file (the plan, or the MLIR with --emit=mlir*)");
  app.add_option(
         "--emit", options.emit,
         "What to write: plan, mlir (after generation), mlir-opt (after the passes), glsl (the kernels)")
      ->check(CLI::IsMember({"plan", "mlir", "mlir-opt", "glsl"}));
  app.add_option("--dtype", options.weightDtype, "Device dtype of the weight matrices")
      ->check(CLI::IsMember({"f32", "f16"}));
  app.add_option("--kv-dtype", options.kvDtype,
                 "What the KV cache holds: f32, f16 (half the memory; attention computes in f32), or auto "
                 "(the default: f16 with --dtype f16 on a tensor-core target such as nvidia, else f32)")
      ->check(CLI::IsMember({"f32", "f16", "auto"}));
  app.add_option(
      "--kernel-define", options.kernelDefines,
      "Developers: a #define for the kernels of a family, [FAMILY:]NAME[=VALUE] (FAMILY: a template's "
      "name, e.g. attention_decode; none: every kernel), to time a variant in a model (repeatable)");
  app.add_option("--max-seq", options.maxSequence,
                 "KV cache length (default: min(max_position_embeddings, 2048))")
      ->check(gerbil::cli::number(1, false, 2147483647));
  app.add_option("--prefill-chunk", options.prefillChunk, "Most tokens one step processes (default: 256)")
      ->check(gerbil::cli::number(1, false, 2147483647));
  app.add_option(
      "--target", options.target,
      "Kernel target profile: generic (every Vulkan device), nvidia (tensor cores through "
      "VK_KHR_cooperative_matrix, subgroup size 32, decode tuned on the H200; nvidia:TxNxK:WTxWN sets its "
      "matmul tiling, nvidia@gate-up=TxNxK:WTxWN the gate/up projections' alone, "
      "nvidia@qkv=TxNxK:WTxWN[:S[:P]] "
      "the q/k/v projections' (P: split over K); they may be combined), "
      "nvidia-nv (the same "
      "through VK_NV_cooperative_matrix, for drivers without the KHR "
      "extension), khr (the tensor-core kernels for any device with 16x16x16 f16 fragments and subgroups of "
      "32; khr:TxNxK:WTxWN) or auto (the profile of the local GPU)");
  bool noSubgroupOps = false;
  app.add_flag(
      "--no-subgroup-ops", noSubgroupOps,
      "Reduce through shared memory only, for devices without subgroup arithmetic in compute shaders");
  app.add_flag("--fuse-embedding", options.fuseEmbedding,
               "Decode's first q/k/v projection reads the token's row of the embedding table itself instead "
               "of an embedding launch before it (one launch a token fewer, no faster on the H200 so far)");
  app.add_flag("--fuse-logits-argmax", options.fuseLogitsArgmax,
               "Pick decode's greedy token in the LM head's gemv instead of a launch of its own (one launch "
               "fewer, but slower on the H200 so far: docs/decode-latency.md)");
  app.add_option(
         "--prefetch-bytes", options.prefetchBytes,
         "Weight bytes each decode attention launch loads into the L2 cache for the projections after "
         "it (default: the target's, for the launches where it pays, and for models of 4 GiB or more on "
         "nvidia 8 MiB in a launch beside it; given, for all launches and models; 0: none)")
      ->check(gerbil::cli::number(0, false, 1073741824.0));
  app.add_option(
         "--prefetch-page-bytes", options.prefetchPageBytes,
         "With it, one word this many bytes apart of the rest of those weights, to cache their address "
         "translations (a multiple of 16; default: the target's; 0: none)")
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            // Pages are at least 4 KiB: finer reads cost page walks for nothing (and grow the grid).
            long long bytes = 0;
            if (!CLI::detail::lexical_cast(text, bytes) ||
                (bytes != 0 && (bytes < 4096 || bytes > (1ll << 30))))
              return "must be 0 or from 4096 to 1073741824, not " + text;
            return bytes % 16 == 0 ? "" : "must be a multiple of 16, not " + text;
          },
          ""));
  app.add_flag("--spread-pages", options.spreadPages,
               "The page words in every decode projection, for the launch after it, instead of all in the "
               "attention (where the target or --prefetch-page-bytes reads them; slower on the H200 so far)");
  app.add_flag(
      "--prefetch-beside", options.prefetchBeside,
      "Each decode attention's prefetch (--prefetch-bytes, --prefetch-page-bytes) as a launch of its "
      "own beside it, with no barrier between them, instead of as extra workgroups of the attention "
      "(the target's large-model prefetch is always beside it)");
  app.add_flag("--buffer-addresses", options.bufferAddresses,
               "Kernels reach their buffers through device addresses in push constants instead of "
               "descriptor sets (needs bufferDeviceAddress; slower on the H200 so far, but binds past "
               "maxStorageBufferRange)");
  app.add_option("--arch-specs", options.archSpecDir, "A folder of extra architecture specs (YAML)");
  app.add_flag("--list-architectures", list, "Print the supported architectures and exit");
  app.add_flag("--stats", stats, "Print dispatches per step and buffer sizes after compiling");
  app.add_flag("--json", json, "Print the --stats summary as one JSON object (for scripts)");
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbilc"))
    return *exitCode;
  options.subgroupOps = !noSubgroupOps;
  if (list) return gerbil::listArchitectures(options.archSpecDir, std::cout, std::cerr);
  if (options.configPath.empty()) {
    std::cerr << "gerbilc: error: no config.json given (see --help)\n";
    return gerbil::kExitUsage;
  }
  if (options.emit == "plan" && options.outputPath.empty()) {
    std::cerr << "gerbilc: error: no output file: use -o MODEL.plan\n";
    return gerbil::kExitUsage;
  }
  gerbil::CompileSummary summary;
  int code = gerbil::compileModel(options, std::cout, std::cerr, &summary);
  if (code == 0 && json && options.emit == "plan") {
    nlohmann::json out = {{"plan", options.outputPath},
                          {"architecture", summary.architecture},
                          {"target", summary.target},
                          {"dispatches_per_token", summary.dispatchesPerStep},
                          {"prefill_dispatches_per_step", summary.prefillDispatches},
                          {"kernels", summary.kernels},
                          {"decode_weight_bytes_per_token", summary.decodeWeightBytes},
                          {"decode_activation_bytes_per_token", summary.decodeActivationBytes},
                          {"decode_kv_bytes_per_position", summary.decodeKVBytesPerPosition},
                          {"weight_bytes", summary.weightBytes},
                          {"arena_bytes", summary.arenaBytes},
                          {"kv_cache_bytes", summary.kvCacheBytes},
                          {"kv_cache_dtype", summary.kvCacheDtype},
                          {"plan_bytes", summary.planBytes}};
    std::cout << out.dump() << std::endl;
  } else if (code == 0 && stats && options.emit == "plan") {
    auto mib = [](uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
    std::printf("architecture       %s\n", summary.architecture.c_str());
    std::printf("dispatches/token   %lld (prefill: %lld per step)\n",
                static_cast<long long>(summary.dispatchesPerStep),
                static_cast<long long>(summary.prefillDispatches));
    std::printf("bytes/token        %.1f MiB of weights, %.1f KiB of activations, %.1f KiB of KV cache per "
                "position of context\n",
                mib(summary.decodeWeightBytes), static_cast<double>(summary.decodeActivationBytes) / 1024.0,
                static_cast<double>(summary.decodeKVBytesPerPosition) / 1024.0);
    std::printf("distinct kernels   %lld\n", static_cast<long long>(summary.kernels));
    std::printf("weights            %.1f MiB on the device\n", mib(summary.weightBytes));
    std::printf("activation arena   %.1f MiB\n", mib(summary.arenaBytes));
    std::printf("kv cache           %.1f MiB of %s\n", mib(summary.kvCacheBytes),
                summary.kvCacheDtype.c_str());
    std::printf("plan file          %.1f MiB\n", mib(summary.planBytes));
  }
  return code;
}
