// The prefill matmul kernels, as codegen specialises them, against a double-precision reference: over shapes
// that stress the tiling (T of 1..7 and across tile edges, N and K that are not multiples of the tiles, K
// that is not a multiple of 8: scalar loads), each weight dtype, with and without the RMSNorm prologue and
// the residual epilogue. The cooperative-matrix variants (and the grouped q/k/v and gate/up projections) run
// where the device has VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix (the H200 both: each way it
// has) and are compiled and validated (and retargeted to KHR) everywhere.
#include "compiler/codegen/MatMulKernel.h"
#include "gerbil/Passes/KernelShapes.h"
#include "gerbil/Passes/TargetProfile.h"
#include "test/unit/kernels/KernelTestBase.h"

#include <cctype>
#include <string>

using namespace gerbil;
using namespace gerbil::kerneltest;

namespace {

using codegen::MatMulMode;
using codegen::MatMulSpec;
using codegen::MatMulVariant;

struct Shape {
  uint32_t tokens;
  int64_t n, k;
};

// A tensor-core matmul on `target`'s tiling with f16 weights (what every tensor-core case sets).
MatMulSpec coopSpec(const char *target) {
  MatMulSpec spec;
  spec.variant = MatMulVariant::Coop;
  spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
  spec.weight = plan::DType::F16;
  spec.eps = 1e-5;
  return spec;
}

class MatMulKernelTest : public KernelTestBase {
protected:
  // A matmul split over K binds its parts' scratch (garbage to start with) and zeroed counters: inserted at
  // `at`. Returns the launches to run: two where split, the second finding the counters the first left at 0.
  uint32_t insertSplitScratch(const MatMulSpec &spec, uint32_t tokens, std::vector<vk::Buffer> &buffers,
                              std::vector<vk::Buffer>::iterator at) {
    const codegen::SplitKScratch split = codegen::splitKScratch(spec, tokens);
    if (!split.partialBytes) return 1;
    std::vector<vk::Buffer> scratch;
    scratch.push_back(upload(std::vector<float>(split.partialBytes / 4, 1e30f), "partial"));
    scratch.push_back(upload(std::vector<float>(split.counterBytes / 4, 0.0f), "counters"));
    buffers.insert(at, std::make_move_iterator(scratch.begin()), std::make_move_iterator(scratch.end()));
    return 2;
  }

  // Runs the kernel of `spec` (with `defines` added: a template's variants) on random inputs and compares
  // every output with the reference.
  void check(MatMulSpec spec, const Shape &shape, const KernelDefines &defines = {}) {
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

    // The reference, with x rounded to f16 after the prologue as the cooperative-matrix kernel does. With
    // halfInput the kernel is given the normalised rows in f16 (a norm launch's) and has no prologue.
    bool halfInputs = spec.variant == MatMulVariant::Coop;
    const bool normed = spec.norm || spec.halfInput;
    std::vector<double> expected(t * n);
    for (uint32_t row = 0; row < t; ++row) {
      double scale = normed ? inverseRms(&x[row * k], k, spec.eps) : 1.0;
      std::vector<double> input(k);
      for (int64_t i = 0; i < k; ++i) {
        // Without normWeighted the norm weight lives in w (folded at load), not in the kernel.
        const double weight = spec.norm && !spec.normWeighted ? 1.0 : g[i];
        double v = x[row * k + i] * (normed ? scale * weight : 1.0);
        input[i] = halfInputs ? double(static_cast<_Float16>(static_cast<float>(v))) : v;
      }
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += input[i] * w[col * k + i];
        expected[row * n + col] = sum + (spec.residual ? residual[row * n + col] : 0.0);
      }
    }

