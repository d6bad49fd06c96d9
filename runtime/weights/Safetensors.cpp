// safetensors reading and writing. A file is: u64 LE header size N | N bytes of JSON | data. The header is
// checked completely when the file is opened (dtypes, shapes, offsets inside the data, sizes matching the
// shapes, no overlaps), so that later code may use any TensorView without further checks.
#include "runtime/weights/Safetensors.h"

#include "runtime/weights/HalfConversion.h"

#include "runtime/support/JsonExcerpt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gerbil::weights {

using json = nlohmann::json;

namespace {

// The limit the reference implementation uses: a larger header is a corrupt (or hostile) file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

uint64_t readU64LE(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

std::optional<TensorDType> parseTensorDType(const std::string &s) {
  for (TensorDType t :
       {TensorDType::F64, TensorDType::F32, TensorDType::F16, TensorDType::BF16, TensorDType::I64,
        TensorDType::I32, TensorDType::I16, TensorDType::I8, TensorDType::U8, TensorDType::BOOL})
    if (s == toString(t)) return t;
  return std::nullopt;
}

// Number of elements of a shape, or nullopt when a dimension is negative or the product overflows.
std::optional<uint64_t> elementCount(const std::vector<int64_t> &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, uint64_t(dim), &count)) return std::nullopt;
  }
  return count;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "[begin, end]". Built by appending: GCC 12 gives a false -Wrestrict for "[" + std::to_string(...).
std::string offsetPairText(uint64_t begin, uint64_t end) {
  std::string s(1, '[');
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += ']';
  return s;
}

std::string shortJson(const json &value) {
  constexpr size_t kLimit = 80;
  return support::jsonExcerpt(value, kLimit);
}

// Reads a non-negative JSON integer that fits in int64 (shape dims and offsets).
std::optional<uint64_t> nonNegativeInteger(const json &j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  uint64_t v = j.get<uint64_t>();
  if (v > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return v;
}

std::string readWholeFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WeightError("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw WeightError("cannot read " + path);
  return contents.str();
}

// A shard name from an index must be a file beside the index, never a path that leaves the folder.
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

void writeAll(const std::string &path, const std::vector<std::pair<const uint8_t *, size_t>> &pieces) {
  static std::atomic<unsigned> counter{0};
  std::string temp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw WeightError("cannot write " + path + ": " + std::strerror(errno));
  auto failWith = [&](int err) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw WeightError("cannot write " + path + ": " + std::strerror(err));
  };
  for (auto [data, size] : pieces) {
    size_t written = 0;
    while (written < size) {
      ssize_t n = ::write(fd, data + written, size - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) failWith(n < 0 ? errno : EIO);
      written += size_t(n);
    }
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw WeightError("cannot write " + path + ": " + std::strerror(err));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw WeightError("cannot write " + path + ": " + std::strerror(err));
  }
}

} // namespace

// ---- Types.

const char *toString(TensorDType t) {
  switch (t) {
  case TensorDType::F64:
    return "F64";
  case TensorDType::F32:
    return "F32";
  case TensorDType::F16:
    return "F16";
  case TensorDType::BF16:
    return "BF16";
  case TensorDType::I64:
    return "I64";
  case TensorDType::I32:
    return "I32";
  case TensorDType::I16:
    return "I16";
  case TensorDType::I8:
    return "I8";
  case TensorDType::U8:
    return "U8";
  case TensorDType::BOOL:
    return "BOOL";
  }
  return "unknown";
}

size_t byteSize(TensorDType t) {
  switch (t) {
  case TensorDType::F64:
  case TensorDType::I64:
    return 8;
  case TensorDType::F32:
  case TensorDType::I32:
    return 4;
  case TensorDType::F16:
  case TensorDType::BF16:
  case TensorDType::I16:
    return 2;
  case TensorDType::I8:
  case TensorDType::U8:
  case TensorDType::BOOL:
    return 1;
  }
  return 0;
}

int64_t TensorView::numElements() const {
  // Shapes were checked at load (non-negative, product fits the file), so this cannot overflow for views
  // made by SafetensorsFile; saturate for hand-made views.
  std::optional<uint64_t> count = elementCount(shape);
  if (!count || *count > uint64_t(std::numeric_limits<int64_t>::max())) return -1;
  return int64_t(*count);
}

// ---- One file.

