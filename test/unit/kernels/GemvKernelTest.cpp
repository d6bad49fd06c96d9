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
  void checkGemv(codegen::GemvSpec spec, const KernelDefines &defines = {}) {
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
    setDefines(source, defines);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "gemv test kernel");
    std::vector<vk::Buffer> buffers =
        linearBuffers(x, packWeights(w, spec.weight), spec.norm && spec.normWeighted ? &g : nullptr,
                      spec.residual ? &residual : nullptr, n);
    // The prefetch workers' weights (each 4 KiB longer than its range) between the result and the state.
    const size_t resultIndex = buffers.size() - 2;
    vk::Buffer stateBuffer = std::move(buffers.back());
    buffers.pop_back();
    for (const codegen::PrefetchRange &range : spec.prefetch) {
      std::vector<float> weights(static_cast<size_t>(range.bytes / 4 + 1024));
      for (float &v : weights) v = uniform(rng);
      buffers.push_back(upload(weights, "prefetched weights"));
    }
    buffers.push_back(std::move(stateBuffer));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::gemvGrid(spec), 1, "gemv test kernel");
    std::vector<float> result = download(buffers[resultIndex], n);
    double tolerance = 1e-5 * double(k) + 1e-4;
    for (int64_t row = 0; row < n; ++row)
      ASSERT_NEAR(result[row], expected[row], tolerance)
          << "N=" << n << " K=" << k << " norm=" << spec.norm << " residual=" << spec.residual
          << " subgroup ops=" << spec.subgroupOps << ": output " << row;
  }
};

TEST_F(GemvKernelTest, MatchesTheReference) {
  // N, K: one team per pair (wide), two and eight teams (narrow, long rows), a row that ends inside an
  // unrolled step, K not a multiple of 8 or of 4, an odd number of rows, four teams on short rows (Qwen2.5's
  // K of 896: 0.875 loads a lane, some lanes with none; and K 520).
  const std::pair<int64_t, int64_t> shapes[] = {{64, 64}, {24, 1040}, {8, 4864},  {6, 4104},
                                                {33, 37}, {5, 100},   {300, 520}, {40, 896}};
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

// GEMV_ADDEND_EARLY 0 (the residual loaded where it is added, after the reduction, as before the default
// loaded it with the first weights): the same sums.
TEST_F(GemvKernelTest, ResidualLoadedLateMatchesTheReference) {
  for (int64_t split : {0l, 2l})
    for (plan::DType dtype : {plan::DType::F16, plan::DType::F32}) {
      codegen::GemvSpec spec;
      spec.n = 67, spec.k = 520, spec.weight = dtype, spec.residual = true, spec.split = split;
      checkGemv(spec, {{"GEMV_ADDEND_EARLY", "0"}});
      if (HasFatalFailure() || IsSkipped()) return;
    }
}

// The gate/up pair (MODE_GATE_UP): n outputs silu(gate · x̂) · (up · x̂) of two matrices, with the norm
// prologue as decode runs it; one team a pair and two (Qwen2.5's K of 896), K not a multiple of 8.
TEST_F(GemvKernelTest, GateUpMatchesTheReference) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{48, 896}, {40, 100}, {20, 2056}}) {
    codegen::GemvSpec spec;
    spec.n = n, spec.k = k, spec.weight = plan::DType::F16, spec.norm = true, spec.normWeighted = false,
    spec.eps = 1e-5, spec.gateUp = true;
    std::mt19937 rng(static_cast<uint32_t>(n * 7919 + k));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> x(k), gate(n * k), up(n * k);
    for (float &v : x) v = uniform(rng);
    for (float &v : gate) v = weightValue(rng);
    for (float &v : up) v = weightValue(rng);
    const double scale = inverseRms(x.data(), k, spec.eps);
    codegen::KernelSource source = codegen::gemvKernel(spec);
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "gate/up test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(x, "x"));
    for (const std::vector<float> *w : {&gate, &up}) {
      std::vector<uint8_t> packed = packWeights(*w, spec.weight);
      buffers.push_back(upload(packed.data(), packed.size(), "w"));
    }
    buffers.push_back(output(size_t(n), "result"));
    buffers.push_back(state(0));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::gemvGrid(spec), 1, "gate/up test kernel");
    std::vector<float> result = download(buffers[3], size_t(n));
    for (int64_t row = 0; row < n; ++row) {
      double a = 0, b = 0;
      for (int64_t i = 0; i < k; ++i) {
        a += double(x[i]) * gate[row * k + i];
        b += double(x[i]) * up[row * k + i];
      }
      a *= scale, b *= scale;
      const double expected = siluTimes(a, b);
      ASSERT_NEAR(result[row], expected, (1e-5 * double(k) + 1e-4) * (1.0 + std::abs(expected)))
          << "N=" << n << " K=" << k << " split " << mlir::gerbil::gemvShape(k, n, true).split << ": output "
          << row;
    }
  }
}