    codegen::KernelSource source = codegen::matmulKernel(spec);
    setDefines(source, defines);
    std::vector<CooperativeWay> ways =
        spec.variant == MatMulVariant::Coop
            ? compileCooperative(source, "matmul test kernel")
            : std::vector<CooperativeWay>{{"", compiler_.compile(source, "matmul test kernel")}};
    // Workgroup-scope matrices run through the KHR extension only, on devices with VK_NV_cooperative_matrix2.
    if (spec.workgroupScope)
      std::erase_if(ways, [&](const CooperativeWay &way) {
        return way.name != "VK_KHR_cooperative_matrix" ||
               ctx_->info().cooperativeMatrixWorkgroupShapes.empty();
      });
    if (ways.empty())
      GTEST_SKIP() << ctx_->info().name
                   << " runs no cooperative matrices with subgroups of 32 (compiled and validated only)";
    for (const CooperativeWay &way : ways) {
      runAndCompare(spec, source, way, x, w, g, residual, expected, shape);
      if (HasFatalFailure()) return;
    }
  }

  void runAndCompare(const MatMulSpec &spec, const codegen::KernelSource &source, const CooperativeWay &way,
                     const std::vector<float> &x, const std::vector<float> &w, const std::vector<float> &g,
                     const std::vector<float> &residual, const std::vector<double> &expected,
                     const Shape &shape) {
    const uint32_t t = shape.tokens;
    const int64_t n = shape.n, k = shape.k;
    std::vector<vk::Buffer> buffers =
        linearBuffers(x, packWeights(w, spec.weight), spec.norm && spec.normWeighted ? &g : nullptr,
                      spec.residual ? &residual : nullptr, t * n);
    if (spec.halfInput) {
      const std::vector<_Float16> rows = normalizedHalfRows(x, g, t, k, spec.eps);
      buffers[0] = upload(rows.data(), rows.size() * sizeof(_Float16), "x");
    }
    // After the result, before the state.
    const uint32_t launches = insertSplitScratch(spec, t, buffers, buffers.end() - 1);
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(way.spirv, buffers, codegen::matmulGrid(spec, t), t, "matmul test kernel", launches);
    size_t resultIndex = 0;
    while (source.bindings[resultIndex].name != "result") ++resultIndex;
    std::vector<float> result = download(buffers[resultIndex], t * n);

    // f32 accumulation in another order: the error grows with K. With f16 inputs the reference rounds them
    // too, but an input within rounding error of a tie may round the other way (one f16 step, 1/1024).
    const bool halfInputs = spec.variant == MatMulVariant::Coop;
    double tolerance = 1e-5 * double(k) + 1e-4 + (halfInputs ? 4e-3 * std::sqrt(double(k)) : 0.0);
    for (uint32_t row = 0; row < t; ++row)
      for (int64_t col = 0; col < n; ++col)
        ASSERT_NEAR(result[row * n + col], expected[row * n + col], tolerance)
            << way.name << " T=" << t << " N=" << n << " K=" << k << ": token " << row << ", output " << col;
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
  // Variant 4: the norm weight folded into w (no g).
  for (const Shape &shape : kTiledShapes)
    for (int variant = 1; variant < 5; ++variant) {
      MatMulSpec spec;
      spec.weight = plan::DType::F16;
      spec.norm = variant & 1 || variant == 4;
      spec.normWeighted = variant != 4;
      spec.residual = variant & 2;
      spec.eps = 1e-5;
      check(spec, shape);
    }
}

// Compiles every variant of each target's tiling to valid SPIR-V whose shared memory (as plans measure
// it) is what codegen counts and fits the 48 KiB of the devices that have the extension.
void compileEveryVariant(codegen::ShaderCompiler &compiler, const std::vector<const char *> &targets) {
  for (const char *target : targets)
    for (int variant = 0; variant < 8; ++variant) {
      MatMulSpec spec;
      spec.variant = MatMulVariant::Coop;
      spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
      spec.k = 4096;
      spec.n = 1000;
      spec.weight = variant & 4 ? plan::DType::BF16 : plan::DType::F16;
      spec.norm = variant & 1;
      spec.normWeighted = !(spec.norm && (variant & 4)); // bf16 with the norm weight folded into it
      spec.halfInput = !spec.norm && (variant & 4);
      spec.residual = variant & 2;
      spec.eps = 1e-5;
      codegen::KernelSource source = codegen::matmulKernel(spec);
      EXPECT_LE(source.sharedMemoryBytes, 48u * 1024) << target;
      for (const CooperativeWay &way : compileBothWays(compiler, source, target))
        EXPECT_EQ(codegen::workgroupMemoryBytes(way.spirv), source.sharedMemoryBytes)
            << target << ", variant " << variant << ", " << way.name;
    }
}

// Split over K (the tiling's sixth field): 3 splits of K 72 (3 slices of 32) leave none empty, 4 leave the
// last one empty, and a K of 512 takes each split several slices; with the norm and the residual.
TEST_F(MatMulKernelTest, CooperativeMatrixSplitOverKMatchesTheReference) {
  const std::vector<const char *> targets = {"nvidia:64x64x32:2x2:2:4", "nvidia:64x64x32:2x2:1:3",
                                             "nvidia:128x128x32:2x4:2:2", "nvidia:128x128x32:4x4:2:2",
                                             "nvidia:128x128x64:2x4:1:2",
                                             // the catalog's for narrow wide projections (1B's o and down)
                                             "nvidia:128x128x64:4x4:1:2"};
  if (!hasCooperativeMatrix()) {
    compileEveryVariant(compiler_, targets);
    GTEST_SKIP() << ctx_->info().name
                 << " runs no cooperative matrices with subgroups of 32 (compiled and validated only)";
  }
  const Shape shapes[] = {{1, 64, 64}, {7, 100, 72}, {130, 200, 256}, {512, 192, 512}};
  for (const char *target : targets)
    for (const Shape &shape : shapes)
      for (int variant : {2, 3}) {
        MatMulSpec spec = coopSpec(target);
        spec.norm = variant & 1;
        spec.residual = true;
        check(spec, shape);
        if (IsSkipped()) return;
        ASSERT_FALSE(HasFatalFailure()) << target;
      }
}

// One test a tiling (the profile's and larger ones to tune with, gerbilc --target nvidia:TxNxK:WTxWN[:S]), so
// that bench/device.sh's shards of test-kernels take them side by side: each kernel is compiled by the
// driver, and the tilings in one test took ~2 minutes of an H100 call.
class CooperativeMatMulTest : public MatMulKernelTest, public ::testing::WithParamInterface<const char *> {};
// A test's name for its --target: the target with every other character than letters and digits as '_'.
std::string targetTestName(const ::testing::TestParamInfo<const char *> &info) {
  std::string name = info.param;
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

TEST_P(CooperativeMatMulTest, MatchesTheReference) {
  const char *target = GetParam();
  if (!hasCooperativeMatrix()) {
    compileEveryVariant(compiler_, {target});
    GTEST_SKIP() << ctx_->info().name
                 << " runs no cooperative matrices with subgroups of 32 (compiled and validated only)";
  }
  const Shape shapes[] = {{1, 64, 64},    {7, 100, 72},    {64, 64, 64},
                          {65, 130, 160}, {130, 200, 256}, {512, 192, 512}};
  // Every shape with the norm and the residual in f16; every variant and weight type on two shapes.
  for (size_t s = 0; s < std::size(shapes); ++s)
    for (int variant = 0; variant < 4; ++variant)
      for (plan::DType dtype : {plan::DType::F16, plan::DType::BF16}) {
        const Shape &shape = shapes[s];
        if (s != 1 && s != 4 && (variant != 3 || dtype != plan::DType::F16)) continue;
        MatMulSpec spec = coopSpec(target);
        spec.weight = dtype;
        // The norm in the prologue, or (even shapes) in a norm launch before, whose f16 rows it reads.
        spec.halfInput = (variant & 1) && s % 2 == 0;
        spec.norm = (variant & 1) && !spec.halfInput;
        spec.normWeighted = !(spec.norm && dtype == plan::DType::BF16); // bf16: the norm weight folded
        spec.residual = variant & 2;
        check(spec, shape);
        if (IsSkipped()) return;
        ASSERT_FALSE(HasFatalFailure()) << target;
      }
}

INSTANTIATE_TEST_SUITE_P(Tilings, CooperativeMatMulTest,
                         ::testing::Values("nvidia", "nvidia:128x128x32:2x4", "nvidia:128x64x32:2x2",
                                           "nvidia:64x128x16:1x4", "nvidia:128x256x32:2x4:1",
                                           "nvidia:128x128x64:2x2:1",
                                           // 16 subgroups: their epilogue fragments fit only in the
                                           // slices' memory
                                           "nvidia:128x128x32:4x4",
                                           // the catalog's for the gate/up and for the wide plain
                                           // projections (fragments loaded a step ahead)
                                           "nvidia:128x128x64:2x4:1", "nvidia:128x128x64:4x4:1"),
                         targetTestName);

// COOP_RESIDUAL_AHEAD 0 (each fragment's residual loaded after its stores, as before the default loaded it a
// fragment ahead): the same results, over shapes that end inside a tile, on 4 × 4 and 2 × 4 subgroups.
TEST_F(MatMulKernelTest, CooperativeMatrixResidualLoadedLateMatchesTheReference) {
  const Shape shapes[] = {{65, 130, 160}, {130, 200, 256}};
  for (const char *target : {"nvidia:128x128x64:4x4:1", "nvidia:128x128x64:2x4:1"})
    for (const Shape &shape : shapes)
      for (const char *ahead : {"0", "1"}) {
        MatMulSpec spec = coopSpec(target);
        spec.residual = true;
        check(spec, shape, {{"COOP_RESIDUAL_AHEAD", ahead}});
        if (IsSkipped()) return;
        ASSERT_FALSE(HasFatalFailure()) << target << " COOP_RESIDUAL_AHEAD=" << ahead;
      }
}

// COOP_CLAMPED_LOADS (rows past the step's or the matrix's load its last row; no check where K is a multiple
// of the slices): the same results over shapes that end inside a tile, K that the slices divide (256) and
// do not (160: its last slice's columns past K stay zeros), with the norm's prologue and the residual, split
// over K; the grouped projections below.
TEST_F(MatMulKernelTest, CooperativeMatrixClampedLoadsMatchTheReference) {
  const Shape shapes[] = {{65, 130, 160}, {130, 200, 256}, {7, 100, 72}};
  for (const char *target : {"nvidia:128x128x64:4x4:1", "nvidia:128x128x64:2x4:1", "nvidia:64x64x32:2x2:2:4"})
    for (const Shape &shape : shapes)
      for (int variant : {0, 3}) {
        MatMulSpec spec = coopSpec(target);
        spec.norm = variant & 1;
        spec.residual = variant & 2;
        check(spec, shape, {{"COOP_CLAMPED_LOADS", "1"}});
        if (IsSkipped()) return;
        ASSERT_FALSE(HasFatalFailure()) << target;
      }
}

// matmul_coop_workgroup.glsl (whole tiles of f16 rows, plain projections) on devices with workgroup-scope
// matrices; compiled both ways elsewhere.
TEST_F(MatMulKernelTest, WorkgroupScopeMatchesTheReference) {
  const Shape shapes[] = {{128, 128, 64}, {256, 256, 512}};
  for (const char *target : {"khr:128x128x32:2x2", "khr:128x128x64:2x4", "khr:128x256x32:2x4"})
    for (const Shape &shape : shapes)
      for (bool residual : {false, true}) {
        MatMulSpec spec;
        spec.variant = MatMulVariant::Coop;
        spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
        if (shape.n % spec.coopTiling.tileN != 0) continue;
        spec.weight = plan::DType::F16;
        spec.halfInput = true;
        spec.residual = residual;
        spec.workgroupScope = true;
        spec.eps = 1e-5;
        check(spec, shape);
        if (IsSkipped()) return;
        ASSERT_FALSE(HasFatalFailure()) << target;
      }
}

// The f16 rows that the grouped projections' norm launch writes for the tensor-core matmul: rows shorter
// and longer than the workgroup, values large enough to overflow f16 unnormalised, and a row of zeros;
// the sum of squares over the workgroup through shared memory alone or through subgroup operations.
TEST_F(MatMulKernelTest, NormalizedRowsMatchTheReference) {
  for (bool subgroupOps : {false, true})
    for (bool weighted : {true, false}) // without the weight: folded into the projection's weights
      for (int64_t k :
           {8l, 40l, 896l, 4096l, 4104l}) { // 4104: a last round of words only some invocations take
        const uint32_t t = 5;
        std::mt19937 rng(static_cast<uint32_t>(k));
        std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
        std::vector<float> x(t * k), g(k);
        for (float &v : x) v = uniform(rng);
        for (float &v : g) v = weighted ? 0.5f + 0.25f * uniform(rng) : 1.0f;
        std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 0.0f);
        for (int64_t i = 0; i < k; ++i) x[3 * k + i] *= 1e5f;
        const double eps = 1e-6;
        codegen::KernelSource source = codegen::normalizedRowsKernel(k, eps, weighted, subgroupOps);
        std::vector<uint32_t> spirv =
            compiler_.compile(codegen::writeKernel(source), "norm rows test kernel");
        std::vector<vk::Buffer> buffers;
        buffers.push_back(upload(x, "x"));
        if (weighted) buffers.push_back(upload(g, "g"));
        buffers.push_back(output(t * k / 2, "result"));
        buffers.push_back(state(0));
        ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
        run(spirv, buffers, {t, 1, 1}, t, "norm rows test kernel");
        const std::vector<float> result = download(buffers[buffers.size() - 2], t * k, true);
        const std::vector<_Float16> expected = normalizedHalfRows(x, g, t, k, eps);
        for (size_t i = 0; i < result.size(); ++i) // f32 against double arithmetic: one f16 step at most
          ASSERT_NEAR(result[i], float(expected[i]), std::abs(float(expected[i])) / 1024 + 1e-6)
              << "K=" << k << ", row " << i / k << ", element " << i % k
              << (subgroupOps ? ", subgroups" : "");
      }
  EXPECT_THROW(codegen::normalizedRowsKernel(36, 1e-6), codegen::CodegenError); // not whole 16-byte words
}

// The grouped projections of prefill on cooperative matrices: gate/up with the activation of the gate times
// the up projection, and q/k/v into three results, each with and without biases, the norm prologue and bf16
// weights, over part sizes that end inside a tile. Compiled and validated everywhere, run where the device
// has either cooperative-matrix extension.
class GroupedMatMulKernelTest : public MatMulKernelTest {
protected:
  // `defines` added to the kernel's: a template's variants.
  void checkGrouped(MatMulSpec spec, uint32_t t, const KernelDefines &defines = {}) {
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
    // Inputs rounded to f16 after the prologue (or the norm launch), as the kernel rounds them.
    const bool normed = spec.norm || spec.halfInput;
    std::vector<double> input(t * k);
    for (uint32_t row = 0; row < t; ++row) {
      double scale = normed ? inverseRms(&x[row * k], k, spec.eps) : 1.0;
      for (int64_t i = 0; i < k; ++i)
        input[row * k + i] =
            double(static_cast<_Float16>(static_cast<float>(x[row * k + i] * (normed ? scale * g[i] : 1.0))));
    }
    auto product = [&](size_t p, uint32_t row, int64_t col) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += input[row * k + i] * w[p][col * k + i];
      return sum + (biased[p] ? bias[p][col] : 0.0);
    };

