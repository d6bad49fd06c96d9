// The attention kernels, as codegen specialises them, against a double-precision reference. Prefill: prompts
// across query and key tiles, after earlier positions in the cache, grouped-query heads, sliding windows and
// head dims that do not split evenly over the lanes (the tensor-core variant each way, NV or KHR, that the
// device has). Decode: one query over one workgroup's warps and over many splits.
#include "compiler/codegen/AttentionKernel.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/KernelShapes.h"
#include "test/unit/kernels/KernelTestBase.h"

#include <cmath>
#include <span>

using namespace gerbil;
using namespace gerbil::kerneltest;

namespace {

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
  // The cached key at position p is scaled by 1 + keyGrowth · p, so that later keys score higher.
  float keyGrowth = 0;
  // Where not 0, the keys from this position on are scaled by 256, and every input is a multiple of 1/8 so
  // that f16 holds it and the scores are exact: the first of those keys outscore the earlier ones by far
  // more than exp() can span.
  uint32_t loudKeysFrom = 0;
  // The tensor-core kernel's RESCALE_SLACK where not null (a smaller one rescales more often).
  const char *rescaleSlack = nullptr;
};

class AttentionKernelTest : public KernelTestBase {
protected:
  // coop: the tensor-core kernel (f16 queries, keys, values and probabilities): compiled and validated
  // everywhere, run each way (NV, KHR) the device has.
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
    for (int64_t at = 0; at < kvHeads * seq; ++at)
      for (int64_t d = 0; d < dim; ++d) keys[at * dim + d] *= 1 + c.keyGrowth * static_cast<float>(at % seq);
    if (c.loudKeysFrom) {
      for (std::vector<float> *inputs : {&q, &keys, &values})
        for (float &v : *inputs) v = std::round(v * 8) / 8;
      for (int64_t at = 0; at < kvHeads * seq; ++at)
        if (at % seq >= c.loudKeysFrom)
          for (int64_t d = 0; d < dim; ++d) keys[at * dim + d] *= 256;
    }

    if (halfCache_) roundToHalf(keys, values);

    std::vector<double> expected(q.size());
    for (uint32_t i = 0; i < t; ++i)
      for (int64_t h = 0; h < heads; ++h)
        referenceAttention(spec, &q[(i * heads + h) * dim], keys, values, h, c.start + i,
                           &expected[(i * heads + h) * dim]);

