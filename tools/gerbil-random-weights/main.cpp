// gerbil-random-weights: writes a safetensors checkpoint of random weights for every tensor a plan reads,
// so real-size models can be benchmarked without downloading them (speed does not depend on the values).
#include "runtime/plan/Plan.h"
#include "runtime/weights/HalfConversion.h"
#include "runtime/weights/Safetensors.h"
#include "tools/CliHelpers.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <vector>

namespace {

struct SourceTensor {
  std::vector<int64_t> shape;  // as stored in the checkpoint
};

// The checkpoint shape of each source tensor: fused tensors are the union of their slices; Conv1D ones
// are stored transposed.
std::map<std::string, SourceTensor> sourceTensors(const gerbil::plan::Plan &plan) {
  std::map<std::string, SourceTensor> sources;
  for (const auto &w : plan.weights) {
    std::vector<int64_t> shape = w.shape;
    if (w.sliceDim >= 0) shape[w.sliceDim] = w.sliceStart + w.sliceLength;
    if (w.transpose && shape.size() == 2) std::swap(shape[0], shape[1]);
    auto [it, inserted] = sources.emplace(w.sourceKeys.front(), SourceTensor{shape});
    if (!inserted) {
      int dim = w.transpose && w.sliceDim >= 0 ? 1 - w.sliceDim : w.sliceDim;
      if (dim >= 0) it->second.shape[dim] = std::max(it->second.shape[dim], shape[dim]);
    }
  }
  return sources;
}

// Fast deterministic values around N(0, 0.02): speed, not statistics, matters here.
struct Random {
  uint64_t state;
  float next() {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return (static_cast<float>(state >> 40) / 16777216.0f - 0.5f) * 0.07f;
  }
};

// Values are made in blocks seeded by (seed, tensor, block), so the file is the same whatever the number
// of threads (one core took ~100 s for an 8B checkpoint).
constexpr uint64_t kBlockElements = 4 << 20;

enum class Dtype { F32, F16, BF16 };

// f16 goes through the loader's vectorised conversion (per element, it took ~10 ns).
void fillBlock(uint8_t *out, uint64_t count, Dtype dtype, uint64_t seed, std::vector<float> &scratch) {
  Random random{seed * 0x9E3779B97F4A7C15ull + 1};
  for (int i = 0; i < 4; ++i) random.next(); // let nearby seeds drift apart
  float *values = scratch.data();
  for (uint64_t i = 0; i < count; ++i) values[i] = random.next();
  if (dtype == Dtype::F32) std::memcpy(out, values, count * 4);
  if (dtype == Dtype::F16) gerbil::weights::floatsToHalfs(values, static_cast<int64_t>(count), out);
  if (dtype == Dtype::BF16)
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      uint16_t h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(out + i * 2, &h, 2);
    }
}

struct Block {
  uint64_t seed, count;
};

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"gerbil-random-weights: a random safetensors checkpoint for a plan's weights (for benchmarks)."};
  std::string planPath, outDir, dtype = "f16";
  uint64_t seed = 1;
  app.add_option("plan", planPath, "The plan (from gerbilc)")->required();
  app.add_option("-o,--output", outDir, "Folder to write model.safetensors into")->required();
  app.add_option("--dtype", dtype, "Checkpoint dtype")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--seed", seed, "Seed");
  unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  app.add_option("--threads", threads, "Threads making values (the file does not depend on it)")
      ->check(CLI::Range(1u, 256u));
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbil-random-weights"))
    return *exitCode;
  try {
    gerbil::plan::Plan plan = gerbil::plan::readFile(planPath);
    auto sources = sourceTensors(plan);
    const size_t elementBytes = dtype == "f32" ? 4 : 2;
    const char *dtypeName = dtype == "f32" ? "F32" : dtype == "f16" ? "F16" : "BF16";
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    for (const auto &[name, t] : sources) {
      uint64_t bytes = elementBytes;
      for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
      header[name] = {{"dtype", dtypeName}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::filesystem::create_directories(outDir);
    std::string path = (std::filesystem::path(outDir) / "model.safetensors").string();
    std::ofstream out(path, std::ios::binary);
    uint64_t headerSize = text.size();
    out.write(reinterpret_cast<const char *>(&headerSize), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    const Dtype kind = dtype == "f32" ? Dtype::F32 : dtype == "f16" ? Dtype::F16 : Dtype::BF16;
    std::vector<Block> blocks;
    uint64_t written = 0, tensorIndex = 0;
    for (const auto &[name, t] : sources) {
      uint64_t count = 1;
      for (int64_t d : t.shape) count *= static_cast<uint64_t>(d);
      for (uint64_t done = 0, b = 0; done < count; done += kBlockElements, ++b)
        blocks.push_back({(seed << 40) ^ (tensorIndex << 20) ^ b, std::min(kBlockElements, count - done)});
      written += count * elementBytes;
      ++tensorIndex;
    }
    // Each wave fills one block per thread, then writes them in order.
    std::vector<std::vector<uint8_t>> buffers(threads, std::vector<uint8_t>(kBlockElements * elementBytes));
    std::vector<std::vector<float>> scratch(threads, std::vector<float>(kBlockElements));
    for (size_t first = 0; first < blocks.size(); first += threads) {
      size_t wave = std::min<size_t>(threads, blocks.size() - first);
      std::vector<std::thread> workers;
      for (size_t i = 0; i < wave; ++i)
        workers.emplace_back([&, i] {
          fillBlock(buffers[i].data(), blocks[first + i].count, kind, blocks[first + i].seed, scratch[i]);
        });
      for (auto &worker : workers) worker.join();
      for (size_t i = 0; i < wave; ++i)
        out.write(reinterpret_cast<const char *>(buffers[i].data()),
                  static_cast<std::streamsize>(blocks[first + i].count * elementBytes));
    }
    std::filesystem::path config = std::filesystem::path(outDir) / "config.json";
    if (!plan.model.configJson.empty()) std::ofstream(config) << plan.model.configJson;
    if (!out) throw std::runtime_error(path + ": write failed");
    std::fprintf(stderr, "wrote %zu tensors, %.2f GB, to %s\n", sources.size(), written / 1e9, path.c_str());
    return 0;
  } catch (const std::exception &e) {
    using gerbil::cli::ErrorTypes;
    return gerbil::cli::reportError("gerbil-random-weights", e,
                                    ErrorTypes<gerbil::plan::PlanError, gerbil::weights::WeightError>{},
                                    ErrorTypes<>{});
  }
}