// The grouped q/k/v projection as decode runs it (MODE_QKV; PlanBuilder::lowerGroup): q, k and v of one
// normed input with their biases, q and k rotated at the step's position (whole and partial rotary dims,
// attention scaling) and k, v written into the layer's KV cache ([kv head][seq][head dim], f32 or f16) or
// into results of their own; K a multiple of 8 (16-byte loads) and not; f16 and f32 weights.
struct QkvCase {
  int64_t k, heads, kvHeads, headDim, rotaryDim; // rotaryDim 0: no RoPE
  bool biases, cacheWrite, halfCache, normWeighted;
  plan::DType weight;
};
class GroupedGemvKernelTest : public KernelTestBase {
protected:
  void checkQkv(const QkvCase &c, int64_t workgroup = 0) {
    const int64_t nq = c.heads * c.headDim, nkv = c.kvHeads * c.headDim, seq = 8, k = c.k;
    const uint32_t position = 5;
    codegen::GroupedGemvSpec spec;
    spec.qkv = true, spec.k = k, spec.nq = nq, spec.nk = nkv, spec.nv = nkv, spec.weight = c.weight;
    spec.workgroup = workgroup;
    spec.norm = true, spec.normWeighted = c.normWeighted, spec.eps = 1e-5;
    spec.biases = {c.biases, c.biases, c.biases};
    if (c.rotaryDim) {
      codegen::RotarySpec rotary;
      rotary.headDim = c.headDim, rotary.rotaryDim = c.rotaryDim, rotary.attentionScaling = 1.25;
      for (int64_t i = 0; i < c.rotaryDim / 2; ++i)
        rotary.invFreq.push_back(std::pow(10000.0, -2.0 * double(i) / double(c.rotaryDim)));
      spec.rope = rotary;
    }
    if (c.cacheWrite) spec.cacheHeadDim = c.headDim, spec.maxSequence = seq;
    std::mt19937 rng(static_cast<uint32_t>(k * 31 + nq + c.rotaryDim * 7 + c.biases));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> x(k), g(k);
    for (float &v : x) v = uniform(rng);
    for (float &v : g) v = 0.5f + 0.25f * uniform(rng);
    const int64_t rows[3] = {nq, nkv, nkv};
    std::vector<float> w[3], bias[3];
    std::vector<double> expected[3];
    const double scale = inverseRms(x.data(), k, spec.eps);
    for (int part = 0; part < 3; ++part) {
      w[part].resize(rows[part] * k), bias[part].resize(rows[part]), expected[part].resize(rows[part]);
      for (float &v : w[part]) v = weightValue(rng);
      for (float &v : bias[part]) v = uniform(rng);
      for (int64_t r = 0; r < rows[part]; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i)
          sum += double(x[i]) * (c.normWeighted ? g[i] : 1.0) * w[part][r * k + i];
        expected[part][r] = sum * scale + (c.biases ? bias[part][r] : 0.0);
      }
      // RoPE of q and k: pairs (i, i + rotaryDim / 2) of each head, scaled cos and sin.
      for (int64_t h = 0; part < 2 && c.rotaryDim && h < rows[part] / c.headDim; ++h)
        for (int64_t i = 0; i < c.rotaryDim / 2; ++i) {
          const double angle = position * spec.rope->invFreq[i], cs = std::cos(angle) * 1.25,
                       sn = std::sin(angle) * 1.25;
          double &a = expected[part][h * c.headDim + i],
                 &b = expected[part][h * c.headDim + i + c.rotaryDim / 2];
          const double ra = a * cs - b * sn, rb = b * cs + a * sn;
          a = ra, b = rb;
        }
    }