    codegen::KernelSource source = codegen::attentionKernel(spec, coop);
    if (halfCache_) {
      ASSERT_EQ(codegen::holdCacheInHalf(source), 2);
    }
    if (c.rescaleSlack) source.defines.emplace_back("RESCALE_SLACK", c.rescaleSlack);
    if (coop) {
      const bool shared = std::find(source.defines.begin(), source.defines.end(),
                                    std::pair<std::string, std::string>("ATTENTION_SHARED_KEYS", "1")) !=
                          source.defines.end();
      // The heads of a kv head in one workgroup where they are 4 (its subgroups) and the keys unsplit.
      const int64_t splits =
          spec.keySplits > 0 ? spec.keySplits : mlir::gerbil::coopAttentionKeySplits(spec.heads);
      EXPECT_EQ(shared, spec.heads / spec.kvHeads == 4 && splits == 1)
          << spec.heads << " heads, " << spec.kvHeads << " kv heads, " << splits << " splits";
    }
    const std::vector<CooperativeWay> ways =
        coop ? compileCooperative(source, "attention test kernel")
             : std::vector<CooperativeWay>{{"", compiler_.compile(source, "attention test kernel")}};
    if (ways.empty()) {
      EXPECT_LE(source.sharedMemoryBytes, 48u * 1024);
      GTEST_SKIP() << ctx_->info().name << " runs no cooperative matrices (compiled and validated only)";
    }
    for (const CooperativeWay &way : ways) {
      SCOPED_TRACE(way.name);
      runAndCompare(c, coop, source, way.spirv, q, keys, values, expected);
      if (HasFatalFailure()) return;
    }
  }

  void runAndCompare(const AttentionCase &c, bool coop, const codegen::KernelSource &source,
                     const std::vector<uint32_t> &spirv, const std::vector<float> &q,
                     const std::vector<float> &keys, const std::vector<float> &values,
                     const std::vector<double> &expected) {
    const codegen::AttentionSpec &spec = c.spec;
    const int64_t dim = spec.headDim;
    const uint32_t t = c.tokens;
    ASSERT_LE(source.sharedMemoryBytes, ctx_->info().maxSharedMemoryBytes);
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(q, "q"));
    buffers.push_back(uploadCache(keys, "k_cache"));
    buffers.push_back(uploadCache(values, "v_cache"));
    buffers.push_back(output(q.size(), "result"));
    const codegen::AttentionScratch scratch =
        coop ? codegen::coopAttentionScratch(spec, t) : codegen::AttentionScratch{};
    if (coop) {
      buffers.push_back(ctx_->createBuffer(scratch.partialBytes, "partial"));
      buffers.push_back(ctx_->createBuffer(scratch.counterBytes, "counters"));
      ctx_->fill(buffers.back(), 0);
    }
    buffers.push_back(state(c.start));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    // Twice with the key splits: each tile's last split must leave its counter at 0 for the next launch.
    for (int launch = 0; launch < (coop ? 2 : 1); ++launch) {
      // NaN (in both halves of a word for f16 results): every output must be written again.
      ctx_->fill(buffers[3], spec.halfResult ? 0x7e007e00u : 0x7fc00000u);
      run(spirv, buffers, codegen::attentionGrid(spec, t, coop), t, "attention test kernel");
      const std::vector<float> result = download(buffers[3], q.size(), spec.halfResult);
      // f16 operands: a score is off by up to ~1e-3 of its size, a probability by 1e-3 relative (and an f16
      // result by 1/2048 of its size).
      const double tolerance = coop ? 1.5e-2 : 1e-4;
      for (size_t i = 0; i < result.size(); ++i)
        ASSERT_NEAR(result[i], expected[i], tolerance)
            << "T=" << t << " start=" << c.start << " head_dim=" << dim << " window=" << spec.window
            << " coop=" << coop << " f16 cache=" << halfCache_ << " key splits=" << spec.keySplits
            << " key tile=" << spec.keyTile << " launch " << launch << ": element " << i;
      if (coop) {
        std::vector<int32_t> counters(scratch.counterBytes / 4);
        ctx_->download(buffers[5], 0, counters.data(), scratch.counterBytes);
        for (int32_t counter : counters) ASSERT_EQ(counter, 0) << "a query tile's counter was left behind";
      }
    }
  }

  // gerbilc --kv-dtype f16: the cache holds the keys and values rounded to f16, which the reference then
  // reads too (the kernels compute in f32 as with an f32 cache, so the tolerances stay).
  static void roundToHalf(std::vector<float> &keys, std::vector<float> &values) {
    for (std::vector<float> *cache : {&keys, &values})
      for (float &v : *cache) v = static_cast<float>(static_cast<_Float16>(v));
  }
  vk::Buffer uploadCache(const std::vector<float> &cache, const std::string &name) {
    if (!halfCache_) return upload(cache, name);
    const std::vector<uint8_t> bytes = packWeights(cache, plan::DType::F16);
    return upload(bytes.data(), bytes.size(), name);
  }

  bool halfCache_ = false;
};

// Decode: the query at `position` against the cache, split over the cached positions; each case runs
// twice (the last split of each column must leave its counter at 0 for the next step).
struct DecodeCase {
  codegen::AttentionSpec spec;
  uint32_t position;
};

