// What the kernel tests share: the device (lavapipe in CI) and shader compiler, buffers in, one launch,
// results out, and weights that f16 and bf16 hold exactly.
#pragma once

#include "compiler/codegen/CooperativeMatrixKHR.h"
#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/TargetProfile.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gerbil::kerneltest {

// A cooperative-matrix kernel compiled as written (VK_NV_cooperative_matrix) and retargeted to
// VK_KHR_cooperative_matrix (CooperativeMatrixKHR.h), with the way's name.
struct CooperativeWay {
  std::string name;
  std::vector<uint32_t> spirv;
};
// (The KHR way retargets the NV module, as ShaderCompiler does for a KHR kernel, without compiling the GLSL
// twice: the kernel tests compile hundreds of variants on lavapipe.)
inline std::vector<CooperativeWay> compileBothWays(codegen::ShaderCompiler &compiler,
                                                   const codegen::KernelSource &source,
                                                   const std::string &name) {
  std::vector<uint32_t> nv = compiler.compile(source, name);
  std::vector<uint32_t> khr = codegen::retargetToKhrCooperativeMatrix(nv);
  return {{"VK_NV_cooperative_matrix", std::move(nv)}, {"VK_KHR_cooperative_matrix", std::move(khr)}};
}

// Weights are multiples of 1/64 in [-1, 1]: exact in f16 and bf16, so only the kernel's arithmetic differs
// from the reference.
inline float weightValue(std::mt19937 &rng) {
  return static_cast<float>(static_cast<int>(rng() % 129) - 64) / 64.0f;
}

inline std::vector<uint8_t> packWeights(const std::vector<float> &w, plan::DType dtype) {
  std::vector<uint8_t> bytes(w.size() * plan::byteSize(dtype));
  for (size_t i = 0; i < w.size(); ++i) {
    if (dtype == plan::DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &w[i], 4);
    } else if (dtype == plan::DType::F16) {
      _Float16 h = static_cast<_Float16>(w[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &w[i], 4);
      uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(bytes.data() + 2 * i, &high, 2);
    }
  }
  return bytes;
}

// The gate/up epilogue's reference: silu(gate) * up.
inline double siluTimes(double gate, double up) {
  return gate / (1.0 + std::exp(-gate)) * up;
}

// 1 / rms of a row of k values: the RMSNorm prologue's scale.
inline double inverseRms(const float *row, int64_t k, double eps) {
  double sumSquares = 0;
  for (int64_t i = 0; i < k; ++i) sumSquares += double(row[i]) * row[i];
  return 1.0 / std::sqrt(sumSquares / double(k) + eps);
}

// The t rows (k wide) of x normalised (RMSNorm with weight g) and rounded to f16, as norm_rows_f16.glsl
// writes them for the tensor-core matmul's f16 input.
inline std::vector<_Float16> normalizedHalfRows(const std::vector<float> &x, const std::vector<float> &g,
                                                uint32_t t, int64_t k, double eps) {
  std::vector<_Float16> rows(x.size());
  for (uint32_t row = 0; row < t; ++row) {
    const double scale = inverseRms(&x[row * k], k, eps);
    for (int64_t i = 0; i < k; ++i)
      rows[row * k + i] = static_cast<_Float16>(static_cast<float>(x[row * k + i] * scale * g[i]));
  }
  return rows;
}

// A template's variants (gerbilc --kernel-define NAME=VALUE), set on a kernel over codegen's own defines.
using KernelDefines = std::vector<std::pair<std::string, std::string>>;
inline void setDefines(codegen::KernelSource &kernel, const KernelDefines &defines) {
  for (const auto &[name, value] : defines) codegen::setDefine(kernel, name, value);
}
// The value codegen gave `name` in a kernel, if any.
inline std::optional<std::string> defineValue(const codegen::KernelSource &kernel, const std::string &name) {
  for (const auto &[defined, value] : kernel.defines)
    if (defined == name) return value;
  return std::nullopt;
}

// The device, the shader compiler and the plumbing every kernel test shares: buffers in, one launch, results
// out.
class KernelTestBase : public ::testing::Test {
protected:
  void SetUp() override {
    vk::ContextOptions options;
    options.extensions = {"VK_NV_cooperative_matrix", "VK_KHR_cooperative_matrix",
                          "VK_NV_cooperative_matrix2"};
    try {
      ctx_ = std::make_unique<vk::Context>(options);
    } catch (const vk::NoDeviceError &e) {
      GTEST_SKIP() << e.what();
    }
  }