    codegen::KernelSource source = codegen::matmulKernel(spec);
    setDefines(source, defines);
    const std::vector<CooperativeWay> ways = compileCooperative(source, "grouped matmul test kernel");
    if (ways.empty())
      GTEST_SKIP() << ctx_->info().name << " runs no cooperative matrices (compiled and validated only)";
    for (const CooperativeWay &way : ways) {
      SCOPED_TRACE(way.name);
      runGrouped(spec, source, way.spirv, t, x, g, w, bias, rows, biased, product);
      if (HasFatalFailure()) return;
    }
  }

  template <typename Product>
  void runGrouped(const MatMulSpec &spec, const codegen::KernelSource &source,
                  const std::vector<uint32_t> &spirv, uint32_t t, const std::vector<float> &x,
                  const std::vector<float> &g, const std::vector<std::vector<float>> &w,
                  const std::vector<std::vector<float>> &bias, const std::vector<int64_t> &rows,
                  const std::vector<bool> &biased, Product product) {
    const bool gateUp = spec.mode == MatMulMode::GateUp;
    const int64_t k = spec.k;
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(x, "x"));
    for (size_t p = 0; p < rows.size(); ++p) {
      std::vector<uint8_t> packed = packWeights(w[p], spec.weight);
      buffers.push_back(upload(packed.data(), packed.size(), "w"));
    }
    if (spec.halfInput) {
      const std::vector<_Float16> rows = normalizedHalfRows(x, g, t, k, spec.eps);
      buffers[0] = upload(rows.data(), rows.size() * sizeof(_Float16), "x");
    }
    if (spec.norm) buffers.push_back(upload(g, "g"));
    for (size_t p = 0; p < rows.size(); ++p)
      if (biased[p]) buffers.push_back(upload(bias[p], "bias"));
    const size_t firstResult = buffers.size();
    for (int64_t n : gateUp ? std::vector<int64_t>{spec.n} : rows) buffers.push_back(output(t * n, "result"));
    const uint32_t launches = insertSplitScratch(spec, t, buffers, buffers.end()); // a q/k/v split over K
    buffers.push_back(state(0));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::matmulGrid(spec, t), t, "grouped matmul test kernel", launches);
    double tolerance = 1e-5 * double(k) + 1e-4 + 4e-3 * std::sqrt(double(k));
    for (size_t r = 0; r < (gateUp ? 1u : rows.size()); ++r) {
      const int64_t n = rows[r];
      // With halfResult in f16, as the down projection reads it.
      const std::vector<float> result = download(buffers[firstResult + r], t * n, spec.halfResult);
      for (uint32_t row = 0; row < t; ++row)
        for (int64_t col = 0; col < n; ++col) {
          double expected = 0;
          if (gateUp) {
            double gate = product(0, row, col), up = product(1, row, col);
            expected = siluTimes(gate, up);
          } else {
            expected = product(r, row, col);
          }
          double scale = gateUp ? 1.0 + std::abs(expected) * (spec.halfResult ? 0.02 : 0.01) : 1.0;
          ASSERT_NEAR(result[row * n + col], expected, tolerance * scale)
              << "T=" << t << " part " << r << " N=" << n << " K=" << k << ": token " << row << ", output "
              << col;
        }
    }
  }
};