class DecodeAttentionKernelTest : public AttentionKernelTest {
protected:
  // `choice` replaces the catalog's query heads, warps or splits where not 0 (gerbil-kernel-bench's
  // variants); prefetch: weights for the kernel's prefetch workgroups to read (each buffer 4 KiB longer than
  // the range). scoreLanes, where not 0, replaces codegen's lanes a key's scores.
  void check(const DecodeCase &c, bool subgroupOps, const mlir::gerbil::DecodeAttentionChoice &choice = {},
             const std::vector<codegen::PrefetchRange> &prefetch = {}, int64_t scoreLanes = 0) {
    codegen::AttentionSpec spec = c.spec;
    spec.halfCache = halfCache_; // the model's shape for its cache
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
    if (halfCache_) roundToHalf(keys, values);

    std::vector<double> expected(q.size());
    for (int64_t h = 0; h < heads; ++h)
      referenceAttention(spec, &q[h * dim], keys, values, h, c.position, &expected[h * dim]);

    codegen::DecodeAttentionKernel kernel =
        codegen::decodeAttentionKernel(spec, subgroupOps, choice, prefetch, scoreLanes);
    if (halfCache_) {
      ASSERT_EQ(codegen::holdCacheInHalf(kernel.source), 2);
    }
    setDefines(kernel.source, defines_);
    ASSERT_LE(kernel.source.sharedMemoryBytes, ctx_->info().maxSharedMemoryBytes);
    std::vector<uint32_t> spirv =
        compiler_.compile(codegen::writeKernel(kernel.source), "decode attention test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(q, "q"));
    buffers.push_back(uploadCache(keys, "k_cache"));
    buffers.push_back(uploadCache(values, "v_cache"));
    buffers.push_back(output(q.size(), "result"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchPartialBytes, "partial"));
    buffers.push_back(ctx_->createBuffer(kernel.scratchCounterBytes, "counters"));
    ctx_->fill(buffers.back(), 0);
    for (const codegen::PrefetchRange &range : prefetch) {
      std::vector<float> weights(static_cast<size_t>(range.bytes / 4 + 1024));
      for (float &v : weights) v = uniform(rng);
      buffers.push_back(upload(weights, "prefetched weights"));
    }
    buffers.push_back(state(c.position));
    ASSERT_EQ(buffers.size(), kernel.source.bindings.size() + 1);
    for (int run = 0; run < 2; ++run) {
      ctx_->fill(buffers[3], 0x7fc00000u); // NaN again: the second step must write every output too
      this->run(spirv, buffers, kernel.grid, 1, "decode attention test kernel");
      std::vector<float> result = download(buffers[3], q.size());
      for (size_t i = 0; i < result.size(); ++i)
        ASSERT_NEAR(result[i], expected[i], 1e-4)
            << "heads=" << heads << "/" << kvHeads << " head_dim=" << dim << " position=" << c.position
            << " window=" << spec.window << " subgroup ops=" << subgroupOps << " query heads "
            << choice.queryHeads << " warps " << choice.warps << " splits " << choice.splits
            << " score lanes " << scoreLanes << " f16 cache " << halfCache_ << " run " << run << ": element "
            << i;
      std::vector<int32_t> counters(kernel.scratchCounterBytes / 4);
      ctx_->download(buffers[5], 0, counters.data(), kernel.scratchCounterBytes);
      for (int32_t counter : counters) ASSERT_EQ(counter, 0) << "a column's counter was left behind";
    }
  }

  // Every case with subgroup operations, up to the first that fails.
  void checkEach(std::span<const DecodeCase> cases) {
    for (const DecodeCase &c : cases) {
      check(c, true);
      if (HasFatalFailure()) return;
    }
  }

  // Variants of the kernel (gerbilc --kernel-define attention_decode:NAME=VALUE).
  KernelDefines defines_;
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
  checkEach(cases);
  ASSERT_FALSE(HasFatalFailure());
  // The reductions through shared memory alone (gerbilc --no-subgroup-ops).
  for (const DecodeCase &c : {cases[1], cases[3], cases[7], cases[12]}) {
    check(c, false);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST_F(DecodeAttentionKernelTest, OtherShapesMatchTheReference) {
  // Fewer query heads a workgroup and other warp counts than the catalog's (gerbil-kernel-bench
  // --query-heads, --warps): Qwen's 7 query heads a kv head one a workgroup, with 2 warps (several rounds
  // a split); 2 of the 8B's 4 with 4 warps; a lone warp over several splits; then the 8B's two on an f16
  // cache.
  const struct {
    DecodeCase c;
    int64_t queryHeads, warps;
  } variants[] = {
      {{{14, 2, 64, 400, 0.125, 0}, 191}, 1, 2},
      {{{32, 8, 128, 400, 0.088, 0}, 255}, 2, 4},
      {{{4, 1, 16, 400, 0.25, 0}, 300}, 2, 1},
  };
  for (const auto &v : variants) {
    check(v.c, true, {v.queryHeads, v.warps});
    ASSERT_FALSE(HasFatalFailure());
  }
  check(variants[0].c, false, {variants[0].queryHeads, variants[0].warps});
  ASSERT_FALSE(HasFatalFailure());
  // Two of the 8B's query heads a workgroup on an f16 cache (the catalog's one there; gerbilc's
  // @decode-query-heads=2), with the catalog's warps.
  halfCache_ = true;
  check(variants[1].c, true, {2, 0});
}

// Fewer splits than the catalog's (gerbil-kernel-bench --splits, gerbilc's @decode-splits=) at positions past
// what one split takes alone: each split's warps walk several blocks of keys (a whole context in one split,
// 1100 positions in 3 of ~367, 2000 in 2 of 1000), with both reduction paths and both caches.
TEST_F(DecodeAttentionKernelTest, FewerSplitsMatchTheReference) {
  check({{14, 2, 64, 1200, 0.125, 0}, 1100}, true, {0, 0, 1});
  ASSERT_FALSE(HasFatalFailure());
  check({{14, 2, 64, 1200, 0.125, 0}, 1100}, false, {0, 0, 3});
  ASSERT_FALSE(HasFatalFailure());
  halfCache_ = true;
  check({{8, 2, 128, 2100, 0.088, 0}, 2000}, true, {0, 0, 2});
}

// Keys whose scores several lanes share (SCORE_LANES; codegen's default is 4 wherever it fits): powers of 2
// up to the device's subgroup, a key per lane (1), within a block and over several rounds and splits,
// with keys and values loaded together (head dim 64) and apart (128), one and several query heads.
TEST_F(DecodeAttentionKernelTest, KeysSharedByLanesMatchTheReference) {
  EXPECT_EQ(codegen::decodeScoreLanes({32, 8, 128, 400, 0.088, 0}, true), 4);
  EXPECT_EQ(codegen::decodeScoreLanes({32, 8, 128, 400, 0.088, 0}, false), 1);
  EXPECT_EQ(codegen::decodeScoreLanes({4, 2, 256, 400, 0.06, 0}, true), 1); // not all of a row at once
  EXPECT_EQ(codegen::decodeScoreLanes({3, 3, 72, 400, 0.11, 0}, true), 1);  // 18 vec4s
  const DecodeCase cases[] = {{{14, 2, 64, 400, 0.125, 0}, 191},
                              {{32, 8, 128, 400, 0.088, 0}, 300},
                              {{4, 1, 16, 400, 0.25, 0}, 20},
                              {{64, 64, 16, 2100, 0.25, 0}, 2099}};
  for (int64_t lanes : {1, 2, 8})
    for (const DecodeCase &c : cases) {
      if (c.spec.headDim / 4 % lanes != 0) continue; // head dim 16: 4 vec4s
      check(c, true, {}, {}, lanes);
      ASSERT_FALSE(HasFatalFailure());
    }
  // Wider groups where the device's subgroups hold them (the H200's 32; lavapipe's 8 do not).
  if (ctx_->info().minSubgroupSize >= 32) {
    check(cases[1], true, {1, 8}, {}, 32);
    ASSERT_FALSE(HasFatalFailure());
  }
  if (ctx_->info().minSubgroupSize >= 16) check(cases[0], true, {1, 2}, {}, 16);
}

// gerbil-prefetch-weights: grid rows past the splits whose workgroups only read weights into the L2 leave
// the attention's result as it is: several bindings, reads that end within a workgroup's chunk, a 16-byte
// one, one over several rows of workers, words a page apart (address translations), all 8 bindings; with
// both reduction paths.
TEST_F(DecodeAttentionKernelTest, PrefetchingWorkgroupsLeaveTheResultAsItIs) {
  check({{14, 2, 64, 400, 0.125, 0}, 130}, true, {}, {{16}, {3 * 65536 + 4096}, {65536}, {4096}});
  ASSERT_FALSE(HasFatalFailure());
  check({{32, 8, 128, 400, 0.088, 0}, 255}, false, {}, {{100000}, {100000, 4096}});
  ASSERT_FALSE(HasFatalFailure());
  check({{4, 1, 16, 400, 0.25, 0}, 31}, true, {},
        {{256 << 10}, {16, 4096}, {4096, 4096}, {8192, 4096}, {300 << 10, 65536}, {32}, {48}, {64, 32}});
}

// gerbilc --kv-dtype f16: the decode kernel reads an f16 cache (f16vec4 loads), with keys whose scores
// lanes share and a key per lane, keys and values loaded together (head dim 64) and apart (128), over
// several splits, rows that are no multiple of 4 (a value at a time), both reduction paths.
TEST_F(DecodeAttentionKernelTest, HalfCacheMatchesTheReference) {
  halfCache_ = true;
  const DecodeCase cases[] = {{{14, 2, 64, 400, 0.125, 0}, 191},
                              {{32, 8, 128, 400, 0.088, 0}, 300},
                              {{64, 64, 16, 2100, 0.25, 0}, 2099},
                              {{6, 2, 18, 400, 0.2, 0}, 45}};
  checkEach(cases);
  ASSERT_FALSE(HasFatalFailure());
  check(cases[1], true, {}, {}, 1);
  ASSERT_FALSE(HasFatalFailure());
  check(cases[0], false);
}

// The cases of the kernel's timing variants: one block, several rounds and splits (128 and 64 dims), many
// splits, a sliding window.
const DecodeCase kVariantCases[] = {{{32, 8, 128, 400, 0.088, 0}, 20},
                                    {{32, 8, 128, 400, 0.088, 0}, 300},
                                    {{14, 2, 64, 400, 0.125, 0}, 300},
                                    {{8, 8, 128, 1100, 0.088, 0}, 1000},
                                    {{4, 2, 64, 400, 0.125, 100}, 350}};

// ATTENTION_EARLY_VALUES: heads of 128 dims (keys and values apart) issue the values' loads before the
// block's softmax (64 dims load them with the keys either way); both reduction paths, an f16 cache.
TEST_F(DecodeAttentionKernelTest, EarlyValuesMatchTheReference) {
  defines_ = {{"ATTENTION_EARLY_VALUES", "1"}};
  checkEach(kVariantCases);
  ASSERT_FALSE(HasFatalFailure());
  check(kVariantCases[1], false);
  ASSERT_FALSE(HasFatalFailure());
  halfCache_ = true;
  check(kVariantCases[3], true);
}

// ATTENTION_VALUES_FIRST, the default: where the values are loaded with the keys, the first block's before
// the queries' barrier. After it (0), as before, gives the same results: one block, several rounds and
// splits, a sliding window, both caches.
TEST_F(DecodeAttentionKernelTest, ValuesAfterTheQueriesMatchTheReference) {
  defines_ = {{"ATTENTION_VALUES_FIRST", "0"}};
  checkEach(kVariantCases);
  ASSERT_FALSE(HasFatalFailure());
  halfCache_ = true;
  checkEach(kVariantCases);
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
  // 64 keys staged at a time (gerbil-kernel-bench --key-tile), which head dims up to 64 fit.
  for (AttentionCase c : {cases[1], cases[4], cases[5]}) {
    c.spec.keyTile = 64;
    check(c, true);
    ASSERT_FALSE(HasFatalFailure());
  }
}

// ATTENTION_SHARED_KEYS, which codegen sets for 4 heads a kv head (Llama-3's grouping) unsplit: a
// workgroup takes 16 queries of the 4 heads: head dims 64 and 128, one query, queries across 16-query tiles
// and the grid's 64-query rows, after earlier positions, a sliding window, f16 results; and where it does
// not apply (2 heads a kv head, or key splits) the usual kernel.
TEST_F(AttentionKernelTest, PrefillWithSharedKeysMatchesTheReference) {
  auto unsplit = [](codegen::AttentionSpec spec, uint32_t tokens, uint32_t start) {
    if (spec.keySplits == 0) spec.keySplits = 1;
    return AttentionCase{spec, tokens, start};
  };
  codegen::AttentionSpec half{8, 2, 128, 300, 0.088, 0};
  half.halfResult = true;
  codegen::AttentionSpec split{8, 2, 64, 300, 0.125, 0};
  split.keySplits = 4;
  const AttentionCase cases[] = {
      unsplit({4, 1, 64, 300, 0.125, 0}, 1, 0),
      unsplit({8, 2, 128, 300, 0.088, 0}, 130, 0),
      unsplit({8, 2, 128, 300, 0.088, 0}, 37, 150),
      unsplit({4, 1, 64, 300, 0.125, 40}, 150, 20),
      unsplit(half, 77, 3),
      unsplit({8, 4, 32, 300, 0.17, 0}, 50, 5),
      unsplit(split, 90, 10),
  };
  for (const AttentionCase &c : cases) {
    check(c, true);
    ASSERT_FALSE(HasFatalFailure());
  }
}

// gerbilc --kv-dtype f16: both prefill kernels read an f16 cache (the tensor-core one with f16vec4 loads;
// compiled and validated only where the device has no cooperative matrices).
TEST_F(AttentionKernelTest, PrefillReadsAHalfCache) {
  halfCache_ = true;
  const AttentionCase cases[] = {{{4, 2, 32, 160, 0.17, 0}, 37, 50}, {{3, 3, 72, 160, 0.11, 0}, 45, 20}};
  for (const AttentionCase &c : cases) {
    check(c);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST_F(AttentionKernelTest, PrefillOnCooperativeMatricesReadsAHalfCache) {
  halfCache_ = true;
  check({{4, 2, 128, 300, 0.088, 0}, 37, 150}, true);
  ASSERT_FALSE(HasFatalFailure());
  check({{4, 2, 64, 300, 0.125, 40}, 150, 20}, true);
}

TEST_F(AttentionKernelTest, PrefillKeySplitsMatchTheReference) {
  // The keys of a query tile split between workgroups: more splits than key tiles, runs of unequal
  // length, splits whose keys some rows of the tile do not see (causal, window), a long history.
  const AttentionCase cases[] = {
      {{4, 2, 64, 700, 0.125, 0}, 256, 0},  {{4, 2, 64, 700, 0.125, 0}, 100, 300},
      {{2, 1, 128, 700, 0.088, 0}, 200, 7}, {{4, 2, 64, 700, 0.125, 70}, 150, 100},
      {{4, 1, 16, 700, 0.25, 0}, 20, 0},
  };
  for (int64_t splits : {1, 2, 3, 8})
    for (AttentionCase c : cases) {
      c.spec.keySplits = splits;
      c.spec.halfResult = splits % 2 == 0; // f16 results, as for a tensor-core o projection
      c.spec.keyTile = splits == 3 && c.spec.headDim <= 64 ? 64 : 0;
      check(c, true);
      ASSERT_FALSE(HasFatalFailure());
    }
}

TEST_F(AttentionKernelTest, PrefillRescalesAsScoresGrow) {
  // Keys that score higher the later they are: rows' maxima grow past the kernel's slack after a few key
  // tiles (with a slack of 1, every tile or two), so the outputs are rescaled mid-way; and keys that outscore
  // all before them by so much that the factor underflows to 0 (from position 300, mid-tile, with a scale
  // that f16 holds exactly).
  const AttentionCase cases[] = {
      {{4, 2, 64, 400, 0.125, 0}, 300, 0, 0.01f, 0, "1.0"},
      {{2, 1, 128, 400, 0.0625, 0}, 100, 200, 0.01f, 0, "1.0"},
      {{4, 2, 64, 400, 0.125, 0}, 300, 0, 0.02f},
      {{4, 2, 64, 400, 0.125, 0}, 64, 280, 0, 300},
  };
  for (int64_t splits : {1, 3})
    for (AttentionCase c : cases) {
      c.spec.keySplits = splits;
      c.spec.keyTile = splits == 3 && c.spec.headDim <= 64 ? 64 : 0;
      check(c, true);
      ASSERT_FALSE(HasFatalFailure());
    }
}

TEST(AttentionKernelSpec, PrefetchAddsBindingsAndRowsOfWorkers) {
  const codegen::AttentionSpec spec{14, 2, 64, 1024, 0.125, 0};
  codegen::DecodeAttentionKernel plain = codegen::decodeAttentionKernel(spec, true);
  ASSERT_LE(plain.source.workgroup[0], 256); // so that each invocation of a worker issues 16 loads
  const int64_t workerBytes = 16 * 16 * plain.source.workgroup[0];
  codegen::DecodeAttentionKernel prefetching =
      codegen::decodeAttentionKernel(spec, true, {}, {{workerBytes * 20 + 16}, {32}});
  ASSERT_EQ(prefetching.source.bindings.size(), plain.source.bindings.size() + 2);
  EXPECT_EQ(prefetching.source.bindings.back().name, "prefetch1");
  // 21 + 1 workers on rows of 14 columns: two rows past the splits.
  EXPECT_EQ(prefetching.grid[0], plain.grid[0]);
  EXPECT_EQ(prefetching.grid[1], plain.grid[1] + 2);
  // Words a page apart: a worker's reads span 16 · workerBytes / 16 pages of 4 KiB... 50 pages, one worker.
  codegen::DecodeAttentionKernel touching =
      codegen::decodeAttentionKernel(spec, true, {}, {{50 * 4096, 4096}});
  EXPECT_EQ(touching.grid[1], plain.grid[1] + 1);
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, std::vector<codegen::PrefetchRange>(9, {32})),
               codegen::CodegenError);
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {{24}}), codegen::CodegenError);
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {{0}}), codegen::CodegenError);
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {{32, 8}}), codegen::CodegenError);
  // More rows of workers than the 65535 every device dispatches along y.
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {{workerBytes * 14 * 65535}}),
               codegen::CodegenError);
}

