// gerbil-exec: runs a gerbil plan on a Vulkan device with the model's safetensors weights: token ids in and
// out (--prompt-ids), text in and out (--prompt, --prompt-file) or a chat (--chat).
#include "tools/CliHelpers.h"
#include "tools/gerbil-exec/Modes.h"

#include "runtime/chat/ChatTemplate.h"
#include "runtime/exec/Executor.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/vulkan/Device.h"

#include <iostream>

int main(int argc, char **argv) {
  using namespace gerbil::tool;
  CLI::App app{"gerbil-exec: runs a gerbil plan (from gerbilc) on a Vulkan GPU."};
  Options options;
  addOptions(app, options);
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbil-exec"))
    return *exitCode;

  try {
    if (options.listDevices) return listDevices(options.json);
    if (options.deviceInfo) return deviceInfo(options.device, options.json);
    if (options.plan.empty()) {
      std::cerr << "gerbil-exec: error: no plan given (see --help)\n";
      return kUsage;
    }
    if (options.planInfo) return planInfo(options.plan, options.json);
    if (std::string problem = checkOptions(app, options); !problem.empty()) {
      std::cerr << "gerbil-exec: error: " << problem << "\n";
      return kUsage;
    }
    auto started = Clock::now();
    int code = kOk;
    if (!options.promptIds.empty() || app.count("--prompt-ids"))
      code = runIds(options, started);
    else if (options.chat)
      code = runChat(options, started);
    else
      code = runPrompt(options, started);
    // With GERBIL_VK_VALIDATION=1 (the test suite), a run the validation layer objected to fails with exit
    // code 4 even though its output may look right. Checked after the model is gone, so leaks count too.
    gerbil::vk::throwIfValidationFailed();
    return code;
  } catch (const std::exception &e) {
    using gerbil::cli::ErrorTypes;
    namespace g = gerbil;
    return gerbil::cli::reportError(
        "gerbil-exec", e,
        ErrorTypes<g::plan::PlanError, g::weights::WeightError, g::exec::RuntimeError,
                   g::tokenizer::TokenizerError, g::chat::ChatTemplateError>{},
        ErrorTypes<g::vk::VulkanError>{});
  }
}