// One test a tiling, as CooperativeMatMulTest.
class CooperativeGroupedMatMulTest : public GroupedMatMulKernelTest,
                                     public ::testing::WithParamInterface<const char *> {};

TEST_P(CooperativeGroupedMatMulTest, MatchesTheReference) {
  const char *target = GetParam();
  const mlir::gerbil::TargetProfile profile = *mlir::gerbil::parseTarget(target);
  for (int variant = 0; variant < 4; ++variant) {
    MatMulSpec spec = coopSpec(target);
    spec.weight = variant & 2 ? plan::DType::BF16 : plan::DType::F16;
    spec.halfInput = variant == 3; // the norm in a launch before
    spec.norm = (variant & 1) && !spec.halfInput;
    spec.halfResult = variant >= 2; // f16 gate/up products, as the down projection reads them
    spec.k = 200;
    spec.mode = MatMulMode::GateUp;
    spec.n = 150;
    spec.biasA = spec.biasB = variant == 3;
    checkGrouped(spec, 70);
    if (HasFatalFailure()) return;
    spec.mode = MatMulMode::QKV;
    if (profile.qkvTiling) spec.coopTiling = *profile.qkvTiling;
    spec.halfResult = false; // the gate/up matmul's only
    spec.n = 192, spec.nK = 40, spec.nV = 64;
    spec.biasA = spec.biasB = spec.biasC = variant & 1;
    checkGrouped(spec, 37);
    if (HasFatalFailure()) return;
  }
}

