// The matmul and attention kernels, as codegen specialises them, run on the Vulkan device (lavapipe in CI)
// against a double-precision reference. Matmuls: over shapes that stress the tiling: T of 1..7 and across
// tile edges, N and K that are not multiples of the tiles, K that is not a multiple of 8 (scalar loads), each
// weight dtype, with and without the RMSNorm prologue and the residual epilogue. The cooperative-matrix
// variant runs where the device has VK_NV_cooperative_matrix (the H200) and is compiled and validated
// everywhere. Attention: prompts across query and key tiles, after earlier positions in the cache,
// grouped-query heads, sliding windows and head dims that do not split evenly over the lanes; decode's split
// attention of one query over one and many splits. The greedy argmax over one and many workgroups.
#include "compiler/codegen/ArgmaxKernel.h"
#include "compiler/codegen/AttentionKernel.h"
#include "compiler/codegen/GemvKernel.h"
#include "compiler/codegen/MatMulKernel.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/KernelShapes.h"
#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

using namespace gerbil;
using codegen::MatMulMode;
using codegen::MatMulSpec;
using codegen::MatMulVariant;

namespace {

struct Shape {
  uint32_t tokens;
  int64_t n, k;
};

// Weights are multiples of 1/64 in [-1, 1]: exact in f16 and bf16, so only the kernel's arithmetic differs
// from the reference.
float weightValue(std::mt19937 &rng) {
  return static_cast<float>(static_cast<int>(rng() % 129) - 64) / 64.0f;
}

std::vector<uint8_t> packWeights(const std::vector<float> &w, plan::DType dtype) {
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

// The device, the shader compiler and the plumbing every kernel test shares: buffers in, one launch, results
// out.
// 1 / rms of a row of k values: the RMSNorm prologue's scale.
double inverseRms(const float *row, int64_t k, double eps) {
  double sumSquares = 0;
  for (int64_t i = 0; i < k; ++i) sumSquares += double(row[i]) * row[i];
  return 1.0 / std::sqrt(sumSquares / double(k) + eps);
}

class KernelTestBase : public ::testing::Test {
protected:
  void SetUp() override {
    vk::ContextOptions options;
    options.extensions = {"VK_NV_cooperative_matrix"};
    try {
      ctx_ = std::make_unique<vk::Context>(options);
    } catch (const vk::NoDeviceError &e) {
      GTEST_SKIP() << e.what();
    }
  }

  bool hasCooperativeMatrix() const {
    return ctx_->info().hasExtension("VK_NV_cooperative_matrix") && ctx_->info().shaderFloat16 &&
           ctx_->info().subgroupSize == 32;
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
  std::vector<float> download(const vk::Buffer &b, size_t floats) {
    std::vector<float> values(floats);
    ctx_->download(b, 0, values.data(), floats * 4);
    return values;
  }

  // Launches `spirv` over `grid` for a step of `tokens`, binding `buffers` in order, `launches` times.
  void run(const std::vector<uint32_t> &spirv, const std::vector<vk::Buffer> &buffers,
           std::array<uint32_t, 3> grid, uint32_t tokens, const std::string &name, int launches = 1) {
    std::vector<vk::BufferRange> ranges;
    for (const vk::Buffer &b : buffers) ranges.push_back({b.handle(), 0, b.size()});
    vk::Pipeline pipeline =
        ctx_->createPipeline(spirv, static_cast<uint32_t>(ranges.size()), plan::kPushConstantBytes, name);
    VkDescriptorSet set = ctx_->createDescriptorSet(pipeline, ranges);
    uint32_t push[2] = {tokens, 0};
    for (int i = 0; i < launches; ++i) {
      VkCommandBuffer cmd = ctx_->beginCommands();
      ctx_->dispatch(cmd, pipeline, set, push, sizeof push, grid[0], grid[1], grid[2]);
      ctx_->submitAndWait(cmd);
    }
  }

  std::unique_ptr<vk::Context> ctx_;
  codegen::ShaderCompiler compiler_;
};

class MatMulKernelTest : public KernelTestBase {
protected:
  // Runs the kernel of `spec` on random inputs and compares every output with the reference.
  void check(MatMulSpec spec, const Shape &shape) {
    spec.k = shape.k;
    spec.n = shape.n;
    const uint32_t t = shape.tokens;
    const int64_t n = shape.n, k = shape.k;
    std::mt19937 rng(static_cast<uint32_t>(t * 7919 + n * 104729 + k));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> x(t * k), w(n * k), g(k), residual(t * n);
    for (float &v : x) v = uniform(rng);
    for (float &v : w) v = weightValue(rng);
    for (float &v : g) v = 0.5f + 0.25f * uniform(rng);
    for (float &v : residual) v = uniform(rng);

    // The reference, with x rounded to f16 after the prologue as the cooperative-matrix kernel does.
    bool halfInputs = spec.variant == MatMulVariant::Coop;
    std::vector<double> expected(t * n);
    for (uint32_t row = 0; row < t; ++row) {
      double scale = spec.norm ? inverseRms(&x[row * k], k, spec.eps) : 1.0;
      std::vector<double> input(k);
      for (int64_t i = 0; i < k; ++i) {
        double v = x[row * k + i] * (spec.norm ? scale * g[i] : 1.0);
        input[i] = halfInputs ? double(static_cast<_Float16>(static_cast<float>(v))) : v;
      }
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += input[i] * w[col * k + i];
        expected[row * n + col] = sum + (spec.residual ? residual[row * n + col] : 0.0);
      }
    }

    codegen::KernelSource source = codegen::matmulKernel(spec);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "matmul test kernel");
    if (spec.variant == MatMulVariant::Coop && !hasCooperativeMatrix())
      GTEST_SKIP() << ctx_->info().name
                   << " has no VK_NV_cooperative_matrix with subgroups of 32 (compiled and "
                   << "validated only)";

    std::vector<vk::Buffer> buffers = linearBuffers(x, packWeights(w, spec.weight), spec.norm ? &g : nullptr,
                                                    spec.residual ? &residual : nullptr, t * n);
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::matmulGrid(spec, t), t, "matmul test kernel");
    std::vector<float> result = download(buffers[buffers.size() - 2], t * n);

    // f32 accumulation in another order: the error grows with K. With f16 inputs the reference rounds them
    // too, but an input within rounding error of a tie may round the other way (one f16 step, 1/1024).
    double tolerance = 1e-5 * double(k) + 1e-4 + (halfInputs ? 4e-3 * std::sqrt(double(k)) : 0.0);
    for (uint32_t row = 0; row < t; ++row)
      for (int64_t col = 0; col < n; ++col)
        ASSERT_NEAR(result[row * n + col], expected[row * n + col], tolerance)
            << "T=" << t << " N=" << n << " K=" << k << ": token " << row << ", output " << col;
  }
};

