#include "runtime/exec/WeightLoader.h"
#include "runtime/vulkan/UploadStream.h"

#include "runtime/support/Clock.h"
#include "runtime/support/Parallel.h"
#include "runtime/weights/HalfConversion.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>

namespace gerbil::exec {
namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

const weights::TensorView &findTensor(const plan::Weight &w, const weights::Checkpoint &checkpoint) {
  for (const std::string &key : w.sourceKeys)
    if (const weights::TensorView *t = checkpoint.find(key)) return *t;
  std::string tried;
  for (const std::string &key : w.sourceKeys) tried += (tried.empty() ? "'" : ", '") + key + "'";
  throw weights::WeightError("the checkpoint has no tensor " + tried + " (the plan's weight '" + w.name +
                             "')");
}

// The shape the plan's weight is cut from: the source after transposition, before slicing.
void checkShape(const plan::Weight &w, const weights::TensorView &t) {
  std::vector<int64_t> source = t.shape;
  if (w.transpose) {
    if (source.size() != 2)
      throw weights::WeightError(t.file + ": tensor '" + t.name + "' of shape " + shapeText(t.shape) +
                                 " cannot be transposed into the plan's " + shapeText(w.shape));
    std::swap(source[0], source[1]);
  }
  bool ok = source.size() == w.shape.size();
  for (size_t d = 0; ok && d < source.size(); ++d) {
    if (static_cast<int32_t>(d) == w.sliceDim)
      ok = w.sliceStart + w.sliceLength <= source[d];
    else
      ok = source[d] == w.shape[d];
  }
  if (!ok)
    throw weights::WeightError(t.file + ": tensor '" + t.name + "' has shape " + shapeText(t.shape) +
                               ", the plan's weight '" + w.name + "' needs " + shapeText(w.shape) +
                               (w.transpose ? " (transposed)" : "") +
                               (w.sliceDim >= 0 ? " cut from dimension " + std::to_string(w.sliceDim) : ""));
  using weights::TensorDType;
  if (t.dtype != TensorDType::F32 && t.dtype != TensorDType::F16 && t.dtype != TensorDType::BF16 &&
      t.dtype != TensorDType::F64)
    throw weights::WeightError(t.file + ": tensor '" + t.name + "' has dtype " + weights::toString(t.dtype) +
                               "; weights must be F32, F16, BF16 or F64");
}

void storeElement(plan::DType dtype, float v, uint8_t *out, size_t i) {
  switch (dtype) {
  case plan::DType::F16: {
    uint16_t h = weights::floatToHalf(v);
    std::memcpy(out + 2 * i, &h, 2);
    break;
  }
  case plan::DType::BF16: {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    uint16_t b = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16); // round to nearest even
    std::memcpy(out + 2 * i, &b, 2);
    break;
  }
  default:
    std::memcpy(out + 4 * i, &v, 4);
  }
}

// Elements [first, first + count) of a device buffer of `dtype` from f32 values.
void storeRow(plan::DType dtype, const float *values, int64_t count, uint8_t *out, int64_t first) {
  if (dtype == plan::DType::F16) return weights::floatsToHalfs(values, count, out + 2 * first);
  for (int64_t i = 0; i < count; ++i) storeElement(dtype, values[i], out, size_t(first + i));
}

// An f16 weight must hold what it is given: a value f16 cannot hold (|v| >= 65520 rounds to infinity) or a
// NaN would run through every token's arithmetic and come out as NaN logits, without a word about why.
// `values` are what is about to be stored (the checkpoint's, times the folded norm weight if any).
void checkHalfRange(const plan::Weight &w, const weights::TensorView &t, const float *values, int64_t count) {
  int outside = 0; // a branch-free pass first (it vectorises): the loader converts gigabytes
  for (int64_t i = 0; i < count; ++i) outside |= !(std::fabs(values[i]) < 65520.0f);
  if (!outside) return;
  for (int64_t i = 0; i < count; ++i) {
    if (std::fabs(values[i]) < 65520.0f) continue; // false for NaN too
    const std::string what = std::isnan(values[i]) ? "NaN" : std::to_string(values[i]);
    throw weights::WeightError(t.file + ": tensor '" + t.name + "' holds " + what +
                               (w.scaleColumnsBy >= 0 ? " (times its folded norm weight)" : "") +
                               ", which the plan's f16 weight '" + w.name +
                               "' cannot hold (f16 reaches 65504): compile with --dtype f32");
  }
}

