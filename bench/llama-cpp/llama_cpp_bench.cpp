// Times llama.cpp (its Vulkan backend, as released) on a GGUF model the way gerbil-bench times gerbil: a
// 512-token prompt in one step, and 128 decode steps after a 128-token prompt, at batch 1 with every layer
// on the GPU. Built by bench/llama-cpp/fetch.sh against the release's headers and shared libraries; run by
// bench/device.sh beside gerbil-bench on the same shapes (weights from gguf_random.py).
//
// Decode is timed as llama-bench's tg does it (each step one token, the next token fed without reading
// the logits) and, as a generation loop runs it, with the greedy token read from the step's logits on the
// host (llama.cpp's samplers run there). Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

#ifndef LLAMA_CPP_RELEASE
#define LLAMA_CPP_RELEASE "(release not named)"
#endif

namespace {

struct Options {
  std::string model;
  std::string libs;
  int context = 1024;
  int prefillTokens = 512;
  int decodePrompt = 128;
  int decodeTokens = 128;
  int reps = 3;
  bool verbose = false;
};

const char *kUsage =
    "usage: llama-cpp-bench MODEL.gguf --libs DIR [--ctx N] [--prefill N] [--decode-prompt N] [--decode N]\n"
    "                       [--reps N] [--verbose]\n"
    "Times llama.cpp on MODEL.gguf (all layers on the GPU): prefill of --prefill tokens (default 512) in one\n"
    "step, and --decode steps (128) after a --decode-prompt prompt (128); prints JSON. --libs: the folder of\n"
    "the release's shared libraries (its ggml backends are loaded from there).\n";

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "llama-cpp-bench: %s\n", message.c_str());
  std::exit(1);
}

int positiveNumber(const char *flag, const char *text) {
  char *end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value <= 0 || value > 1 << 20) fail(std::string(flag) + ": not a positive count: " + text);
  return static_cast<int>(value);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--verbose") {
      o.verbose = true;
      continue;
    }
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) fail(arg + " needs a value");
      const char *value = argv[++i];
      if (arg == "--libs") o.libs = value;
      else if (arg == "--ctx") o.context = positiveNumber("--ctx", value);
      else if (arg == "--prefill") o.prefillTokens = positiveNumber("--prefill", value);
      else if (arg == "--decode-prompt") o.decodePrompt = positiveNumber("--decode-prompt", value);
      else if (arg == "--decode") o.decodeTokens = positiveNumber("--decode", value);
      else if (arg == "--reps") o.reps = positiveNumber("--reps", value);
      else fail("unknown option " + arg + " (see --help)");
      continue;
    }
    if (!o.model.empty()) fail("one model only: " + o.model + " and " + arg);
    o.model = arg;
  }
  if (o.model.empty()) fail(std::string("no model given\n") + kUsage);
  if (o.libs.empty()) fail("--libs DIR is needed (the release's shared libraries)");
  if (o.prefillTokens > o.context || o.decodePrompt + o.decodeTokens + 1 > o.context)
    fail("the prompts and decode steps must fit --ctx " + std::to_string(o.context));
  return o;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class Bench {
public:
  Bench(llama_context *context, int vocab) : context_(context), vocab_(vocab), random_(1234) {}

  // Decodes `count` random tokens after what the cache holds, in one step; only the last one's logits are
  // output.
  void step(int count) {
    std::vector<llama_token> tokens(count);
    for (llama_token &t : tokens) t = nextRandom();
    decode(tokens.data(), count);
  }

  void clear() { llama_memory_clear(llama_get_memory(context_), true); }

  double prefillSeconds(int tokens) {
    clear();
    const auto start = std::chrono::steady_clock::now();
    step(tokens);
    return secondsSince(start);
  }

  // Seconds for `tokens` one-token steps after a `prompt`-token step; greedy: each step's token is the
  // argmax of the last step's logits, read on the host.
  double decodeSeconds(int prompt, int tokens, bool greedy) {
    clear();
    step(prompt);
    llama_token token = nextRandom();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < tokens; ++i) {
      decode(&token, 1);
      if (greedy) {
        const float *logits = llama_get_logits_ith(context_, -1);
        token = static_cast<llama_token>(std::max_element(logits, logits + vocab_) - logits);
      } else {
        token = nextRandom();
      }
    }
    return secondsSince(start);
  }

private:
  // One llama_decode of `count` tokens, waited for.
  void decode(llama_token *tokens, int count) {
    const int status = llama_decode(context_, llama_batch_get_one(tokens, count));
    if (status != 0) fail("llama_decode failed (" + std::to_string(status) + ")");
    llama_synchronize(context_);
  }

  llama_token nextRandom() { return static_cast<llama_token>(random_() % static_cast<unsigned>(vocab_)); }

  llama_context *context_;
  int vocab_;
  std::mt19937 random_;
};

// The Vulkan backend's line about the device it uses (its fp16, integer dot and matrix-core support), kept
// for the JSON: which of its shader variants ran.
std::string vulkanDeviceLine;
bool verboseLog = false; // --verbose: all of llama.cpp's log, not only its errors