const Shape kTiledShapes[] = {
    {1, 64, 64},    {3, 72, 176},  {7, 100, 72}, {6, 512, 64},  {64, 64, 64},
    {65, 130, 160}, {130, 33, 96}, {5, 33, 37},  {70, 129, 99}, {200, 96, 256},
};

TEST_F(MatMulKernelTest, TiledMatchesTheReferenceForEveryWeightType) {
  // The weight type only changes the staging loads: the vector path (K a multiple of 8) and the scalar one.
  const Shape shapes[] = {{1, 64, 64}, {3, 72, 176}, {65, 130, 160}, {5, 33, 37}, {70, 129, 99}};
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F16, plan::DType::BF16})
    for (const Shape &shape : shapes) {
      MatMulSpec spec;
      spec.weight = dtype;
      check(spec, shape);
    }
}

TEST_F(MatMulKernelTest, TiledNormPrologueAndResidualEpilogue) {
  for (const Shape &shape : kTiledShapes)
    for (int variant = 1; variant < 4; ++variant) {
      MatMulSpec spec;
      spec.weight = plan::DType::F16;
      spec.norm = variant & 1;
      spec.residual = variant & 2;
      spec.eps = 1e-5;
      check(spec, shape);
    }
}

TEST_F(MatMulKernelTest, CooperativeMatrixMatchesTheReference) {
  const Shape shapes[] = {{1, 64, 64},    {7, 100, 72},    {64, 64, 64},
                          {65, 130, 160}, {130, 200, 256}, {512, 192, 512}};
  // The profile's tiling and larger ones to tune with (gerbilc --target nvidia:TxNxK:WTxWN).
  const char *targets[] = {"nvidia", "nvidia:128x128x32:2x4", "nvidia:128x64x32:2x2", "nvidia:64x128x16:1x4"};
  if (!hasCooperativeMatrix()) {
    // Every tiling and variant still compiles to valid SPIR-V and fits the 48 KiB of shared memory of the
    // devices that have the extension.
    for (const char *target : targets)
      for (int variant = 0; variant < 8; ++variant) {
        MatMulSpec spec;
        spec.variant = MatMulVariant::Coop;
        spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
        spec.k = 4096;
        spec.n = 1000;
        spec.weight = variant & 4 ? plan::DType::BF16 : plan::DType::F16;
        spec.norm = variant & 1;
        spec.residual = variant & 2;
        spec.eps = 1e-5;
        codegen::KernelSource source = codegen::matmulKernel(spec);
        EXPECT_LE(source.sharedMemoryBytes, 48u * 1024) << target;
        compiler_.compile(codegen::writeKernel(source), target);
      }
    GTEST_SKIP() << ctx_->info().name
                 << " has no VK_NV_cooperative_matrix with subgroups of 32 (compiled and "
                 << "validated only)";
  }
  // Every shape with the norm and the residual in f16; every variant and weight type on two shapes (each
  // kernel is compiled by the driver: the whole cross product took over a minute on the H200).
  for (const char *target : targets)
    for (size_t s = 0; s < std::size(shapes); ++s)
      for (int variant = 0; variant < 4; ++variant)
        for (plan::DType dtype : {plan::DType::F16, plan::DType::BF16}) {
          const Shape &shape = shapes[s];
          if (s != 1 && s != 4 && (variant != 3 || dtype != plan::DType::F16)) continue;
          MatMulSpec spec;
          spec.variant = MatMulVariant::Coop;
          spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
          spec.weight = dtype;
          spec.norm = variant & 1;
          spec.residual = variant & 2;
          spec.eps = 1e-5;
          check(spec, shape);
          if (IsSkipped()) return;
          ASSERT_FALSE(HasFatalFailure()) << target;
        }
}