    codegen::KernelSource source = codegen::groupedGemvKernel(spec);
    if (c.halfCache) {
      ASSERT_EQ(codegen::holdCacheInHalf(source), 2);
    }
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "q/k/v test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(x, "x"));
    for (int part = 0; part < 3; ++part) {
      std::vector<uint8_t> packed = packWeights(w[part], c.weight);
      buffers.push_back(upload(packed.data(), packed.size(), "w"));
    }
    if (c.normWeighted) buffers.push_back(upload(g, "g"));
    if (c.biases)
      for (int part = 0; part < 3; ++part) buffers.push_back(upload(bias[part], "bias"));
    const size_t results = buffers.size();
    buffers.push_back(output(size_t(nq), "result_q"));
    const size_t cacheValues = static_cast<size_t>(c.kvHeads * seq * c.headDim);
    for (int part = 1; part < 3; ++part)
      buffers.push_back(output(c.cacheWrite ? cacheValues : size_t(nkv), part == 1 ? "k" : "v"));
    buffers.push_back(state(position));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    run(spirv, buffers, codegen::groupedGemvGrid(spec), 1, "q/k/v test kernel");

    const double tolerance =
        (1e-5 * double(k) + 1e-4) * (c.halfCache ? 8.0 : 1.0) + (c.halfCache ? 4e-3 : 0.0);
    for (int part = 0; part < 3; ++part) {
      std::vector<float> got;
      if (part == 0 || !c.cacheWrite) {
        got = download(buffers[results + part], size_t(rows[part]));
      } else if (!c.halfCache) {
        std::vector<float> cache = download(buffers[results + part], cacheValues);
        for (int64_t r = 0; r < rows[part]; ++r)
          got.push_back(cache[((r / c.headDim) * seq + position) * c.headDim + r % c.headDim]);
      } else {
        std::vector<_Float16> cache(cacheValues);
        ctx_->download(buffers[results + part], 0, cache.data(), cache.size() * 2);
        for (int64_t r = 0; r < rows[part]; ++r)
          got.push_back(float(cache[((r / c.headDim) * seq + position) * c.headDim + r % c.headDim]));
      }
      for (int64_t r = 0; r < rows[part]; ++r)
        ASSERT_NEAR(got[r], expected[part][r], tolerance * (1.0 + std::abs(expected[part][r])))
            << "K=" << k << " heads " << c.heads << "/" << c.kvHeads << " head_dim " << c.headDim
            << " rotary " << c.rotaryDim << " biases " << c.biases << " cache " << c.cacheWrite << " half "
            << c.halfCache << ": part " << part << " row " << r;
    }
  }
};