SafetensorsFile::SafetensorsFile(const std::string &path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw WeightError("cannot open " + path + ": " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw WeightError(path + ": not a regular file");
  }
  uint64_t fileSize = uint64_t(info.st_size);
  if (fileSize < 8) {
    ::close(fd);
    throw WeightError(path + ": " + std::to_string(fileSize) +
                      " bytes is too short to be a safetensors file");
  }
  void *map = ::mmap(nullptr, size_t(fileSize), PROT_READ, MAP_PRIVATE, fd, 0);
  int mapErrno = errno;
  ::close(fd); // the mapping keeps the file alive
  if (map == MAP_FAILED) throw WeightError("cannot map " + path + ": " + std::strerror(mapErrno));
  map_ = map;
  mapSize_ = size_t(fileSize);

  // The destructor does not run when the constructor throws: unmap here on every error.
  try {
    const uint8_t *bytes = static_cast<const uint8_t *>(map_);
    uint64_t headerBytes = readU64LE(bytes);
    if (headerBytes > fileSize - 8)
      throw WeightError(path + ": header size " + std::to_string(headerBytes) + " exceeds the file (" +
                        std::to_string(fileSize) + " bytes): the file is truncated or not safetensors");
    if (headerBytes > kMaxHeaderBytes)
      throw WeightError(path + ": header size " + std::to_string(headerBytes) + " exceeds the limit of " +
                        std::to_string(kMaxHeaderBytes) + " bytes");
    const uint8_t *data = bytes + 8 + headerBytes;
    uint64_t dataBytes = fileSize - 8 - headerBytes;

    json header;
    try {
      const char *text = reinterpret_cast<const char *>(bytes + 8);
      header = json::parse(text, text + headerBytes);
    } catch (const json::exception &e) {
      throw WeightError(path + ": header is not valid JSON: " + e.what());
    }
    if (!header.is_object()) throw WeightError(path + ": header is not a JSON object");

    struct Extent {
      uint64_t begin, end;
      const std::string *name;
    };
    std::vector<Extent> extents;
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string &name = it.key();
      const json &entry = it.value();
      if (name == "__metadata__") {
        if (!entry.is_object()) throw WeightError(path + ": __metadata__ is not a JSON object");
        for (auto m = entry.begin(); m != entry.end(); ++m) {
          if (!m.value().is_string())
            throw WeightError(path + ": __metadata__ entry '" + m.key() + "' is not a string");
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      std::string where = path + ": tensor '" + name + "'";
      if (!entry.is_object()) throw WeightError(where + ": entry is not a JSON object");

      auto dtypeIt = entry.find("dtype");
      if (dtypeIt == entry.end() || !dtypeIt->is_string())
        throw WeightError(where + ": dtype missing or not a string");
      std::optional<TensorDType> dtype = parseTensorDType(dtypeIt->get<std::string>());
      if (!dtype) throw WeightError(where + ": unsupported dtype '" + dtypeIt->get<std::string>() + "'");

      auto shapeIt = entry.find("shape");
      if (shapeIt == entry.end() || !shapeIt->is_array())
        throw WeightError(where + ": shape missing or not an array");
      std::vector<int64_t> shape;
      for (const json &dim : *shapeIt) {
        std::optional<uint64_t> d = nonNegativeInteger(dim);
        if (!d)
          throw WeightError(where + ": shape " + shortJson(*shapeIt) +
                            " has an entry that is not a non-negative integer");
        shape.push_back(int64_t(*d));
      }

      auto offsetsIt = entry.find("data_offsets");
      if (offsetsIt == entry.end() || !offsetsIt->is_array() || offsetsIt->size() != 2)
        throw WeightError(where + ": data_offsets missing or not a [begin, end] pair");
      std::optional<uint64_t> begin = nonNegativeInteger((*offsetsIt)[0]);
      std::optional<uint64_t> end = nonNegativeInteger((*offsetsIt)[1]);
      if (!begin || !end)
        throw WeightError(where + ": data_offsets " + shortJson(*offsetsIt) +
                          " are not non-negative integers");
      std::string offsetsText = offsetPairText(*begin, *end);
      if (*begin > *end)
        throw WeightError(where + ": data_offsets " + offsetsText + " end before they begin");
      if (*end > dataBytes)
        throw WeightError(where + ": data_offsets " + offsetsText + " outside the " +
                          std::to_string(dataBytes) + " bytes of data");

      std::optional<uint64_t> count = elementCount(shape);
      uint64_t expected = 0;
      if (!count || __builtin_mul_overflow(*count, uint64_t(byteSize(*dtype)), &expected))
        throw WeightError(where + ": shape " + shapeText(shape) + " is too large");
      if (*end - *begin != expected)
        throw WeightError(where + ": data_offsets " + offsetsText + " hold " + std::to_string(*end - *begin) +
                          " bytes but shape " + shapeText(shape) + " of " + toString(*dtype) + " needs " +
                          std::to_string(expected));

      TensorView view;
      view.name = name;
      view.dtype = *dtype;
      view.shape = std::move(shape);
      view.data = data + *begin;
      view.bytes = expected;
      view.file = path;
      auto [inserted, fresh] = tensors_.emplace(name, std::move(view));
      if (expected > 0) extents.push_back({*begin, *end, &inserted->first});
    }

    // Overlapping tensors would alias each other's data: sort by start and compare neighbours.
    std::sort(extents.begin(), extents.end(),
              [](const Extent &a, const Extent &b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i)
      if (extents[i].begin < extents[i - 1].end)
        throw WeightError(path + ": tensor '" + *extents[i].name + "' [" + std::to_string(extents[i].begin) +
                          ", " + std::to_string(extents[i].end) + "] overlaps tensor '" +
                          *extents[i - 1].name + "' [" + std::to_string(extents[i - 1].begin) + ", " +
                          std::to_string(extents[i - 1].end) + "]");
  } catch (...) {
    ::munmap(map_, mapSize_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, mapSize_);
}

// ---- A checkpoint folder.

Checkpoint Checkpoint::open(const std::string &folder) {
  namespace fs = std::filesystem;
  Checkpoint checkpoint;
  std::string indexPath = (fs::path(folder) / "model.safetensors.index.json").string();
  std::string singlePath = (fs::path(folder) / "model.safetensors").string();
  std::error_code ec;

  if (fs::exists(indexPath, ec)) {
    std::string text = readWholeFile(indexPath);
    // A key given twice in weight_map would be silently collapsed by the parser; the callback sees every key.
    std::string topKey;
    std::set<std::string> mappedNames;
    std::string duplicate;
    auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
      if (event == json::parse_event_t::key) {
        if (depth == 1)
          topKey = parsed.get<std::string>();
        else if (depth == 2 && topKey == "weight_map" &&
                 !mappedNames.insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
      }
      return true;
    };
    json index;
    try {
      index = json::parse(text, callback);
    } catch (const json::exception &e) {
      throw WeightError(indexPath + ": not valid JSON: " + e.what());
    }
    if (!duplicate.empty())
      throw WeightError(indexPath + ": tensor '" + duplicate + "' is listed twice in weight_map");
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw WeightError(indexPath + ": no weight_map object");
    const json &weightMap = index["weight_map"];
    if (weightMap.empty()) throw WeightError(indexPath + ": weight_map is empty");

    // Open each shard once, in the order of the sorted tensor names (deterministic).
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shardsByName;
    for (auto it = weightMap.begin(); it != weightMap.end(); ++it) {
      if (!it.value().is_string())
        throw WeightError(indexPath + ": tensor '" + it.key() + "': shard name is not a string");
      std::string shard = it.value().get<std::string>();
      if (!isPlainFileName(shard))
        throw WeightError(indexPath + ": tensor '" + it.key() + "': shard '" + shard +
                          "' is not a plain file name in the checkpoint folder");
      if (shardsByName.count(shard)) continue;
      std::string shardPath = (fs::path(folder) / shard).string();
      if (!fs::exists(shardPath, ec))
        throw WeightError(indexPath + ": tensor '" + it.key() + "' is in shard '" + shard +
                          "', which does not exist (" + shardPath + ")");
      auto file = std::make_shared<SafetensorsFile>(shardPath);
      shardsByName.emplace(shard, file);
      checkpoint.shards_.push_back(file);
      checkpoint.files_.push_back(shardPath);
    }

    for (auto it = weightMap.begin(); it != weightMap.end(); ++it) {
      const SafetensorsFile &shard = *shardsByName.at(it.value().get<std::string>());
      if (!shard.tensors().count(it.key()))
        throw WeightError(indexPath + ": tensor '" + it.key() + "' is mapped to '" +
                          it.value().get<std::string>() + "' but that shard has no such tensor");
    }
    // Every tensor of every shard is part of the checkpoint; one found in two shards is ambiguous.
    for (const auto &shard : checkpoint.shards_)
      for (const auto &[name, view] : shard->tensors()) {
        auto [existing, fresh] = checkpoint.index_.emplace(name, &view);
        if (!fresh)
          throw WeightError(folder + ": tensor '" + name + "' is in two shards: " + existing->second->file +
                            " and " + shard->path());
      }
    return checkpoint;
  }

  if (fs::exists(singlePath, ec)) {
    auto file = std::make_shared<SafetensorsFile>(singlePath);
    for (const auto &[name, view] : file->tensors()) checkpoint.index_.emplace(name, &view);
    checkpoint.shards_.push_back(file);
    checkpoint.files_.push_back(singlePath);
    return checkpoint;
  }
  throw WeightError(folder + ": no model.safetensors or model.safetensors.index.json");
}

const TensorView *Checkpoint::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto &entry : index_) out.push_back(entry.first); // std::map: already sorted
  return out;
}

// ---- Conversions.

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13); // inf or nan (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal half: mantissa * 2^-24 is exactly representable as a normal float.
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) {
    if (x == 0x7f800000) return sign | 0x7c00;
    return uint16_t(sign | 0x7e00 | ((x >> 13) & 0x3ff)); // quiet nan, keeping what fits of the payload
  }
  // 65520 is half-way between 65504 (largest half) and 65536; ties go to even, which is infinity.
  if (x >= 0x477ff000) return sign | 0x7c00;
  uint32_t exponent = x >> 23;
  if (exponent < 113) {
    // Result is subnormal (or zero): value = mantissa24 * 2^(exponent - 150); in units of 2^-24 that is
    // mantissa24 >> (126 - exponent), rounded to nearest even.
    uint32_t shift = 126 - exponent;
    if (shift > 24) return sign; // below half of the smallest subnormal
    uint32_t mantissa = (x & 0x7fffff) | 0x800000;
    uint32_t result = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1))) ++result;
    return uint16_t(sign | result); // a carry into bit 10 gives the smallest normal, as it should
  }
  uint32_t result = ((exponent - 112) << 10) | ((x >> 13) & 0x3ff);
  uint32_t remainder = x & 0x1fff;
  if (remainder > 0x1000 || (remainder == 0x1000 && (result & 1))) ++result; // carry may bump the exponent
  return uint16_t(sign | result);
}