// Whether the checkpoint's bytes are already the device's: then a weight is copied, not converted.
bool sameEncoding(weights::TensorDType source, plan::DType device) {
  using weights::TensorDType;
  return (source == TensorDType::F32 && device == plan::DType::F32) ||
         (source == TensorDType::F16 && device == plan::DType::F16) ||
         (source == TensorDType::BF16 && device == plan::DType::BF16);
}

// deviceBytesInPlace, for a weight whose shape was checked.
const uint8_t *bytesInPlace(const plan::Weight &w, const weights::TensorView &t) {
  const int64_t cols = w.shape.size() > 1 ? w.shape[1] : 1, sourceCols = t.shape.size() > 1 ? t.shape[1] : 1;
  if (w.transpose || !sameEncoding(t.dtype, w.deviceDType) || cols != sourceCols || w.shape.size() > 2 ||
      w.scaleColumnsBy >= 0)
    return nullptr;
  const int64_t rowOffset = w.sliceDim == 0 ? w.sliceStart : 0;
  return t.data + size_t(rowOffset * sourceCols) * weights::byteSize(t.dtype);
}

} // namespace

bool globMatch(const std::string &pattern, const std::string &text) {
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*')
      star = p++, mark = t;
    else if (p < pattern.size() && pattern[p] == text[t])
      ++p, ++t;
    else if (star != std::string::npos)
      p = star + 1, t = ++mark;
    else
      return false;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> checkCheckpoint(const plan::Plan &plan, const weights::Checkpoint &checkpoint) {
  std::set<std::string> used;
  for (const plan::Weight &w : plan.weights) {
    const weights::TensorView &t = findTensor(w, checkpoint);
    checkShape(w, t);
    used.insert(t.name);
  }
  std::vector<std::string> unused;
  for (const std::string &name : checkpoint.names()) {
    if (used.count(name)) continue;
    bool ignored = false;
    for (const std::string &pattern : plan.model.ignoredSourceKeys)
      ignored = ignored || globMatch(pattern, name);
    if (!ignored) unused.push_back(name);
  }
  return unused;
}

std::vector<uint8_t> convertWeight(const plan::Weight &w, const weights::TensorView &t,
                                   std::span<const float> columnScale) {
  std::vector<uint8_t> out;
  convertWeightInto(w, t, columnScale, out);
  return out;
}

namespace {
// Throws unless columnScale is empty or holds one value a column of the weight.
void checkColumnScale(const plan::Weight &w, std::span<const float> columnScale, int64_t cols) {
  if (!columnScale.empty() && int64_t(columnScale.size()) != cols)
    throw weights::WeightError("weight '" + w.name + "': " + std::to_string(columnScale.size()) +
                               " column scales for " + std::to_string(cols) + " columns");
}
int64_t weightColumns(const plan::Weight &w) {
  return w.shape.size() > 1 ? w.shape[1] : 1;
}
} // namespace

uint64_t weightRowBytes(const plan::Weight &w) {
  return w.transpose ? 0 : uint64_t(weightColumns(w)) * plan::byteSize(w.deviceDType);
}

void convertWeightRows(const plan::Weight &w, const weights::TensorView &t,
                       std::span<const float> columnScale, int64_t firstRow, int64_t rowCount, uint8_t *out) {
  checkShape(w, t);
  const int64_t cols = weightColumns(w);
  checkColumnScale(w, columnScale, cols);
  if (w.transpose || firstRow < 0 || rowCount < 0 || firstRow + rowCount > w.shape[0])
    throw weights::WeightError("weight '" + w.name + "': rows " + std::to_string(firstRow) + " to " +
                               std::to_string(firstRow + rowCount) + " cannot be converted on their own");
  int64_t rowOffset = (w.sliceDim == 0 ? w.sliceStart : 0) + firstRow,
          colOffset = w.sliceDim == 1 ? w.sliceStart : 0;
  // The source after slicing is [rows, sourceCols] from (rowOffset, colOffset).
  int64_t sourceCols = t.shape.size() > 1 ? t.shape[1] : 1;
  if (sameEncoding(t.dtype, w.deviceDType) && columnScale.empty()) {
    // The bytes as they are: a copy of each row (of all of them at once where no columns are cut).
    const size_t element = weights::byteSize(t.dtype), rowBytes = size_t(cols) * element;
    const uint8_t *source = t.data + size_t(rowOffset * sourceCols + colOffset) * element;
    if (sourceCols == cols) {
      support::copyInParallel(out, source, size_t(rowCount) * rowBytes);
    } else {
      support::parallelRanges(rowCount, cols, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          std::memcpy(out + size_t(r) * rowBytes, source + size_t(r * sourceCols) * element, rowBytes);
      });
    }
    return;
  }
  support::parallelRanges(rowCount, cols, [&](int64_t begin, int64_t end) {
    std::vector<float> row(cols);
    for (int64_t r = begin; r < end; ++r) {
      weights::convertToF32(t, (r + rowOffset) * sourceCols + colOffset, cols, row.data());
      if (!columnScale.empty())
        for (int64_t c = 0; c < cols; ++c) row[c] *= columnScale[c];
      if (w.deviceDType == plan::DType::F16) checkHalfRange(w, t, row.data(), cols);
      storeRow(w.deviceDType, row.data(), cols, out, r * cols);
    }
  });
}

