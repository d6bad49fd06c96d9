// convertWeight: a checkpoint tensor to the plan's device bytes, copied where the dtypes agree and converted
// (across threads) where they do not; slices along either dimension and GPT-2's transposed weights; against
// an element-by-element reference.
#include "runtime/exec/WeightLoader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

using namespace gerbil;

namespace {

struct Source {
  std::vector<uint8_t> bytes;
  weights::TensorView view;
};

// A [rows, cols] tensor of `dtype` with values exact in f16 and bf16 (multiples of 1/64 up to 4).
Source makeSource(weights::TensorDType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Source s;
  const size_t element = weights::byteSize(dtype), count = size_t(rows * cols);
  s.bytes.resize(count * element);
  for (size_t i = 0; i < count; ++i) {
    float v = static_cast<float>(static_cast<int>(rng() % 513) - 256) / 64.0f;
    if (dtype == weights::TensorDType::F32) {
      std::memcpy(&s.bytes[4 * i], &v, 4);
    } else if (dtype == weights::TensorDType::F16) {
      uint16_t h = weights::floatToHalf(v);
      std::memcpy(&s.bytes[2 * i], &h, 2);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t b = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&s.bytes[2 * i], &b, 2);
    }
  }
  s.view = weights::TensorView{"w", dtype, {rows, cols}, s.bytes.data(), s.bytes.size(), "memory"};
  return s;
}