TEST(AttentionKernelSpec, ScoreLanesMustDivideTheRow) {
  const codegen::AttentionSpec spec{14, 2, 64, 1024, 0.125, 0};
  EXPECT_NO_THROW(codegen::decodeAttentionKernel(spec, true, {}, {}, 16));
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {}, 32), codegen::CodegenError); // 16 vec4s
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, true, {}, {}, 3), codegen::CodegenError);
  EXPECT_THROW(codegen::decodeAttentionKernel(spec, false, {}, {}, 4), codegen::CodegenError);
  EXPECT_THROW(codegen::decodeAttentionKernel({4, 2, 256, 400, 0.06, 0}, true, {}, {}, 4),
               codegen::CodegenError);
  const std::string glsl = codegen::writeKernel(codegen::decodeAttentionKernel(spec, true).source);
  EXPECT_NE(glsl.find("#define SCORE_LANES 4"), std::string::npos);
  EXPECT_NE(glsl.find("GL_KHR_shader_subgroup_shuffle"), std::string::npos);
  EXPECT_EQ(
      codegen::writeKernel(codegen::decodeAttentionKernel(spec, false).source).find("#define SCORE_LANES 4"),
      std::string::npos);
}

TEST(AttentionKernelSpec, KeySplitsAreBounded) {
  codegen::AttentionSpec spec{4, 2, 64, 100, 0.1, 0};
  spec.keySplits = mlir::gerbil::kCoopAttentionMaxKeySplits + 1;
  EXPECT_THROW(codegen::attentionKernel(spec, true), codegen::CodegenError);
  spec.keySplits = 3;
  EXPECT_EQ(codegen::attentionGrid(spec, 65, true)[2], 3u);
  spec.halfResult = true; // the tensor-core kernel's only
  EXPECT_THROW(codegen::attentionKernel(spec, false), codegen::CodegenError);
  spec.halfResult = false;
  EXPECT_EQ(codegen::attentionGrid(spec, 65, false)[2], 1u);
  // The catalog's: split only the few heads whose query tiles leave multiprocessors idle (sweep z).
  spec.keySplits = 0;
  EXPECT_EQ(codegen::attentionGrid(spec, 512, true)[2], 4u); // 4 heads
  spec.heads = 32, spec.kvHeads = 8;
  EXPECT_EQ(codegen::attentionGrid(spec, 512, true)[2], 1u);
  EXPECT_EQ(codegen::coopAttentionScratch(spec, 512).counterBytes, 16u); // unsplit: nothing to hand over
}