void convertWeightInto(const plan::Weight &w, const weights::TensorView &t,
                       std::span<const float> columnScale, std::vector<uint8_t> &out) {
  checkShape(w, t);
  int64_t rows = w.shape[0], cols = weightColumns(w);
  checkColumnScale(w, columnScale, cols);
  out.resize(w.bytes());
  if (!w.transpose) {
    if (const uint8_t *whole = columnScale.empty() ? bytesInPlace(w, t) : nullptr)
      std::memcpy(out.data(), whole, out.size());
    else
      convertWeightRows(w, t, columnScale, 0, rows, out.data());
    return;
  }
  auto scaled = [&](float value, int64_t c) { return columnScale.empty() ? value : value * columnScale[c]; };
  int64_t rowOffset = w.sliceDim == 0 ? w.sliceStart : 0, colOffset = w.sliceDim == 1 ? w.sliceStart : 0;
  // Transposed (GPT-2 Conv1D [in, out]): the source row c holds column c of the weight.
  int64_t sourceRowLength = t.shape[1];
  support::parallelRanges(cols, rows, [&](int64_t begin, int64_t end) {
    std::vector<float> sourceRow(sourceRowLength);
    for (int64_t c = begin; c < end; ++c) {
      weights::convertToF32(t, (c + colOffset) * sourceRowLength, sourceRowLength, sourceRow.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float value = scaled(sourceRow[r + rowOffset], c);
        if (w.deviceDType == plan::DType::F16) checkHalfRange(w, t, &value, 1);
        storeElement(w.deviceDType, value, out.data(), r * cols + c);
      }
    }
  });
}

const uint8_t *deviceBytesInPlace(const plan::Weight &w, const weights::TensorView &t) {
  checkShape(w, t);
  return bytesInPlace(w, t);
}