// The profile's tiling and those the catalog picks for wide projections (one staging buffer, or 16
// subgroups); sweep bt's 128 × 192 gate/up tiles (96 outputs of each matrix) on 4 × 2 and 8 × 2; the q/k/v
// split over K (@qkv=: 2 and 3 parts of K 200's 4 slices of 64, the last of 3 with one; 4 parts of 7
// slices of 32), the gate/up unsplit beside it.
INSTANTIATE_TEST_SUITE_P(Tilings, CooperativeGroupedMatMulTest,
                         ::testing::Values("nvidia", "nvidia:128x128x32:2x4", "nvidia:128x256x32:2x4:1",
                                           "nvidia:128x128x32:4x4", "nvidia:128x128x64:2x4:1",
                                           "nvidia:128x192x64:4x2:1", "nvidia:128x192x64:8x2:1",
                                           "nvidia@qkv=128x128x64:4x4:1:2", "nvidia@qkv=128x128x64:4x4:1:3",
                                           "nvidia@qkv=64x64x32:2x2:2:4"),
                         targetTestName);

// COOP_CLAMPED_LOADS in the gate/up (rows of either matrix past N) and the q/k/v (parts past their rows,
// split over K).
TEST_F(GroupedMatMulKernelTest, CooperativeMatrixClampedLoads) {
  for (const char *target : {"nvidia:128x128x64:2x4:1", "nvidia@qkv=128x128x64:4x4:1:2"}) {
    const mlir::gerbil::TargetProfile profile = *mlir::gerbil::parseTarget(target);
    MatMulSpec spec = coopSpec(target);
    spec.halfInput = true;
    spec.halfResult = true;
    spec.k = 256;
    spec.mode = MatMulMode::GateUp;
    spec.n = 150;
    checkGrouped(spec, 70, {{"COOP_CLAMPED_LOADS", "1"}});
    if (HasFatalFailure() || IsSkipped()) return;
    spec.mode = MatMulMode::QKV;
    if (profile.qkvTiling) spec.coopTiling = *profile.qkvTiling;
    spec.halfResult = false;
    spec.n = 192, spec.nK = 40, spec.nV = 64;
    spec.biasA = spec.biasB = spec.biasC = true;
    checkGrouped(spec, 37, {{"COOP_CLAMPED_LOADS", "1"}});
    if (HasFatalFailure()) return;
  }
}