  // Whether the device runs the cooperative-matrix kernels through `extension` (VK_NV_cooperative_matrix
  // or VK_KHR_cooperative_matrix, whose shapes must hold the kernels' fragments): f16 and subgroups of 32
  // too.
  bool runsCooperative(const std::string &extension) const {
    const vk::DeviceInfo &info = ctx_->info();
    const std::vector<std::string> &khrShapes = info.cooperativeMatrixKHRShapes;
    const bool shapes = extension != "VK_KHR_cooperative_matrix" ||
                        std::find(khrShapes.begin(), khrShapes.end(),
                                  mlir::gerbil::kCooperativeMatrixShape) != khrShapes.end();
    return info.hasExtension(extension) && shapes && info.shaderFloat16 && info.subgroupSize == 32;
  }
  bool hasCooperativeMatrix() const {
    return runsCooperative("VK_NV_cooperative_matrix") || runsCooperative("VK_KHR_cooperative_matrix");
  }
  // `source` compiled both ways (so that CI validates or retargets every variant either way); the ways
  // this device runs. Empty: compiled only.
  std::vector<CooperativeWay> compileCooperative(const codegen::KernelSource &source,
                                                 const std::string &name) {
    std::vector<CooperativeWay> ways = compileBothWays(compiler_, source, name);
    std::erase_if(ways, [&](const CooperativeWay &way) { return !runsCooperative(way.name); });
    return ways;
  }

  vk::Buffer upload(const void *data, size_t bytes, const std::string &name) {
    vk::Buffer b = ctx_->createBuffer(std::max<size_t>(bytes, 16), name);
    ctx_->upload(b, 0, data, bytes);
    return b;
  }
  vk::Buffer upload(const std::vector<float> &data, const std::string &name) {
    return upload(data.data(), data.size() * 4, name);
  }
  // An output filled with NaN: an element the kernel misses fails the comparison.
  vk::Buffer output(size_t floats, const std::string &name) {
    vk::Buffer b = ctx_->createBuffer(std::max<size_t>(floats * 4, 16), name);
    ctx_->fill(b, 0x7fc00000u);
    return b;
  }
  // The state buffer every kernel binds last: the step's position, then the generated tokens.
  vk::Buffer state(uint32_t position, size_t words = 16) {
    std::vector<uint32_t> values(words, 0);
    values[0] = position;
    vk::Buffer b = ctx_->createBuffer(values.size() * 4, "state");
    ctx_->upload(b, 0, values.data(), values.size() * 4);
    return b;
  }
  // The bindings of a matmul or gemv: x, w, [g], [residual], result (NaN), state.
  std::vector<vk::Buffer> linearBuffers(const std::vector<float> &x, const std::vector<uint8_t> &w,
                                        const std::vector<float> *g, const std::vector<float> *residual,
                                        size_t outputs) {
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(x, "x"));
    buffers.push_back(upload(w.data(), w.size(), "w"));
    if (g) buffers.push_back(upload(*g, "g"));
    if (residual) buffers.push_back(upload(*residual, "residual"));
    buffers.push_back(output(outputs, "result"));
    buffers.push_back(state(0));
    return buffers;
  }
  // `count` values of a buffer of f32, or with `half` of f16, as floats.
  std::vector<float> download(const vk::Buffer &b, size_t count, bool half = false) {
    std::vector<float> values(count);
    if (!half) {
      ctx_->download(b, 0, values.data(), count * 4);
      return values;
    }
    std::vector<_Float16> halves(count);
    ctx_->download(b, 0, halves.data(), count * sizeof(_Float16));
    std::copy(halves.begin(), halves.end(), values.begin());
    return values;
  }

  // Launches `spirv` over `grid` for a step of `tokens`, binding `buffers` in order, `launches` times.
  void run(const std::vector<uint32_t> &spirv, const std::vector<vk::Buffer> &buffers,
           std::array<uint32_t, 3> grid, uint32_t tokens, const std::string &name, int launches = 1,
           uint32_t firstRow = 0) {
    std::vector<vk::BufferRange> ranges;
    for (const vk::Buffer &b : buffers) ranges.push_back({b.handle(), 0, b.size()});
    vk::Pipeline pipeline =
        ctx_->createPipeline(spirv, static_cast<uint32_t>(ranges.size()), plan::kPushConstantBytes, name);
    VkDescriptorSet set = ctx_->createDescriptorSet(pipeline, ranges);
    uint32_t push[2] = {tokens, firstRow};
    for (int i = 0; i < launches; ++i) {
      VkCommandBuffer cmd = ctx_->beginCommands();
      ctx_->dispatch(cmd, pipeline, set, push, sizeof push, grid[0], grid[1], grid[2]);
      ctx_->submitAndWait(cmd);
    }
  }

  std::unique_ptr<vk::Context> ctx_;
  codegen::ShaderCompiler compiler_;
};

} // namespace gerbil::kerneltest