// The grouped projections of prefill on cooperative matrices: gate/up with the activation of the gate times
// the up projection, and q/k/v into three results, each with and without biases, the norm prologue and bf16
// weights, over part sizes that end inside a tile. Compiled and validated everywhere, run where the device
// has VK_NV_cooperative_matrix.
class GroupedMatMulKernelTest : public MatMulKernelTest {
protected:
  void checkGrouped(MatMulSpec spec, uint32_t t) {
    const bool gateUp = spec.mode == MatMulMode::GateUp;
    const int64_t k = spec.k;
    const std::vector<int64_t> rows =
        gateUp ? std::vector<int64_t>{spec.n, spec.n} : std::vector<int64_t>{spec.n, spec.nK, spec.nV};
    const std::vector<bool> biased = gateUp ? std::vector<bool>{spec.biasA, spec.biasB}
                                            : std::vector<bool>{spec.biasA, spec.biasB, spec.biasC};
    std::mt19937 rng(static_cast<uint32_t>(t * 31 + spec.n * 7 + k + spec.nK));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> x(t * k), g(k);
    for (float &v : x) v = uniform(rng);
    for (float &v : g) v = 0.5f + 0.25f * uniform(rng);
    std::vector<std::vector<float>> w(rows.size()), bias(rows.size());
    for (size_t p = 0; p < rows.size(); ++p) {
      w[p].resize(rows[p] * k);
      for (float &v : w[p]) v = weightValue(rng);
      bias[p].resize(rows[p]);
      for (float &v : bias[p]) v = uniform(rng);
    }
    // Inputs rounded to f16 after the prologue, as the kernel rounds them.
    std::vector<double> input(t * k);
    for (uint32_t row = 0; row < t; ++row) {
      double scale = spec.norm ? inverseRms(&x[row * k], k, spec.eps) : 1.0;
      for (int64_t i = 0; i < k; ++i)
        input[row * k + i] = double(
            static_cast<_Float16>(static_cast<float>(x[row * k + i] * (spec.norm ? scale * g[i] : 1.0))));
    }
    auto product = [&](size_t p, uint32_t row, int64_t col) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += input[row * k + i] * w[p][col * k + i];
      return sum + (biased[p] ? bias[p][col] : 0.0);
    };

