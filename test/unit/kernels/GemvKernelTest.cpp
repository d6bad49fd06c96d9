// Decode's one-token gemv, as codegen specialises it, against a double-precision reference.
#include "compiler/codegen/GemvKernel.h"
#include "gerbil/Passes/KernelShapes.h"
#include "test/unit/kernels/KernelTestBase.h"

using namespace gerbil;
using namespace gerbil::kerneltest;

namespace {

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
      for (int64_t i = 0; i < k; ++i)
        sum += double(x[i]) * (spec.norm && spec.normWeighted ? g[i] : 1.0) * w[row * k + i];
      expected[row] = sum * scale + (spec.residual ? residual[row] : 0.0);
    }

    codegen::KernelSource source = codegen::gemvKernel(spec);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "gemv test kernel");
    std::vector<vk::Buffer> buffers =
        linearBuffers(x, packWeights(w, spec.weight), spec.norm && spec.normWeighted ? &g : nullptr,
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
  // The norm weight folded into the weights (no g): 16-byte and scalar loads, f16 and f32 weights.
  for (auto [n, k] : {shapes[0], shapes[2], shapes[4]})
    for (plan::DType dtype : {plan::DType::F16, plan::DType::F32}) {
      codegen::GemvSpec spec;
      spec.n = n, spec.k = k, spec.weight = dtype, spec.norm = true, spec.normWeighted = false,
      spec.eps = 1e-5;
      checkGemv(spec);
      ASSERT_FALSE(HasFatalFailure());
    }
}

TEST(GemvKernelSpec, TimingVariantsCompile) {
  // gerbil-kernel-bench's --define variants of the gemv (GEMV_UNROLL) compile for every weight type, so
  // that a sweep does not find them broken.
  codegen::ShaderCompiler compiler;
  for (plan::DType dtype : {plan::DType::F16, plan::DType::BF16, plan::DType::F32}) {
    codegen::GemvSpec spec;
    spec.n = 64, spec.k = 512, spec.weight = dtype, spec.norm = true, spec.eps = 1e-5;
    codegen::KernelSource source = codegen::gemvKernel(spec);
    source.defines.emplace_back("GEMV_UNROLL", "2u");
    EXPECT_FALSE(compiler.compile(codegen::writeKernel(source), "GEMV_UNROLL").empty());
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

} // namespace