// The value of element (r, c) of the device weight, read back from its bytes.
float deviceValue(const std::vector<uint8_t> &bytes, plan::DType dtype, size_t i) {
  if (dtype == plan::DType::F32) {
    float v;
    std::memcpy(&v, &bytes[4 * i], 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[2 * i], 2);
  return dtype == plan::DType::F16 ? weights::halfToFloat(h) : weights::bfloat16ToFloat(h);
}

void check(weights::TensorDType sourceType, plan::DType deviceType, int64_t rows, int64_t cols,
           bool transpose, int32_t sliceDim, int64_t sliceStart, int64_t sliceLength) {
  Source s = makeSource(sourceType, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
  plan::Weight w;
  w.name = "w";
  w.deviceDType = deviceType;
  w.transpose = transpose;
  w.sliceDim = sliceDim;
  w.sliceStart = sliceStart;
  w.sliceLength = sliceLength;
  // The device shape: the source, transposed, then cut.
  w.shape = transpose ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{rows, cols};
  if (sliceDim >= 0) w.shape[sliceDim] = sliceLength;
  std::vector<uint8_t> out = exec::convertWeight(w, s.view);
  ASSERT_EQ(out.size(), w.bytes());
  // Uploaded straight from the file only when it holds the device bytes in one block: then the same bytes.
  const uint8_t *inPlace = exec::deviceBytesInPlace(w, s.view);
  const bool oneBlock = weights::byteSize(sourceType) == plan::byteSize(deviceType) &&
                        (sourceType == weights::TensorDType::F32) == (deviceType == plan::DType::F32) &&
                        (sourceType == weights::TensorDType::BF16) == (deviceType == plan::DType::BF16) &&
                        !transpose && sliceDim != 1;
  ASSERT_EQ(inPlace != nullptr, oneBlock);
  if (inPlace) {
    ASSERT_EQ(std::memcmp(inPlace, out.data(), out.size()), 0);
  }
  // A run of rows on their own (the loader's way into the staging buffer) is those rows of the whole.
  if (!transpose) {
    const int64_t first = w.shape[0] / 3, count = w.shape[0] / 2;
    const uint64_t rowBytes = exec::weightRowBytes(w);
    ASSERT_EQ(rowBytes * uint64_t(w.shape[0]), w.bytes());
    std::vector<uint8_t> part(size_t(count) * rowBytes);
    exec::convertWeightRows(w, s.view, {}, first, count, part.data());
    ASSERT_EQ(std::memcmp(part.data(), out.data() + size_t(first) * rowBytes, part.size()), 0);
    EXPECT_THROW(exec::convertWeightRows(w, s.view, {}, first, w.shape[0], part.data()),
                 weights::WeightError);
  } else {
    EXPECT_EQ(exec::weightRowBytes(w), 0u);
    std::vector<uint8_t> part(w.bytes());
    EXPECT_THROW(exec::convertWeightRows(w, s.view, {}, 0, 1, part.data()), weights::WeightError);
  }
  std::vector<float> all(size_t(rows * cols));
  weights::convertToF32(s.view, 0, rows * cols, all.data());
  for (int64_t r = 0; r < w.shape[0]; ++r)
    for (int64_t c = 0; c < w.shape[1]; ++c) {
      int64_t sr = r + (sliceDim == 0 ? sliceStart : 0), sc = c + (sliceDim == 1 ? sliceStart : 0);
      float expected = transpose ? all[size_t(sc * cols + sr)] : all[size_t(sr * cols + sc)];
      ASSERT_EQ(deviceValue(out, deviceType, size_t(r * w.shape[1] + c)), expected)
          << "element (" << r << ", " << c << "), source " << weights::toString(sourceType) << " to "
          << plan::toString(deviceType) << (transpose ? ", transposed" : "") << ", slice dim " << sliceDim;
    }
}

TEST(ConvertWeight, ScalesColumnsByAFoldedNormWeight) {
  // W[n, k] · g[k], as gerbil-fold-norm-weights asks of the projections after an RMSNorm; never in place.
  Source s = makeSource(weights::TensorDType::F16, 6, 40, 11);
  std::vector<float> scale(40), all(6 * 40);
  for (size_t c = 0; c < scale.size(); ++c) scale[c] = 0.25f + 0.125f * float(c % 7);
  weights::convertToF32(s.view, 0, 6 * 40, all.data());
  for (plan::DType deviceType : {plan::DType::F32, plan::DType::F16}) {
    plan::Weight w;
    w.name = "w", w.shape = {6, 40}, w.deviceDType = deviceType, w.scaleColumnsBy = 1;
    EXPECT_EQ(exec::deviceBytesInPlace(w, s.view), nullptr);
    std::vector<uint8_t> out = exec::convertWeight(w, s.view, scale);
    std::vector<uint8_t> rows(2 * exec::weightRowBytes(w));
    exec::convertWeightRows(w, s.view, scale, 3, 2, rows.data());
    EXPECT_EQ(std::memcmp(rows.data(), out.data() + 3 * exec::weightRowBytes(w), rows.size()), 0);
    for (size_t i = 0; i < all.size(); ++i) {
      float expected = all[i] * scale[i % 40];
      if (deviceType == plan::DType::F16) expected = weights::halfToFloat(weights::floatToHalf(expected));
      ASSERT_EQ(deviceValue(out, deviceType, i), expected) << "element " << i;
    }
  }
  plan::Weight w;
  w.name = "w", w.shape = {6, 40}, w.deviceDType = plan::DType::F32, w.scaleColumnsBy = 1;
  scale.resize(39);
  EXPECT_THROW(exec::convertWeight(w, s.view, scale), weights::WeightError);
}

// An f16 weight cannot hold a value of 65520 or more (it rounds to infinity) or a NaN: the loader says which
// tensor holds it and what to do, instead of generating from NaN logits. 65504 (f16's largest) is fine.
TEST(ConvertWeight, RefusesValuesBeyondHalfRange) {
  auto source = [](float value, size_t at) {
    Source s = makeSource(weights::TensorDType::F32, 4, 8, 5);
    std::memcpy(&s.bytes[4 * at], &value, 4);
    return s;
  };
  plan::Weight w;
  w.name = "layers.0.mlp.down_proj", w.shape = {4, 8}, w.deviceDType = plan::DType::F16;
  Source largest = source(65504.0f, 9);
  EXPECT_EQ(deviceValue(exec::convertWeight(w, largest.view), plan::DType::F16, 9), 65504.0f);
  for (float bad : {70000.0f, -1.0e6f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    Source s = source(bad, 13);
    try {
      exec::convertWeight(w, s.view);
      ADD_FAILURE() << bad << " was stored";
    } catch (const weights::WeightError &e) {
      EXPECT_NE(std::string(e.what()).find("memory: tensor 'w' holds "), std::string::npos) << e.what();
      EXPECT_NE(
          std::string(e.what()).find("f16 weight 'layers.0.mlp.down_proj' cannot hold (f16 reaches 65504): "
                                     "compile with --dtype f32"),
          std::string::npos)
          << e.what();
    }
  }
  // Also where a folded norm weight takes a value past the range, and in GPT-2's transposed weights.
  std::vector<float> scale(8, 1.0f);
  scale[5] = 40000.0f; // the source's values reach 4
  w.scaleColumnsBy = 1;
  try {
    exec::convertWeight(w, largest.view, scale);
    ADD_FAILURE() << "the scaled values were stored";
  } catch (const weights::WeightError &e) {
    EXPECT_NE(std::string(e.what()).find("(times its folded norm weight)"), std::string::npos) << e.what();
  }
  w.scaleColumnsBy = -1, w.transpose = true, w.shape = {8, 4};
  Source s = source(-70000.0f, 30);
  EXPECT_THROW(exec::convertWeight(w, s.view), weights::WeightError);
  // f32 weights hold anything.
  w.deviceDType = plan::DType::F32;
  EXPECT_NO_THROW(exec::convertWeight(w, s.view));
}

TEST(ConvertWeight, CopiesWhatAlreadyHasTheDeviceDType) {
  using weights::TensorDType;
  check(TensorDType::F16, plan::DType::F16, 300, 64, false, -1, 0, 0);
  check(TensorDType::F16, plan::DType::F16, 300, 64, false, 0, 100, 150);  // rows cut: one block
  check(TensorDType::BF16, plan::DType::BF16, 40, 96, false, 1, 32, 48);   // columns cut: row by row
  check(TensorDType::F32, plan::DType::F32, 2048, 1024, false, 1, 0, 512); // rows across threads
}

TEST(ConvertWeight, ConvertsAcrossThreads) {
  using weights::TensorDType;
  // 2M elements: split over the host's cores.
  check(TensorDType::F32, plan::DType::F16, 2048, 1024, false, -1, 0, 0);
  check(TensorDType::BF16, plan::DType::F16, 1536, 1536, false, 0, 512, 1024);
  check(TensorDType::F16, plan::DType::F32, 33, 17, false, -1, 0, 0);
  check(TensorDType::F32, plan::DType::BF16, 64, 48, true, -1, 0, 0);         // GPT-2's Conv1D
  check(TensorDType::F32, plan::DType::F16, 1024, 3072, true, 0, 1024, 1024); // c_attn's k
}

} // namespace
