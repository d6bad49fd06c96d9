// The sampler: greedy, the repetition penalty (transformers' semantics), temperature, top-k, top-p, min-p
// and reproducibility from a seed.
#include "runtime/exec/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace {

using gerbil::exec::Sampler;
using gerbil::exec::SamplingOptions;

SamplingOptions sampling(double temperature, uint64_t seed = 1) {
  SamplingOptions options;
  options.temperature = temperature;
  options.seed = seed;
  return options;
}

// Logits whose softmax is exactly `probabilities`.
std::vector<float> logitsOf(const std::vector<double> &probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::map<int32_t, int> histogram(Sampler &sampler, const std::vector<float> &logits, int draws) {
  std::map<int32_t, int> counts;
  std::vector<int32_t> noHistory;
  for (int i = 0; i < draws; ++i)
    ++counts[sampler.next(logits.data(), static_cast<int64_t>(logits.size()), noHistory)];
  return counts;
}

std::set<int32_t> drawn(const std::map<int32_t, int> &counts) {
  std::set<int32_t> ids;
  for (const auto &[id, n] : counts) ids.insert(id);
  return ids;
}

TEST(Sampler, GreedyIsTheFirstMaximum) {
  Sampler sampler(sampling(0));
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(sampler.next(logits.data(), 4), 1);
  EXPECT_EQ(gerbil::exec::argmax(logits.data(), 4), 1);
  EXPECT_TRUE(sampling(0).plainArgmax());
  SamplingOptions penalised = sampling(0);
  penalised.repetitionPenalty = 1.2;
  EXPECT_FALSE(penalised.plainArgmax()); // a GPU argmax of the raw logits would ignore the penalty
  EXPECT_FALSE(sampling(0.7).plainArgmax());
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 4.0f};
  std::vector<int32_t> history = {0, 1, 1,
                                  7}; // repeated ids count once; ids outside the vocabulary are ignored
  gerbil::exec::applyRepetitionPenalty(logits.data(), 4, history, 2.0);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.5f, 4.0f}));
}