TEST_F(GroupedGemvKernelTest, QkvMatchesTheReference) {
  const QkvCase cases[] = {
      {200, 4, 2, 16, 16, true, true, false, true, plan::DType::F16},   // Qwen-like: biases, RoPE, cache
      {130, 4, 2, 16, 16, false, true, false, false, plan::DType::F16}, // K no multiple of 8, norm folded
      {96, 2, 1, 16, 8, false, true, false, true, plan::DType::F32},    // partial rotary (Phi-like)
      {256, 4, 4, 32, 32, false, true, true, false, plan::DType::F16},  // an f16 cache
      {64, 3, 3, 8, 0, true, false, false, true, plan::DType::F16},     // no RoPE, k and v as results
      {896, 2, 1, 16, 16, true, true, true, false, plan::DType::F16},   // Qwen's K: four teams a pair
  };
  for (const QkvCase &c : cases) {
    checkQkv(c);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

// gerbil-kernel-bench gemv --workgroup: more pairs of rows a workgroup (fewer workgroups) give the same sums,
// the last workgroup's rows partly past the end; the q/k/v's rotary pairs and cache rows too.
TEST_F(GemvKernelTest, WiderWorkgroupsMatchTheReference) {
  for (int64_t workgroup : {256l, 512l, 1024l}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{67, 520}, {40, 4864}}) {
      codegen::GemvSpec spec;
      spec.n = n, spec.k = k, spec.weight = plan::DType::F16, spec.norm = true, spec.residual = true,
      spec.eps = 1e-5, spec.workgroup = workgroup;
      checkGemv(spec);
      if (HasFatalFailure() || IsSkipped()) return;
    }
  }
  codegen::GemvSpec odd;
  odd.n = 64, odd.k = 512, odd.split = 4, odd.workgroup = 192; // not a multiple of a pair's 4 teams
  EXPECT_THROW(codegen::gemvKernel(odd), codegen::CodegenError);
}

TEST_F(GroupedGemvKernelTest, QkvInWiderWorkgroupsMatchesTheReference) {
  checkQkv({200, 4, 2, 16, 16, true, true, false, true, plan::DType::F16}, 512);
  if (HasFatalFailure() || IsSkipped()) return;
  checkQkv({896, 2, 1, 16, 16, true, true, true, false, plan::DType::F16}, 1024);
}

// The group's binding order is what PlanBuilder maps to values by name: an embedding table as the input
// (gerbil-fuse-embedding) comes with ids and the embedding's output; a table it cannot read is refused.
TEST(GroupedGemvKernelSpec, BindingsInOrder) {
  codegen::GroupedGemvSpec spec;
  spec.qkv = true, spec.k = 64, spec.nq = 64, spec.nk = 32, spec.nv = 32, spec.weight = plan::DType::F16;
  spec.norm = true, spec.biases = {true, false, true}, spec.embedding = true, spec.table = plan::DType::F16;
  spec.vocab = 100;
  std::vector<std::string> names;
  for (const codegen::KernelBinding &b : codegen::groupedGemvKernel(spec).bindings) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ids", "x", "embedding", "w_q", "w_k", "w_v", "g", "bias_q",
                                             "bias_v", "result_q", "result_k", "result_v"}));
  spec.weight = plan::DType::F32; // an f16 table beside f32 matrices
  EXPECT_THROW(codegen::groupedGemvKernel(spec), codegen::CodegenError);
  codegen::GroupedGemvSpec gateUp;
  gateUp.k = 64, gateUp.n = 96, gateUp.weight = plan::DType::F16;
  names.clear();
  for (const codegen::KernelBinding &b : codegen::groupedGemvKernel(gateUp).bindings) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "w_gate", "w_up", "result"}));
  EXPECT_EQ(codegen::groupedGemvGrid(gateUp)[0], (96 + mlir::gerbil::gemvShape(64, 96, true).outputs() - 1) /
                                                     mlir::gerbil::gemvShape(64, 96, true).outputs());
}

