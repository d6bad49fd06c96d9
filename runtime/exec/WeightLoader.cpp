#include "runtime/exec/WeightLoader.h"

#include <cstring>
#include <set>

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
  throw weights::WeightError("the checkpoint has no tensor " + tried + " (the plan's weight '" + w.name + "')");
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
    if (static_cast<int32_t>(d) == w.sliceDim) ok = w.sliceStart + w.sliceLength <= source[d];
    else ok = source[d] == w.shape[d];
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
    uint16_t b = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
    std::memcpy(out + 2 * i, &b, 2);
    break;
  }
  default: std::memcpy(out + 4 * i, &v, 4);
  }
}

} // namespace

bool globMatch(const std::string &pattern, const std::string &text) {
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') star = p++, mark = t;
    else if (p < pattern.size() && pattern[p] == text[t]) ++p, ++t;
    else if (star != std::string::npos) p = star + 1, t = ++mark;
    else return false;
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
    for (const std::string &pattern : plan.model.ignoredSourceKeys) ignored = ignored || globMatch(pattern, name);
    if (!ignored) unused.push_back(name);
  }
  return unused;
}

std::vector<uint8_t> convertWeight(const plan::Weight &w, const weights::TensorView &t) {
  checkShape(w, t);
  int64_t rows = w.shape[0], cols = w.shape.size() > 1 ? w.shape[1] : 1;
  std::vector<uint8_t> out(w.bytes());
  // The source after transposition is [R', C'] with the weight cut from it at sliceDim.
  int64_t sourceCols = w.transpose ? t.shape[0] : (t.shape.size() > 1 ? t.shape[1] : 1);
  int64_t rowOffset = w.sliceDim == 0 ? w.sliceStart : 0, colOffset = w.sliceDim == 1 ? w.sliceStart : 0;
  std::vector<float> row(cols);
  if (!w.transpose) {
    for (int64_t r = 0; r < rows; ++r) {
      weights::convertToF32(t, (r + rowOffset) * sourceCols + colOffset, cols, row.data());
      for (int64_t c = 0; c < cols; ++c) storeElement(w.deviceDType, row[c], out.data(), r * cols + c);
    }
    return out;
  }
  // Transposed (GPT-2 Conv1D [in, out]): the source row c holds column c of the weight.
  int64_t sourceRowLength = t.shape[1];
  std::vector<float> sourceRow(sourceRowLength);
  for (int64_t c = 0; c < cols; ++c) {
    weights::convertToF32(t, (c + colOffset) * sourceRowLength, sourceRowLength, sourceRow.data());
    for (int64_t r = 0; r < rows; ++r) storeElement(w.deviceDType, sourceRow[r + rowOffset], out.data(), r * cols + c);
  }
  (void)sourceCols;
  return out;
}

LoadedWeights uploadWeights(vk::Context &context, const plan::Plan &plan, const weights::Checkpoint &checkpoint,
                            const ProgressFn &progress) {
  LoadedWeights loaded;
  uint64_t total = 0;
  for (const plan::Weight &w : plan.weights) total += w.bytes();
  for (const plan::Weight &w : plan.weights) {
    std::vector<uint8_t> bytes = convertWeight(w, findTensor(w, checkpoint));
    vk::Buffer buffer = context.createBuffer(bytes.size(), "weight '" + w.name + "'");
    context.upload(buffer, 0, bytes.data(), bytes.size());
    loaded.buffers.push_back(std::move(buffer));
    loaded.bytes += bytes.size();
    if (progress) progress(loaded.bytes, total);
  }
  return loaded;
}

} // namespace gerbil::exec