TEST(AttentionKernelSpec, TensorCoresTakeHeadDimsThatFit) {
  EXPECT_TRUE(mlir::gerbil::fitsCoopAttention(64));
  EXPECT_TRUE(mlir::gerbil::fitsCoopAttention(128));
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(72));  // not a multiple of 16
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(256)); // its output fragments would not fit the registers
  EXPECT_TRUE(mlir::gerbil::fitsCoopAttention(64, 64));
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(128, 64)); // 64-key tiles of 128 dims do not fit 48 KiB
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(64, 16));  // the key and value tiles stage the queries
  EXPECT_FALSE(mlir::gerbil::fitsCoopAttention(64, 40));  // not a multiple of 16
  codegen::AttentionSpec spec{4, 2, 40, 100, 0.1, 0};
  EXPECT_THROW(codegen::attentionKernel(spec, true), codegen::CodegenError);
}

// 64-key tiles where the subgroups share a kv head's keys and the tiles fit; 32 elsewhere (and as asked).
TEST(AttentionKernelSpec, TensorCoreKeyTileBySharedKeys) {
  EXPECT_EQ(mlir::gerbil::coopAttentionKeyTile(64, true), 64);
  EXPECT_EQ(mlir::gerbil::coopAttentionKeyTile(64, false), 32);
  EXPECT_EQ(mlir::gerbil::coopAttentionKeyTile(128, true), 32); // 64 keys of 128 dims do not fit 48 KiB
  auto keyTile = [](const codegen::AttentionSpec &spec) {
    return defineValue(codegen::attentionKernel(spec, true), "KV_TILE");
  };
  codegen::AttentionSpec spec{32, 8, 64, 256, 0.125, 0}; // Llama-3.2-1B: 4 heads a kv head, shared
  EXPECT_EQ(keyTile(spec), "64u");
  spec.keyTile = 32;
  EXPECT_EQ(keyTile(spec), "32u");
  codegen::AttentionSpec unshared{14, 2, 64, 256, 0.125, 0}; // Qwen2.5-0.5B: 7 heads a kv head
  EXPECT_EQ(keyTile(unshared), "32u");
}

// fitsCoopAttention decides from coopAttentionSharedBytes whether a shape fits 48 KiB before any kernel is
// compiled: the count must be the compiled kernel's (the score tile's padding included).
TEST(AttentionKernelSpec, TensorCoreSharedMemoryIsCountedAhead) {
  codegen::ShaderCompiler compiler;
  for (auto [headDim, keyTile] : {std::pair<int64_t, int64_t>{64, 32}, {128, 32}, {64, 64}}) {
    codegen::AttentionSpec spec{8, 2, headDim, 256, 0.1, 0};
    spec.keyTile = keyTile;
    const std::string what = "head dim " + std::to_string(headDim) + ", key tile " + std::to_string(keyTile);
    const std::vector<uint32_t> spirv = compiler.compile(codegen::attentionKernel(spec, true), what);
    EXPECT_EQ(codegen::workgroupMemoryBytes(spirv),
              static_cast<uint32_t>(mlir::gerbil::coopAttentionSharedBytes(headDim, keyTile)))
        << what;
  }
}

} // namespace