    codegen::KernelSource source = codegen::matmulKernel(spec);
    std::vector<uint32_t> spirv =
        compiler_.compile(codegen::writeKernel(source), "grouped matmul test kernel");
    if (!hasCooperativeMatrix())
      GTEST_SKIP() << ctx_->info().name << " has no VK_NV_cooperative_matrix (compiled and validated only)";
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(x, "x"));
    for (size_t p = 0; p < rows.size(); ++p) {
      std::vector<uint8_t> packed = packWeights(w[p], spec.weight);
      buffers.push_back(upload(packed.data(), packed.size(), "w"));
    }
    if (spec.norm) buffers.push_back(upload(g, "g"));
    for (size_t p = 0; p < rows.size(); ++p)
      if (biased[p]) buffers.push_back(upload(bias[p], "bias"));
    const size_t firstResult = buffers.size();
    for (int64_t n : gateUp ? std::vector<int64_t>{spec.n} : rows) buffers.push_back(output(t * n, "result"));
    buffers.push_back(state(0));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::matmulGrid(spec, t), t, "grouped matmul test kernel");
    double tolerance = 1e-5 * double(k) + 1e-4 + 4e-3 * std::sqrt(double(k));
    for (size_t r = 0; r < (gateUp ? 1u : rows.size()); ++r) {
      const int64_t n = rows[r];
      std::vector<float> result = download(buffers[firstResult + r], t * n);
      for (uint32_t row = 0; row < t; ++row)
        for (int64_t col = 0; col < n; ++col) {
          double expected = 0;
          if (gateUp) {
            double gate = product(0, row, col), up = product(1, row, col);
            expected = gate / (1.0 + std::exp(-gate)) * up;
          } else {
            expected = product(r, row, col);
          }
          double scale = gateUp ? 1.0 + std::abs(expected) * 0.01 : 1.0;
          ASSERT_NEAR(result[row * n + col], expected, tolerance * scale)
              << "T=" << t << " part " << r << " N=" << n << " K=" << k << ": token " << row << ", output "
              << col;
        }
    }
  }
};

TEST_F(GroupedMatMulKernelTest, CooperativeMatrixGroupedProjections) {
  for (const char *target : {"nvidia", "nvidia:128x128x32:2x4"})
    for (int variant = 0; variant < 4; ++variant) {
      MatMulSpec spec;
      spec.variant = codegen::MatMulVariant::Coop;
      spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
      spec.weight = variant & 2 ? plan::DType::BF16 : plan::DType::F16;
      spec.norm = variant & 1;
      spec.eps = 1e-5;
      spec.k = 200;
      spec.mode = MatMulMode::GateUp;
      spec.n = 150;
      spec.biasA = spec.biasB = variant == 3;
      checkGrouped(spec, 70);
      if (HasFatalFailure()) return;
      spec.mode = MatMulMode::QKV;
      spec.n = 192, spec.nK = 40, spec.nV = 64;
      spec.biasA = spec.biasB = spec.biasC = variant & 1;
      checkGrouped(spec, 37);
      if (HasFatalFailure()) return;
    }
}

// Decode's gemv (one token): shapes that take one team per pair of rows and several (long rows of narrow
// projections), K not a multiple of 8 (scalar loads) and rows that end inside an unrolled step, every weight
// type, with and without the norm prologue and the residual, with subgroup operations and without.
class GemvKernelTest : public KernelTestBase {
protected:
  void checkGemv(codegen::GemvSpec spec) {
    const int64_t n = spec.n, k = spec.k;
    std::mt19937 rng(static_cast<uint32_t>(n * 104729 + k + spec.norm * 7 + spec.residual * 13));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> x(k), w(n * k), g(k), residual(n);
    for (float &v : x) v = uniform(rng);
    for (float &v : w) v = weightValue(rng);
    for (float &v : g) v = 0.5f + 0.25f * uniform(rng);
    for (float &v : residual) v = uniform(rng);
    double scale = spec.norm ? inverseRms(x.data(), k, spec.eps) : 1.0;
    std::vector<double> expected(n);
    for (int64_t row = 0; row < n; ++row) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += double(x[i]) * (spec.norm ? g[i] : 1.0) * w[row * k + i];
      expected[row] = sum * scale + (spec.residual ? residual[row] : 0.0);
    }

    codegen::KernelSource source = codegen::gemvKernel(spec);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "gemv test kernel");
    std::vector<vk::Buffer> buffers = linearBuffers(x, packWeights(w, spec.weight), spec.norm ? &g : nullptr,
                                                    spec.residual ? &residual : nullptr, n);
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::gemvGrid(spec), 1, "gemv test kernel");
    std::vector<float> result = download(buffers[buffers.size() - 2], n);
    double tolerance = 1e-5 * double(k) + 1e-4;
    for (int64_t row = 0; row < n; ++row)
      ASSERT_NEAR(result[row], expected[row], tolerance)
          << "N=" << n << " K=" << k << " norm=" << spec.norm << " residual=" << spec.residual
          << " subgroup ops=" << spec.subgroupOps << ": output " << row;
  }
};