namespace {
// The folded norm weight `index` as f32 (plan::validate checked its shape), from `cache` or into it: q, k
// and v share theirs, and gate and up.
const std::vector<float> &columnScales(const plan::Plan &plan, const weights::Checkpoint &checkpoint,
                                       int32_t index, std::map<int32_t, std::vector<float>> &cache) {
  auto [at, inserted] = cache.try_emplace(index);
  if (inserted) {
    plan::Weight scale = plan.weights[size_t(index)];
    scale.deviceDType = plan::DType::F32, scale.scaleColumnsBy = -1;
    std::vector<uint8_t> values = convertWeight(scale, findTensor(scale, checkpoint));
    at->second.resize(values.size() / sizeof(float));
    std::memcpy(at->second.data(), values.data(), values.size());
  }
  return at->second;
}
} // namespace

LoadedWeights uploadWeights(vk::Context &context, const plan::Plan &plan,
                            const weights::Checkpoint &checkpoint, const ProgressFn &progress,
                            uint64_t blockBytes) {
  LoadedWeights loaded;
  uint64_t total = 0;
  std::vector<vk::BufferRequest> requests;
  for (const plan::Weight &w : plan.weights) {
    total += w.bytes();
    requests.push_back({w.bytes(), "weight '" + w.name + "'"});
  }
  std::vector<vk::Buffer> buffers = context.createBuffers(requests, blockBytes);
  std::vector<uint8_t> converted; // reused: its pages stay mapped from one weight to the next
  std::map<int32_t, std::vector<float>> scales; // folded norm weights, converted once for all their matrices
  auto start = support::Clock::now();
  // One stream for all: the host fills one half of the staging buffer while the device copies the other out,
  // small weights share a copy, and converted rows are written straight into the staging buffer.
  vk::UploadStream stream(context, total);
  auto copyFrom = [](const uint8_t *bytes) {
    return [bytes](uint64_t at, uint64_t count, void *into) {
      support::copyInParallel(into, bytes + at, count);
    };
  };
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const plan::Weight &w = plan.weights[i];
    const weights::TensorView &t = findTensor(w, checkpoint);
    vk::Buffer &buffer = buffers[i];
    // Straight from the mapped file where the bytes are already the device's; else through a conversion,
    // into the staging buffer a run of whole rows at a time, or (transposed, or rows past half of it) whole.
    if (const uint8_t *bytes = deviceBytesInPlace(w, t)) {
      stream.write(buffer, 0, w.bytes(), 1, copyFrom(bytes));
    } else {
      static const std::vector<float> kNoScale;
      auto converting = support::Clock::now();
      const std::vector<float> &columnScale =
          w.scaleColumnsBy >= 0 ? columnScales(plan, checkpoint, w.scaleColumnsBy, scales) : kNoScale;
      const uint64_t rowBytes = weightRowBytes(w);
      if (rowBytes > 0 && rowBytes <= stream.granuleLimit()) {
        loaded.convertMs += support::msSince(converting);
        stream.write(buffer, 0, w.bytes(), rowBytes, [&](uint64_t at, uint64_t count, void *into) {
          auto rows = support::Clock::now();
          convertWeightRows(w, t, columnScale, int64_t(at / rowBytes), int64_t(count / rowBytes),
                            static_cast<uint8_t *>(into));
          loaded.convertMs += support::msSince(rows);
        });
      } else {
        convertWeightInto(w, t, columnScale, converted);
        loaded.convertMs += support::msSince(converting);
        stream.write(buffer, 0, w.bytes(), 1, copyFrom(converted.data())); // copied out before it returns
      }
    }
    loaded.bytes += w.bytes();
    // What the device has copied, not what is queued (up to a staging half behind).
    if (progress) progress(stream.copiedBytes(), total);
  }
  stream.finish();
  if (progress && !plan.weights.empty()) progress(stream.copiedBytes(), total);
  loaded.uploadMs = support::msSince(start) - loaded.convertMs;
  loaded.buffers = std::move(buffers); // the vector's storage moves; the buffers stay where they are
  return loaded;
}

} // namespace gerbil::exec