void quietLog(ggml_log_level level, const char *text, void *) {
  static const char kPrefix[] = "ggml_vulkan: 0 = ";
  const char *line = vulkanDeviceLine.empty() ? std::strstr(text, kPrefix) : nullptr;
  if (line) {
    vulkanDeviceLine = line + std::strlen(kPrefix);
    while (!vulkanDeviceLine.empty() && (vulkanDeviceLine.back() == '\n' || vulkanDeviceLine.back() == '\r'))
      vulkanDeviceLine.pop_back();
  }
  if (level == GGML_LOG_LEVEL_ERROR || verboseLog) std::fputs(text, stderr);
}

// `text` as a JSON string's contents.
std::string jsonEscaped(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string jsonList(const std::vector<double> &values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// The first GPU ggml's backends list, or "" if none.
std::string gpuDescription() {
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t device = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(device) == GGML_BACKEND_DEVICE_TYPE_GPU)
      return std::string(ggml_backend_dev_name(device)) + ": " + ggml_backend_dev_description(device);
  }
  return "";
}

double best(const std::vector<double> &values) { return *std::min_element(values.begin(), values.end()); }

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  verboseLog = o.verbose;
  llama_log_set(quietLog, nullptr);
  ggml_backend_load_all_from_path(o.libs.c_str());
  llama_backend_init();
  // Without a GPU llama.cpp would run on the CPU and time that: refuse instead. (ggml's Vulkan backend
  // lists no CPU devices, lavapipe's, unless GGML_VK_VISIBLE_DEVICES names them.)
  const std::string gpu = gpuDescription();
  if (gpu.empty()) fail("llama.cpp found no GPU (its Vulkan backend in " + o.libs + " lists none)");

  llama_model_params modelParams = llama_model_default_params();
  modelParams.n_gpu_layers = 999;
  const auto loadStart = std::chrono::steady_clock::now();
  llama_model *model = llama_model_load_from_file(o.model.c_str(), modelParams);
  if (!model) fail("could not load " + o.model + " (--verbose tells why)");
  const double loadSeconds = secondsSince(loadStart);

  llama_context_params contextParams = llama_context_default_params();
  contextParams.n_ctx = static_cast<uint32_t>(o.context);
  contextParams.n_batch = static_cast<uint32_t>(std::max(o.prefillTokens, o.decodePrompt));
  contextParams.n_ubatch = contextParams.n_batch;
  contextParams.n_threads = contextParams.n_threads_batch = 4;
  llama_context *context = llama_init_from_model(model, contextParams);
  if (!context) fail("could not create a context for " + o.model);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (vocab <= 0) fail(o.model + " has no vocabulary size");

  Bench bench(context, vocab);
  // Warm-up: the backend compiles its pipelines on first use, some only at longer caches (a warm-up of 8
  // decode steps left Qwen2.5-0.5B's first timed run at 377 tok/s against 614 after it, on an H100): one
  // untimed round of everything that is timed.
  bench.prefillSeconds(o.prefillTokens);
  bench.decodeSeconds(o.decodePrompt, o.decodeTokens, false);
  bench.decodeSeconds(o.decodePrompt, o.decodeTokens, true);

  std::vector<double> prefill, decode, greedy;
  for (int r = 0; r < o.reps; ++r) {
    prefill.push_back(bench.prefillSeconds(o.prefillTokens) * 1e3);
    decode.push_back(o.decodeTokens / bench.decodeSeconds(o.decodePrompt, o.decodeTokens, false));
    greedy.push_back(o.decodeTokens / bench.decodeSeconds(o.decodePrompt, o.decodeTokens, true));
  }
  const double bestDecode = *std::max_element(decode.begin(), decode.end());
  const double bestGreedy = *std::max_element(greedy.begin(), greedy.end());
  std::printf("{\n  \"model\": \"%s\",\n  \"engine\": \"llama.cpp %s\",\n  \"load_s\": %.3f,\n",
              jsonEscaped(o.model).c_str(), LLAMA_CPP_RELEASE, loadSeconds);
  std::printf("  \"device\": \"%s\",\n", jsonEscaped(gpu).c_str());
  std::printf("  \"vulkan_device\": \"%s\",\n", jsonEscaped(vulkanDeviceLine).c_str());
  std::printf("  \"flash_attn\": \"%s\",\n", llama_flash_attn_type_name(contextParams.flash_attn_type));
  std::printf("  \"prefill\": {\"tokens\": %d, \"ms\": %.3f, \"runs_ms\": %s},\n", o.prefillTokens, best(prefill),
              jsonList(prefill).c_str());
  std::printf("  \"decode\": {\"prompt\": %d, \"tokens\": %d, \"tokens_per_s\": %.2f, \"ms_per_token\": %.4f, "
              "\"runs_tokens_per_s\": %s},\n",
              o.decodePrompt, o.decodeTokens, bestDecode, 1e3 / bestDecode, jsonList(decode).c_str());
  std::printf("  \"decode_greedy\": {\"tokens_per_s\": %.2f, \"ms_per_token\": %.4f, \"runs_tokens_per_s\": %s}\n}\n",
              bestGreedy, 1e3 / bestGreedy, jsonList(greedy).c_str());
  llama_free(context);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