TEST_F(GemvKernelTest, MatchesTheReference) {
  // N, K: one team per pair (wide), two and eight teams (narrow, long rows), a row that ends inside an
  // unrolled step, K not a multiple of 8 or of 4, an odd number of rows.
  const std::pair<int64_t, int64_t> shapes[] = {{64, 64}, {24, 1040}, {8, 4864}, {6, 4104},
                                                {33, 37}, {5, 100},   {300, 520}};
  for (auto [n, k] : shapes)
    for (plan::DType dtype : {plan::DType::F16, plan::DType::BF16, plan::DType::F32})
      for (int variant = 0; variant < 4; ++variant) {
        if (dtype != plan::DType::F16 && variant != 1) continue;
        codegen::GemvSpec spec;
        spec.n = n, spec.k = k, spec.weight = dtype;
        spec.norm = variant & 1, spec.residual = variant & 2, spec.eps = 1e-5;
        checkGemv(spec);
        ASSERT_FALSE(HasFatalFailure());
      }
  for (auto [n, k] : {shapes[1], shapes[2], shapes[4]}) {
    codegen::GemvSpec spec;
    spec.n = n, spec.k = k, spec.weight = plan::DType::F16, spec.norm = true, spec.eps = 1e-5;
    spec.subgroupOps = false;
    checkGemv(spec);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST(GemvShape, SplitsLongRowsOfNarrowProjections) {
  using mlir::gerbil::gemvShape;
  EXPECT_EQ(gemvShape(4096, 28672, false).split, 1); // wide: many pairs already
  EXPECT_EQ(gemvShape(4096, 4096, false).split, 4);
  EXPECT_EQ(gemvShape(14336, 4096, false).split, 4);
  EXPECT_EQ(gemvShape(4864, 896, false).split, 8);
  EXPECT_EQ(gemvShape(896, 1152, false).split, 1); // short rows: every load is in flight already
  for (auto [k, n] : {std::pair<int64_t, int64_t>{4096, 4096}, {4864, 896}, {64, 64}}) {
    mlir::gerbil::GemvShape shape = gemvShape(k, n, false);
    EXPECT_EQ(shape.workgroup, shape.rows / 2 * shape.split * 32) << k << "x" << n;
  }
}

// The attention output of one query of head h at `position` against the cache ([kv head][position][dim]),
// in double precision: causal, with the sliding window, grouped-query heads.
void referenceAttention(const codegen::AttentionSpec &spec, const float *query,
                        const std::vector<float> &keys, const std::vector<float> &values, int64_t h,
                        int64_t position, double *out) {
  const int64_t dim = spec.headDim, kv = h / (spec.heads / spec.kvHeads), seq = spec.sequence;
  const int64_t first = spec.window > 0 ? std::max<int64_t>(0, position - spec.window + 1) : 0;
  std::vector<double> scores;
  double largest = -1e300;
  for (int64_t key = first; key <= position; ++key) {
    double dot = 0;
    for (int64_t d = 0; d < dim; ++d) dot += double(query[d]) * keys[(kv * seq + key) * dim + d];
    scores.push_back(dot * spec.scale);
    largest = std::max(largest, scores.back());
  }
  double total = 0;
  for (double &s : scores) total += (s = std::exp(s - largest));
  for (int64_t d = 0; d < dim; ++d) {
    double sum = 0;
    for (size_t j = 0; j < scores.size(); ++j) sum += scores[j] * values[(kv * seq + first + j) * dim + d];
    out[d] = sum / total;
  }
}

struct AttentionCase {
  codegen::AttentionSpec spec;
  uint32_t tokens, start; // queries, and the position of the first
};

class AttentionKernelTest : public KernelTestBase {
protected:
  // coop: the tensor-core kernel (f16 queries, keys, values and probabilities): compiled and validated
  // everywhere, run where the device has VK_NV_cooperative_matrix.
  void check(const AttentionCase &c, bool coop = false) {
    const codegen::AttentionSpec &spec = c.spec;
    const int64_t heads = spec.heads, kvHeads = spec.kvHeads, dim = spec.headDim, seq = spec.sequence;
    const uint32_t t = c.tokens;
    std::mt19937 rng(t * 31 + c.start * 7 + static_cast<uint32_t>(dim + heads * 1000 + spec.window * 17));
    std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
    std::vector<float> q(t * heads * dim), keys(kvHeads * seq * dim), values(kvHeads * seq * dim);
    for (float &v : q) v = uniform(rng);
    for (float &v : keys) v = uniform(rng);
    for (float &v : values) v = uniform(rng);

    std::vector<double> expected(q.size());
    for (uint32_t i = 0; i < t; ++i)
      for (int64_t h = 0; h < heads; ++h)
        referenceAttention(spec, &q[(i * heads + h) * dim], keys, values, h, c.start + i,
                           &expected[(i * heads + h) * dim]);

    codegen::KernelSource source = codegen::attentionKernel(spec, coop);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "attention test kernel");
    if (coop && !hasCooperativeMatrix()) {
      EXPECT_LE(source.sharedMemoryBytes, 48u * 1024);
      GTEST_SKIP() << ctx_->info().name << " has no VK_NV_cooperative_matrix (compiled and validated only)";
    }
    ASSERT_LE(source.sharedMemoryBytes, ctx_->info().maxSharedMemoryBytes);
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(q, "q"));
    buffers.push_back(upload(keys, "k_cache"));
    buffers.push_back(upload(values, "v_cache"));
    buffers.push_back(output(q.size(), "result"));
    buffers.push_back(state(c.start));
    run(spirv, buffers, codegen::attentionGrid(spec, t, coop), t, "attention test kernel");
    std::vector<float> result = download(buffers[3], q.size());
    // f16 operands: a score is off by up to ~1e-3 of its size, a probability by 1e-3 relative.
    const double tolerance = coop ? 1.5e-2 : 1e-4;
    for (size_t i = 0; i < result.size(); ++i)
      ASSERT_NEAR(result[i], expected[i], tolerance)
          << "T=" << t << " start=" << c.start << " head_dim=" << dim << " window=" << spec.window
          << " coop=" << coop << ": element " << i;
  }
};

