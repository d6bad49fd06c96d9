// gerbil-exec: runs a gerbil plan on a Vulkan device with the model's safetensors weights.
#include "runtime/exec/Executor.h"
#include "runtime/exec/Generation.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <unistd.h>
#include <cstring>

namespace {

enum ExitCode : int { kOk = 0, kUsage = 2, kBadInput = 3, kDevice = 4, kIO = 5 };

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<int32_t> parseIds(const std::string &text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    while (used < item.size() && std::isspace(static_cast<unsigned char>(item[used]))) ++used;
    if (item.empty() || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      throw gerbil::exec::RuntimeError("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw gerbil::exec::RuntimeError("--prompt-ids: no token ids given");
  return ids;
}

int listDevices(bool json) {
  auto devices = gerbil::vk::Context::listDevices();
  nlohmann::json list = nlohmann::json::array();
  for (const auto &d : devices) {
    if (!json)
      std::printf("%u: %s (%s, %s, %.1f GiB, subgroup %u)\n", d.index, d.name.c_str(), d.type.c_str(),
                  d.driver.c_str(), static_cast<double>(d.deviceLocalBytes) / (1 << 30), d.subgroupSize);
    list.push_back({{"index", d.index}, {"name", d.name}, {"type", d.type}, {"driver", d.driver},
                    {"device_local_bytes", d.deviceLocalBytes}, {"subgroup_size", d.subgroupSize}});
  }
  if (json) std::cout << list.dump() << "\n";
  return kOk;
}

void writeLogits(const std::string &path, const std::vector<float> &prompt, const std::vector<float> &steps,
                 int64_t vocab) {
  namespace w = gerbil::weights;
  std::vector<w::OwnedTensor> tensors;
  auto tensor = [&](const std::string &name, const std::vector<float> &data) {
    w::OwnedTensor t{name, w::TensorDType::F32, {static_cast<int64_t>(data.size()) / vocab, vocab}, {}};
    t.data.resize(data.size() * sizeof(float));
    std::memcpy(t.data.data(), data.data(), t.data.size());
    tensors.push_back(std::move(t));
  };
  tensor("logits", prompt);
  if (!steps.empty()) tensor("step_logits", steps);
  w::writeSafetensors(path, tensors, {{"producer", "gerbil-exec"}});
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"gerbil-exec: runs a gerbil plan (from gerbilc) on a Vulkan GPU."};
  std::string planPath, weightsDir, promptIds, dumpLogits;
  int64_t maxNewTokens = 16;
  int device = -1;
  bool json = false, listDevicesFlag = false, validation = false, stopAtEos = false;
  gerbil::exec::SamplingOptions sampling;
  app.add_option("plan", planPath, "The plan written by gerbilc");
  app.add_option("--weights", weightsDir, "Folder with model.safetensors (default: the compiled config's folder)");
  app.add_option("--prompt-ids", promptIds, "Prompt token ids, comma separated");
  app.add_option("--max-new-tokens", maxNewTokens, "Tokens to generate after the prompt")->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", sampling.temperature, "Sampling temperature; 0 is greedy")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", sampling.topK, "Sample among the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", sampling.topP, "Sample within cumulative probability p")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", sampling.seed, "Seed of the sampler");
  app.add_flag("--stop-at-eos", stopAtEos, "Stop after an end-of-sequence token (else run all --max-new-tokens)");
  app.add_option("--dump-logits", dumpLogits, "Write the logits (safetensors: logits [T, vocab], step_logits [N, vocab])");
  app.add_option("--device", device, "Vulkan device index (see --list-devices)");
  app.add_flag("--list-devices", listDevicesFlag, "List Vulkan devices and exit");
  app.add_flag("--json", json, "Print one JSON object with the ids and timings on stdout");
  app.add_flag("--validation", validation, "Enable the Vulkan validation layers");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? kOk : kUsage;
  }