// Codegen's COOP_CLAMPED_LOADS rule (MatMulKernel.cpp): every gate/up, plain and q/k/v matmuls on 128 x 128
// tiles split at most in 2; not 64 x 64 tiles nor a split in 4 (both measured slower).
TEST(MatMulKernelSpec, ClampedLoadsWhereTheyMeasuredFaster) {
  auto clamped = [](const char *target, MatMulMode mode) {
    MatMulSpec spec = coopSpec(target);
    spec.mode = mode;
    spec.k = spec.n = 256;
    spec.nK = spec.nV = 64;
    spec.halfInput = mode != MatMulMode::Single;
    return defineValue(codegen::matmulKernel(spec), "COOP_CLAMPED_LOADS");
  };
  EXPECT_EQ(clamped("nvidia:128x128x64:2x4:1", MatMulMode::GateUp), "1");
  EXPECT_EQ(clamped("nvidia:64x64x64:2x2:1", MatMulMode::GateUp), "1");
  EXPECT_EQ(clamped("nvidia:128x128x64:4x4:1", MatMulMode::Single), "1");
  EXPECT_EQ(clamped("nvidia:128x128x64:4x4:1:2", MatMulMode::Single), "1");
  EXPECT_EQ(clamped("nvidia:128x128x64:4x4:1:2", MatMulMode::QKV), "1");
  EXPECT_EQ(clamped("nvidia:128x128x64:4x4:1:4", MatMulMode::Single), "0");
  EXPECT_EQ(clamped("nvidia:64x64x64:2x2:1", MatMulMode::Single), "0");
  EXPECT_EQ(clamped("nvidia:64x64x64:2x2:1", MatMulMode::QKV), "0");
}