// Decode: the query at `position` against the cache, split over the cached positions; each case runs
// twice (the last split of each column must leave its counter at 0 for the next step).
struct DecodeCase {
  codegen::AttentionSpec spec;
  uint32_t position;
};

class DecodeAttentionKernelTest : public AttentionKernelTest {
protected:
  void check(const DecodeCase &c, bool subgroupOps) {
    const codegen::AttentionSpec &spec = c.spec;
    const int64_t heads = spec.heads, kvHeads = spec.kvHeads, dim = spec.headDim, seq = spec.sequence;
    std::mt19937 rng(c.position * 31 + static_cast<uint32_t>(dim + heads * 1000 + spec.window * 17));
    std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
    std::vector<float> q(heads * dim), keys(kvHeads * seq * dim), values(kvHeads * seq * dim);
    for (float &v : q) v = uniform(rng);
    for (float &v : keys) v = uniform(rng);
    for (float &v : values) v = uniform(rng);
    // Positions past the step's are never read: NaN there fails the comparison if they are.
    for (int64_t h = 0; h < kvHeads; ++h)
      for (int64_t p = c.position + 1; p < seq; ++p)
        for (int64_t d = 0; d < dim; ++d)
          keys[(h * seq + p) * dim + d] = values[(h * seq + p) * dim + d] = std::nanf("");

    std::vector<double> expected(q.size());
    for (int64_t h = 0; h < heads; ++h)
      referenceAttention(spec, &q[h * dim], keys, values, h, c.position, &expected[h * dim]);

    codegen::DecodeAttentionKernel kernel = codegen::decodeAttentionKernel(spec, subgroupOps);
    ASSERT_LE(kernel.source.sharedMemoryBytes, ctx_->info().maxSharedMemoryBytes);
    std::vector<uint32_t> spirv =
        compiler_.compile(codegen::writeKernel(kernel.source), "decode attention test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(q, "q"));
    buffers.push_back(upload(keys, "k_cache"));
    buffers.push_back(upload(values, "v_cache"));
    buffers.push_back(output(q.size(), "result"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchPartialBytes, "partial"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchCounterBytes, "counters"));
    ctx_->fill(buffers.back(), 0);
    buffers.push_back(state(c.position));
    ASSERT_EQ(buffers.size(), kernel.source.bindings.size() + 1);
    for (int run = 0; run < 2; ++run) {
      ctx_->fill(buffers[3], 0x7fc00000u); // NaN again: the second step must write every output too
      this->run(spirv, buffers, kernel.grid, 1, "decode attention test kernel");
      std::vector<float> result = download(buffers[3], q.size());
      for (size_t i = 0; i < result.size(); ++i)
        ASSERT_NEAR(result[i], expected[i], 1e-4)
            << "heads=" << heads << "/" << kvHeads << " head_dim=" << dim << " position=" << c.position
            << " window=" << spec.window << " subgroup ops=" << subgroupOps << " run " << run << ": element "
            << i;
      std::vector<int32_t> counters(kernel.scratchCounterBytes / 4);
      ctx_->download(buffers[5], 0, counters.data(), kernel.scratchCounterBytes);
      for (int32_t counter : counters) ASSERT_EQ(counter, 0) << "a column's counter was left behind";
    }
  }
};

TEST_F(DecodeAttentionKernelTest, MatchesTheReference) {
  // heads, kv heads, head dim, cache positions, scale, window; position. Across one block and one split
  // (positions under 32), one workgroup's warps, many splits, key groups (head dims under 128), grouped-query
  // heads beyond the 8 query heads of one workgroup, head dims that are no multiple of 4 or of the lanes,
  // sliding windows.
  const DecodeCase cases[] = {
      {{4, 1, 16, 400, 0.25, 0}, 0},
      {{4, 1, 16, 400, 0.25, 0}, 31},
      {{4, 2, 64, 400, 0.125, 0}, 32},
      {{14, 2, 64, 400, 0.125, 0}, 130},
      {{32, 8, 128, 400, 0.088, 0}, 255},
      {{8, 8, 128, 400, 0.088, 0}, 399},
      {{16, 1, 32, 400, 0.17, 0}, 77},
      {{6, 2, 18, 400, 0.2, 0}, 45},
      {{3, 3, 72, 400, 0.11, 0}, 300},
      {{4, 2, 16, 400, 0.25, 13}, 70},
      {{4, 2, 256, 400, 0.06, 0}, 97},
      {{4, 2, 64, 400, 0.125, 100}, 350},
      // 64 columns leave 8 splits: each warp walks several blocks (more than 8 · 256 positions).
      {{64, 64, 16, 2100, 0.25, 0}, 2099},
  };
  for (const DecodeCase &c : cases) {
    check(c, true);
    ASSERT_FALSE(HasFatalFailure());
  }
  // The reductions through shared memory alone (gerbilc --no-subgroup-ops).
  for (const DecodeCase &c : {cases[1], cases[3], cases[7], cases[12]}) {
    check(c, false);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST_F(AttentionKernelTest, PrefillMatchesTheReference) {
  // heads, kv heads, head dim, cache positions, scale, window; tokens, first position.
  const AttentionCase cases[] = {
      {{4, 1, 16, 160, 0.25, 0}, 1, 0},   {{4, 1, 16, 160, 0.25, 0}, 7, 0},
      {{4, 2, 32, 160, 0.17, 0}, 100, 0}, {{4, 2, 32, 160, 0.17, 0}, 37, 50},
      {{3, 3, 72, 160, 0.11, 0}, 45, 20}, {{2, 1, 20, 160, 0.2, 0}, 33, 0},
      {{4, 2, 16, 160, 0.25, 13}, 70, 9}, {{2, 2, 128, 160, 0.088, 0}, 40, 10},
  };
  for (const AttentionCase &c : cases) check(c);
}

TEST_F(AttentionKernelTest, PrefillOnCooperativeMatricesMatchesTheReference) {
  // Head dims 64 and 128 (the models'), 16 and 32; across query tiles (64) and key tiles (32), after earlier
  // positions in the cache, grouped-query heads, a sliding window.
  const AttentionCase cases[] = {
      {{4, 1, 16, 300, 0.25, 0}, 1, 0},     {{4, 1, 64, 300, 0.125, 0}, 70, 0},
      {{4, 2, 128, 300, 0.088, 0}, 130, 0}, {{4, 2, 128, 300, 0.088, 0}, 37, 150},
      {{2, 2, 32, 300, 0.17, 0}, 100, 5},   {{4, 2, 64, 300, 0.125, 40}, 150, 20},
  };
  for (const AttentionCase &c : cases) {
    check(c, true);
    ASSERT_FALSE(HasFatalFailure());
  }
}

class ArgmaxKernelTest : public KernelTestBase {
protected:
  // The token of the last of `tokens` rows of `logits` (vocab wide) over two steps: result, input id and the
  // state's token list and position, and the counter back at 0.
  void check(const std::vector<float> &logits, int64_t vocab, uint32_t tokens, int32_t expected) {
    codegen::ArgmaxKernel kernel = codegen::argmaxKernel(vocab, 8);
    std::vector<uint32_t> spirv =
        compiler_.compile(codegen::writeKernel(kernel.source), "argmax test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(logits, "logits"));
    buffers.push_back(output(1, "result"));
    buffers.push_back(output(1, "ids"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchPartialBytes, "partial"));
    buffers.push_back(ctx_->createBuffer(16, "counters"));
    ctx_->fill(buffers.back(), 0);
    buffers.push_back(state(5));
    ASSERT_EQ(buffers.size(), kernel.source.bindings.size() + 1);
    for (uint32_t step = 0; step < 2; ++step) {
      run(spirv, buffers, kernel.grid, tokens, "argmax test kernel");
      int32_t result = 0, id = 0, counter = -1;
      ctx_->download(buffers[1], 0, &result, 4);
      ctx_->download(buffers[2], 0, &id, 4);
      ctx_->download(buffers[4], 0, &counter, 4);
      EXPECT_EQ(result, expected) << "vocab " << vocab << ", step " << step;
      EXPECT_EQ(id, expected) << "vocab " << vocab;
      EXPECT_EQ(counter, 0) << "the counter was left behind";
      std::vector<uint32_t> words(4);
      ctx_->download(buffers[5], 0, words.data(), 16);
      EXPECT_EQ(words[0], 5 + (step + 1) * tokens) << "the position advances by the step's tokens";
      EXPECT_EQ(words[1], step + 1) << "generated tokens";
      EXPECT_EQ(words[2 + step], static_cast<uint32_t>(expected)) << "the state's token list";
    }
  }
};

TEST_F(ArgmaxKernelTest, FindsTheFirstLargestLogitOfTheLastRow) {
  for (int64_t vocab : {5l, 2048l, 2049l, 20000l, 128256l}) {
    const uint32_t tokens = 3;
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::uniform_real_distribution<float> uniform(-20.0f, 20.0f);
    std::vector<float> logits(tokens * vocab);
    for (float &v : logits) v = uniform(rng);
    float *last = &logits[(tokens - 1) * vocab];
    // Larger logits in the earlier rows, which must not count.
    logits[vocab / 3] = 100.0f;
    int64_t first = vocab * 2 / 3, later = vocab - 1;
    last[first] = last[later] = 50.0f; // a tie, across workgroups for the larger vocabularies
    check(logits, vocab, tokens, static_cast<int32_t>(first));
    ASSERT_FALSE(HasFatalFailure());
    // -inf everywhere but one logit; then all -inf, which gives the first index.
    std::fill(last, last + vocab, -INFINITY);
    last[vocab / 2] = -1e30f;
    check(logits, vocab, tokens, static_cast<int32_t>(vocab / 2));
    std::fill(last, last + vocab, -INFINITY);
    check(logits, vocab, tokens, 0);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST(AttentionKernelSpec, TensorCoresTakeHeadDimsThatFit) {
  EXPECT_TRUE(mlir::gerbil::fitsCoopAttention(64));
  EXPECT_TRUE(mlir::gerbil::fitsCoopAttention(128));
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(72));  // not a multiple of 16
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(256)); // its tiles do not fit 48 KiB
  codegen::AttentionSpec spec{4, 2, 40, 100, 0.1, 0};
  EXPECT_THROW(codegen::attentionKernel(spec, true), codegen::CodegenError);
}

TEST(MatMulKernelSpec, RefusesShapesItCannotTake) {
  MatMulSpec spec;
  spec.variant = MatMulVariant::Coop;
  spec.coopTiling = mlir::gerbil::findTargetProfile("nvidia")->coopTiling;
  spec.k = 100;
  spec.n = 64;
  spec.weight = plan::DType::F16;
  EXPECT_THROW(codegen::matmulKernel(spec), codegen::CodegenError);
  spec.k = 64;
  spec.weight = plan::DType::F32;
  EXPECT_THROW(codegen::matmulKernel(spec), codegen::CodegenError);
}

} // namespace