// Prefetch workers (gerbil-prefetch-weights' spread-pages) before the gemv's own workgroups leave its result
// as it is: words a page apart and every word, several bindings, one over several workers, with and without
// subgroup operations; and the grid holds them.
TEST_F(GemvKernelTest, PrefetchWorkersLeaveTheResultAsItIs) {
  const std::vector<codegen::PrefetchRange> ranges[] = {
      {{1 << 20, 4096}}, {{300 << 10, 65536}, {16}, {4096, 4096}}, {{256 << 10}, {48}}};
  for (const auto &prefetch : ranges)
    for (bool subgroupOps : {true, false}) {
      codegen::GemvSpec spec;
      spec.n = 300, spec.k = 520, spec.weight = plan::DType::F16, spec.norm = true, spec.residual = true;
      spec.eps = 1e-5, spec.subgroupOps = subgroupOps, spec.prefetch = prefetch;
      checkGemv(spec);
      ASSERT_FALSE(HasFatalFailure());
    }
  codegen::GemvSpec plain;
  plain.n = 300, plain.k = 520, plain.weight = plan::DType::F16;
  codegen::GemvSpec prefetching = plain;
  prefetching.prefetch = {{256 << 10}, {48}}; // 4 workers of 64 KiB, and one
  const int64_t workgroup = codegen::gemvKernel(plain).workgroup[0];
  EXPECT_EQ(codegen::gemvGrid(prefetching)[0],
            codegen::gemvGrid(plain)[0] + codegen::prefetchWorkers(prefetching.prefetch, workgroup));
  EXPECT_GT(codegen::prefetchWorkers(prefetching.prefetch, workgroup), 1);
}

// The logits projection that also picks the greedy token (ARGMAX; gerbil-fuse-logits-argmax), as
// Plan::lastRowLogits runs it on a prefill's last row (firstRow 2 of 3 rows) and as decode runs it (firstRow
// 0): the logits of that row, the first index of their largest (two equal largest rows, in different
// workgroups), the input id, the state's token list and position, and the counter back at 0, over two
// launches. Vocabularies of one workgroup (6 rows), of two (one counter) and of 375 and 2500 (a tree of
// counters, in runs of 128 workgroups).
TEST_F(GemvKernelTest, ArgmaxPicksTheFirstLargestLogit) {
  for (int64_t n : {6l, 16l, 3000l, 20000l})
    for (bool subgroupOps : {true, false})
      for (uint32_t firstRow : {2u, 0u}) {
        const int64_t k = 64, rows = 3;
        std::mt19937 rng(static_cast<uint32_t>(n + firstRow));
        std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
        std::vector<float> x(rows * k), w(n * k);
        for (float &v : x) v = uniform(rng);
        for (float &v : w) v = weightValue(rng);
        const float *row = x.data() + firstRow * k;
        const int64_t first = n / 3 + 1, second = n - 2; // the largest logit, twice
        for (int64_t i = 0; i < k; ++i) w[first * k + i] = w[second * k + i] = row[i] > 0 ? 1.0f : -1.0f;
        codegen::GemvSpec spec;
        spec.n = n, spec.k = k, spec.weight = plan::DType::F16, spec.norm = true, spec.normWeighted = false;
        spec.eps = 1e-5, spec.subgroupOps = subgroupOps, spec.rowFromPush = true, spec.argmax = true;
        spec.maxSequence = 8;
        codegen::KernelSource source = codegen::gemvKernel(spec);
        std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "gemv argmax kernel");
        const codegen::GemvScratch scratch = codegen::gemvScratch(spec);
        std::vector<vk::Buffer> buffers;
        buffers.push_back(upload(x, "x"));
        std::vector<uint8_t> packed = packWeights(w, spec.weight);
        buffers.push_back(upload(packed.data(), packed.size(), "w"));
        buffers.push_back(output(rows * n, "result"));
        buffers.push_back(output(1, "token"));
        buffers.push_back(output(1, "ids"));
        buffers.push_back(ctx_->createBuffer(scratch.partialBytes, "partial"));
        buffers.push_back(ctx_->createBuffer(std::max<uint64_t>(scratch.counterBytes, 16), "counters"));
        ctx_->fill(buffers.back(), 0);
        buffers.push_back(state(5));
        ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
        const std::string where = "N=" + std::to_string(n) + " firstRow=" + std::to_string(firstRow) +
                                  " subgroup ops=" + std::to_string(subgroupOps);
        for (uint32_t launch = 0; launch < 2; ++launch) {
          run(spirv, buffers, codegen::gemvGrid(spec), 1, "gemv argmax kernel", 1, firstRow);
          std::vector<float> logits = download(buffers[2], rows * n);
          const double scale = inverseRms(row, k, spec.eps);
          for (int64_t r = 0; r < n; r += 97) {
            double sum = 0;
            for (int64_t i = 0; i < k; ++i) sum += double(row[i]) * w[r * k + i];
            ASSERT_NEAR(logits[firstRow * n + r], sum * scale, 1e-3) << where << ": logit " << r;
          }
          ASSERT_EQ(logits[firstRow * n + first], logits[firstRow * n + second]) << where;
          int32_t token = -1, id = -1, counter = -1;
          ctx_->download(buffers[3], 0, &token, 4);
          ctx_->download(buffers[4], 0, &id, 4);
          ctx_->download(buffers[6], 0, &counter, 4);
          EXPECT_EQ(token, first) << where;
          EXPECT_EQ(id, first) << where;
          EXPECT_EQ(counter, 0) << where << ": the counter was left behind";
          std::vector<uint32_t> words(4);
          ctx_->download(buffers[7], 0, words.data(), 16);
          EXPECT_EQ(words[0], 5 + (launch + 1) * (firstRow + 1)) << where << ": the position moves on by T";
          EXPECT_EQ(words[1], launch + 1) << where << ": generated tokens";
          EXPECT_EQ(words[2 + launch], static_cast<uint32_t>(first)) << where << ": the state's token list";
          ASSERT_FALSE(HasFatalFailure());
        }
      }
}