TEST(MatMulKernelSpec, TensorCoreTimingVariantsCompile) {
  // gerbil-kernel-bench's --define variants of the tensor-core loop (COOP_FRAGMENT_PIPELINE, which codegen
  // sets by the subgroup block and sweeps override; COOP_DIAG_*, diagnostics with wrong results) compile to
  // valid SPIR-V for a plain, a gate/up and a q/k/v matmul, on the tilings plans and sweeps use, so that a
  // sweep on the GPU does not find them broken.
  codegen::ShaderCompiler compiler;
  for (const char *target : {"nvidia", "nvidia:128x256x32:4x4:1", "nvidia:128x256x32:2x8:1",
                             "nvidia:128x128x64:4x4:1", "nvidia:128x128x64:2x4:1",
                             // sweep aq's candidates (bench/sweeps/2026-12-04-aq.txt)
                             "nvidia:128x128x64:4x2:1", "nvidia:128x128x80:2x4:1", "nvidia:128x256x48:2x4:1"})
    for (const char *define : {"COOP_FRAGMENT_PIPELINE", "COOP_DIAG_NO_FRAGMENT_LOADS", "COOP_DIAG_NO_GLOBAL",
                               "COOP_CLAMPED_LOADS"})
      for (MatMulMode mode : {MatMulMode::Single, MatMulMode::GateUp, MatMulMode::QKV}) {
        MatMulSpec spec;
        spec.variant = MatMulVariant::Coop;
        spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
        spec.weight = plan::DType::F16;
        spec.mode = mode;
        spec.k = 256;
        spec.n = 256;
        spec.nK = spec.nV = 64;
        spec.halfInput = mode != MatMulMode::Single;
        codegen::KernelSource source = codegen::matmulKernel(spec);
        // Replacing codegen's value where it sets one (COOP_FRAGMENT_PIPELINE), as gerbil-kernel-bench does.
        codegen::setDefine(source, define, "1");
        for (const CooperativeWay &way : compileBothWays(compiler, source, define))
          EXPECT_FALSE(way.spirv.empty()) << target << " " << define << " " << way.name;
      }
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
  spec.weight = plan::DType::F16;
  spec.halfResult = true; // f16 results are the gate/up matmul's
  EXPECT_THROW(codegen::matmulKernel(spec), codegen::CodegenError);
  spec.halfResult = false;
  spec.halfInput = spec.norm = true; // f16 input rows are normalised already
  EXPECT_THROW(codegen::matmulKernel(spec), codegen::CodegenError);
  spec.norm = false;
  // Split over K: the gate/up's epilogue needs both whole sums of an output; the q/k/v's last split routes
  // the sums, with a scratch of its three parts' tiles.
  spec.coopTiling.splitK = 2;
  spec.mode = MatMulMode::GateUp;
  EXPECT_THROW(codegen::matmulKernel(spec), codegen::CodegenError);
  spec.mode = MatMulMode::QKV;
  spec.nK = spec.nV = 16;
  EXPECT_NO_THROW(codegen::matmulKernel(spec));
  EXPECT_EQ(codegen::matmulGrid(spec, 100)[2], 2u);
  const codegen::SplitKScratch scratch = codegen::splitKScratch(spec, 100);
  const auto &t = spec.coopTiling;
  const uint64_t tiles =
      static_cast<uint64_t>(mlir::gerbil::coopQKVColumns(t, 64, 16, 16) * ((100 + t.tileT - 1) / t.tileT));
  EXPECT_EQ(scratch.counterBytes, tiles * 4);
  EXPECT_EQ(scratch.partialBytes, tiles * 2 * t.tileT * t.tileN * 4);
}

} // namespace