  try {
    if (listDevicesFlag) return listDevices(json);
    if (planPath.empty()) {
      std::cerr << "gerbil-exec: error: no plan given (see --help)\n";
      return kUsage;
    }
    if (promptIds.empty()) {
      std::cerr << "gerbil-exec: error: no prompt: use --prompt-ids 1,2,3\n";
      return kUsage;
    }
    std::vector<int32_t> prompt = parseIds(promptIds);
    auto started = Clock::now();
    gerbil::plan::Plan plan = gerbil::plan::readFile(planPath);
    for (int32_t id : prompt)
      if (id < 0 || id >= plan.model.vocabSize)
        throw gerbil::exec::RuntimeError("--prompt-ids: token id " + std::to_string(id) +
                                         " is outside the vocabulary of " + std::to_string(plan.model.vocabSize));
    if (prompt.size() + static_cast<size_t>(maxNewTokens) > plan.limits.maxSequence)
      throw gerbil::exec::RuntimeError("the prompt of " + std::to_string(prompt.size()) + " tokens and " +
                                       std::to_string(maxNewTokens) + " new tokens exceed the plan's --max-seq " +
                                       std::to_string(plan.limits.maxSequence));
    if (weightsDir.empty()) weightsDir = std::filesystem::path(plan.model.configPath).parent_path().string();
    gerbil::weights::Checkpoint checkpoint = gerbil::weights::Checkpoint::open(weightsDir);
    for (const std::string &name : gerbil::exec::checkCheckpoint(plan, checkpoint))
      std::cerr << "gerbil-exec: warning: tensor '" << name << "' of the checkpoint is not used by the plan\n";

    gerbil::vk::ContextOptions contextOptions;
    contextOptions.deviceIndex = device;
    contextOptions.validation = validation;
    gerbil::vk::Context context(contextOptions);
    gerbil::exec::checkDevice(plan, context.info());
    uint64_t needed = gerbil::exec::deviceBytesNeeded(plan);
    if (context.info().deviceLocalBytes && needed > context.info().deviceLocalBytes)
      throw gerbil::exec::RuntimeError("the model needs " + std::to_string(needed >> 20) + " MiB of device memory; " +
                                       context.info().name + " has " +
                                       std::to_string(context.info().deviceLocalBytes >> 20) + " MiB");
    bool interactive = !json && isatty(fileno(stderr));
    auto loadStart = Clock::now();
    gerbil::exec::LoadedWeights weights =
        gerbil::exec::uploadWeights(context, plan, checkpoint, [&](uint64_t done, uint64_t total) {
          if (interactive)
            std::fprintf(stderr, "\rloading weights %5.1f%% (%.1f / %.1f MiB)", 100.0 * done / std::max<uint64_t>(total, 1),
                         done / 1048576.0, total / 1048576.0);
        });
    if (interactive) std::fprintf(stderr, "\n");
    double loadMs = msSince(loadStart);
    gerbil::exec::Executor executor(context, plan, std::move(weights));
    gerbil::exec::GenerationOptions generation;
    generation.maxNewTokens = maxNewTokens;
    generation.sampling = sampling;
    generation.keepLogits = !dumpLogits.empty();
    if (stopAtEos) generation.stopTokenIds = plan.model.eosTokenIds;
    bool first = true;
    if (!json)
      generation.onToken = [&](int32_t token) {
        std::printf("%s%d", first ? "" : ",", token);
        std::fflush(stdout);
        first = false;
        return true;
      };
    gerbil::exec::GenerationResult generated = gerbil::exec::generate(executor, prompt, generation);
    if (!json && !generated.output.empty()) std::printf("\n");
    if (!dumpLogits.empty()) writeLogits(dumpLogits, generated.promptLogits, generated.stepLogits, plan.model.vocabSize);
    double prefillMs = generated.prefillMs, decodeMs = generated.decodeMs;
    const std::vector<int32_t> &output = generated.output;
    double decodeSteps = static_cast<double>(output.size() > 1 ? output.size() - 1 : 0);
    if (json) {
      nlohmann::json result = {
          {"prompt_ids", prompt},
          {"output_ids", output},
          {"device", context.info().name},
          {"stop_reason", generated.stopReason},
          {"timings",
           {{"total_ms", msSince(started)},
            {"load_ms", loadMs},
            {"prefill_ms", prefillMs},
            {"decode_ms", decodeMs},
            {"prefill_tokens_per_s", prompt.size() / (prefillMs / 1000.0)},
            {"decode_tokens_per_s", decodeSteps > 0 ? decodeSteps / (decodeMs / 1000.0) : 0.0}}}};
      std::cout << result.dump() << "\n";
    } else {
      std::fprintf(stderr, "prompt %zu tokens in %.1f ms, %lld new tokens in %.1f ms on %s\n", prompt.size(),
                   prefillMs, static_cast<long long>(output.size()), decodeMs, context.info().name.c_str());
    }
    return kOk;
  } catch (const gerbil::plan::PlanError &e) {
    std::cerr << "gerbil-exec: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const gerbil::weights::WeightError &e) {
    std::cerr << "gerbil-exec: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const gerbil::exec::RuntimeError &e) {
    std::cerr << "gerbil-exec: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const gerbil::vk::VulkanError &e) {
    std::cerr << "gerbil-exec: error: " << e.what() << "\n";
    return kDevice;
  } catch (const std::exception &e) {
    std::cerr << "gerbil-exec: error: " << e.what() << "\n";
    return kIO;
  }
}