float bfloat16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void convertToF32(const TensorView &t, int64_t first, int64_t count, float *out) {
  int64_t total = t.numElements();
  if (first < 0 || count < 0 || total < 0 || first > total || count > total - first)
    throw WeightError(t.file + ": tensor '" + t.name + "': elements [" + std::to_string(first) + ", +" +
                      std::to_string(count) + ") outside its " + std::to_string(total) + " elements");
  // Tensors in a safetensors file need not be aligned: read every element with memcpy.
  const uint8_t *src = t.data + uint64_t(first) * byteSize(t.dtype);
  switch (t.dtype) {
  case TensorDType::F64:
    for (int64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      out[i] = float(v);
    }
    return;
  case TensorDType::F32:
    if (count > 0) std::memcpy(out, src, size_t(count) * 4);
    return;
  case TensorDType::F16:
    halfsToFloats(src, count, out);
    return;
  case TensorDType::BF16:
    for (int64_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = bfloat16ToFloat(v);
    }
    return;
  default:
    throw WeightError(t.file + ": tensor '" + t.name + "': cannot convert " + toString(t.dtype) +
                      " to F32 (only F64, F32, F16 and BF16 are floating point)");
  }
}

// ---- Writing.

void writeSafetensors(const std::string &path, const std::vector<OwnedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const OwnedTensor &t : tensors) {
    std::string where = path + ": tensor '" + t.name + "'";
    if (t.name.empty() || t.name == "__metadata__") throw WeightError(where + ": invalid tensor name");
    if (header.contains(t.name)) throw WeightError(where + ": given twice");
    std::optional<uint64_t> count = elementCount(t.shape);
    uint64_t expected = 0;
    if (!count || __builtin_mul_overflow(*count, uint64_t(byteSize(t.dtype)), &expected))
      throw WeightError(where + ": invalid shape " + shapeText(t.shape));
    if (t.data.size() != expected)
      throw WeightError(where + ": " + std::to_string(t.data.size()) + " bytes of data but shape " +
                        shapeText(t.shape) + " of " + toString(t.dtype) + " needs " +
                        std::to_string(expected));
    header[t.name] = json{{"dtype", toString(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", json::array({offset, offset + expected})}};
    offset += expected;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception &e) {
    throw WeightError(path +
                      ": cannot write the header: " + std::string(e.what())); // names that are not UTF-8
  }
  // Pad with spaces (valid JSON whitespace) so that the data starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');

  uint8_t sizeBytes[8];
  for (int i = 0; i < 8; ++i) sizeBytes[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  std::vector<std::pair<const uint8_t *, size_t>> pieces;
  pieces.push_back({sizeBytes, 8});
  pieces.push_back({reinterpret_cast<const uint8_t *>(text.data()), text.size()});
  for (const OwnedTensor &t : tensors) pieces.push_back({t.data.data(), t.data.size()});
  writeAll(path, pieces);
}

} // namespace gerbil::weights