TEST(Sampler, RepetitionPenaltyAppliesToGreedyDecodingAndRemembersChoices) {
  SamplingOptions options = sampling(0);
  options.repetitionPenalty = 2.0;
  Sampler sampler(options);
  std::vector<float> logits = {1.0f, 0.9f, 0.8f};
  std::vector<int32_t> chosen;
  for (int i = 0; i < 4; ++i) chosen.push_back(sampler.next(logits.data(), 3));
  // 1.0 → 0.5 after the first pick, then 0.9 → 0.45, then 0.8 → 0.4: every token once, then the first again.
  EXPECT_EQ(chosen, (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(sampler.history(), chosen);
}

TEST(Sampler, RepetitionPenaltySeesTheContextAndObservedTokens) {
  SamplingOptions options = sampling(0);
  options.repetitionPenalty = 2.0;
  options.context = {0};
  Sampler sampler(options);
  std::vector<float> logits = {1.0f, 0.9f, 0.8f};
  EXPECT_EQ(sampler.next(logits.data(), 3), 1);
  sampler.observe(std::vector<int32_t>{2});
  // 0, 1 and 2 are all penalised once now.
  EXPECT_EQ(sampler.next(logits.data(), 3), 0);
  // An explicit history replaces the sampler's own.
  std::vector<int32_t> history = {1};
  EXPECT_EQ(sampler.next(logits.data(), 3, history), 0);
  EXPECT_EQ(sampler.next(logits.data(), 3, std::vector<int32_t>{}), 0);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> logits = logitsOf({0.1, 0.2, 0.3, 0.25, 0.15});
  auto run = [&](uint64_t seed) {
    SamplingOptions options = sampling(1.0, seed);
    options.topK = 4;
    options.topP = 0.95;
    Sampler sampler(options);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(sampler.next(logits.data(), 5));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  std::vector<float> logits = logitsOf({0.25, 0.75});
  Sampler sampler(sampling(1.0));
  auto counts = histogram(sampler, logits, 20000);
  EXPECT_NEAR(counts[1] / 20000.0, 0.75, 0.02);
  // Temperature 0.5 squares the odds: 1:3 becomes 1:9.
  Sampler sharper(sampling(0.5));
  counts = histogram(sharper, logits, 20000);
  EXPECT_NEAR(counts[1] / 20000.0, 0.9, 0.02);
}

TEST(Sampler, TopKKeepsTheKMostLikelyAndTheirTies) {
  SamplingOptions options = sampling(5.0); // a high temperature: without top-k every token would appear
  options.topK = 2;
  Sampler sampler(options);
  EXPECT_EQ(drawn(histogram(sampler, {0.0f, 3.0f, 1.0f, 2.5f, -1.0f}, 2000)), (std::set<int32_t>{1, 3}));
  // transformers keeps every token equal to the k-th logit.
  options.topK = 1;
  Sampler tied(options);
  EXPECT_EQ(drawn(histogram(tied, {1.0f, 2.0f, 2.0f, 0.0f, 2.0f}, 2000)), (std::set<int32_t>{1, 2, 4}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  SamplingOptions options = sampling(1.0);
  options.topP = 0.75;
  Sampler sampler(options);
  auto counts = histogram(sampler, logitsOf({0.15, 0.5, 0.05, 0.3}), 20000);
  EXPECT_EQ(drawn(counts), (std::set<int32_t>{1, 3})); // 0.5 + 0.3 reaches 0.75
  EXPECT_NEAR(counts[1] / 20000.0, 0.5 / 0.8, 0.02);   // renormalised over what is kept
  // The most likely token survives any p, even 0.
  options.topP = 0;
  Sampler tiny(options);
  EXPECT_EQ(drawn(histogram(tiny, logitsOf({0.15, 0.5, 0.05, 0.3}), 500)), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPOverALargeFlatVocabulary) {
  // 50000 equal logits: top-p 0.5 keeps the first 25000 ids (ties go to the lower id), far more than the
  // range that is sorted.
  const int64_t vocab = 50000;
  std::vector<float> logits(vocab, 0.0f);
  SamplingOptions options = sampling(1.0);
  options.topP = 0.5;
  Sampler sampler(options);
  auto ids = drawn(histogram(sampler, logits, 500));
  EXPECT_LT(*ids.rbegin(), 25001);
  EXPECT_GT(*ids.rbegin(), 20000);
}

TEST(Sampler, TopPCutsAcrossManyScoreRanges) {
  // 400 logits spread from -8 to 8 in a shuffled id order (their scores fall in many buckets of the
  // histogram that finds the cut): the drawn tokens are the nucleus a full sort gives, and its most likely
  // ones are all drawn. Also with p so near 1 that the cut falls in the least likely bucket.
  const int64_t vocab = 400;
  std::vector<float> logits(vocab);
  for (int64_t i = 0; i < vocab; ++i)
    logits[(i * 157) % vocab] = -8.0f + 16.0f * static_cast<float>(i) / vocab;
  for (double p : {0.9, 0.999999}) {
    std::vector<int32_t> ranked(vocab);
    for (int32_t i = 0; i < vocab; ++i) ranked[i] = i;
    std::sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    double total = 0, kept = 0;
    for (float l : logits) total += std::exp(static_cast<double>(l) - 8.0);
    std::set<int32_t> nucleus;
    for (int32_t id : ranked) {
      nucleus.insert(id);
      kept += std::exp(static_cast<double>(logits[id]) - 8.0);
      if (kept >= p * total) break;
    }
    SamplingOptions options = sampling(1.0);
    options.topP = p;
    Sampler sampler(options);
    const std::set<int32_t> ids = drawn(histogram(sampler, logits, 20000));
    for (int32_t id : ids) EXPECT_TRUE(nucleus.count(id)) << "token " << id << " drawn at top-p " << p;
    for (int r = 0; r < 5; ++r)
      EXPECT_TRUE(ids.count(ranked[r])) << "rank " << r << " never drawn at top-p " << p;
    EXPECT_LT(nucleus.size(), p < 0.99 ? 60u : 400u);
  }
}

TEST(Sampler, TopPTiesNegativeAndPositiveZero) {
  // -0 and +0 are equal logits: the tie goes to the lower id, whichever zero it holds.
  SamplingOptions options = sampling(1.0);
  options.topP = 0.4;
  Sampler sampler(options);
  EXPECT_EQ(drawn(histogram(sampler, {-0.0f, 0.0f, -30.0f}, 200)), (std::set<int32_t>{0}));
}

TEST(Sampler, MinPDropsTokensFarLessLikelyThanTheBest) {
  SamplingOptions options = sampling(1.0);
  options.minP = 0.2; // threshold 0.2 × 0.5 = 0.1
  Sampler sampler(options);
  auto counts = histogram(sampler, logitsOf({0.5, 0.3, 0.15, 0.05}), 20000);
  EXPECT_EQ(drawn(counts), (std::set<int32_t>{0, 1, 2}));
  EXPECT_NEAR(counts[2] / 20000.0, 0.15 / 0.95, 0.02);
}

TEST(Sampler, MinPAppliesAfterTemperature) {
  // At temperature 2 the probabilities flatten to ∝ sqrt(p): 0.707, 0.548, 0.387, 0.224 of the best are
  // 1, 0.77, 0.55, 0.32; min-p 0.5 keeps three.
  SamplingOptions options = sampling(2.0);
  options.minP = 0.5;
  Sampler sampler(options);
  EXPECT_EQ(drawn(histogram(sampler, logitsOf({0.5, 0.3, 0.15, 0.05}), 5000)), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, RejectsOptionsOutOfRange) {
  auto make = [](auto edit) {
    SamplingOptions options;
    edit(options);
    Sampler sampler(options);
  };
  EXPECT_THROW(make([](SamplingOptions &o) { o.temperature = -1; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingOptions &o) { o.topP = 1.5; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingOptions &o) { o.minP = 1.5; }), std::invalid_argument);
  EXPECT_THROW(make([](SamplingOptions &o) { o.repetitionPenalty = 0; }), std::invalid_argument);
  EXPECT_NO_THROW(make([](SamplingOptions &) {}));
}

} // namespace