TEST(GemvKernelSpec, ArgmaxNeedsALogitsProjection) {
  codegen::GemvSpec spec;
  spec.n = 64, spec.k = 64, spec.argmax = true, spec.maxSequence = 8;
  EXPECT_THROW(codegen::gemvKernel(spec), codegen::CodegenError); // not from firstRow
  spec.rowFromPush = true, spec.residual = true;
  EXPECT_THROW(codegen::gemvKernel(spec), codegen::CodegenError);
  spec.residual = false, spec.maxSequence = 0;
  EXPECT_THROW(codegen::gemvKernel(spec), codegen::CodegenError);
  spec.maxSequence = 8;
  EXPECT_NO_THROW(codegen::gemvKernel(spec));
  // The gemv's grid; more workgroups than one workgroup's invocations hand their candidates up a tree.
  const mlir::gerbil::ArgmaxGrid qwen = mlir::gerbil::gemvArgmaxGrid(896, 151936),
                                 small = mlir::gerbil::gemvArgmaxGrid(64, 512);
  EXPECT_EQ(qwen.groups, 18992);
  EXPECT_EQ(qwen.segments, 149);
  EXPECT_EQ(qwen.counters(), 150);
  EXPECT_EQ(qwen.candidates(), 18992 + 149);
  EXPECT_EQ(small.groups, 64);
  EXPECT_EQ(small.counters(), 1);
  EXPECT_EQ(small.candidates(), 64);
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
  EXPECT_EQ(gemvShape(896, 1152, false).split, 4); // short rows of few pairs: four teams (sweeps cw, cx)
  EXPECT_EQ(gemvShape(896, 8192, false).split, 2); // short rows of more pairs: two teams
  EXPECT_EQ(gemvShape(256, 1152, false).split, 1); // shorter: a team has every load in flight already
  EXPECT_EQ(gemvShape(896, 4864, true).split, 1);  // short rows, but pairs enough for the whole GPU
  for (auto [k, n] : {std::pair<int64_t, int64_t>{4096, 4096}, {4864, 896}, {64, 64}}) {
    mlir::gerbil::GemvShape shape = gemvShape(k, n, false);
    EXPECT_EQ(shape.workgroup, shape.rows / 2 * shape.split * 32) << k << "x" << n;
  }
}

} // namespace
