// The plan file: a fixed header, a JSON manifest, a blob of SPIR-V words and an XXH64 checksum. The reader
// trusts nothing: every length is checked against the file size before it is used, the checksum is verified
// before the manifest is parsed, and every manifest key is checked for presence and type so that a bad file
// gives a message naming the key instead of a crash.
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanJson.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace gerbil::plan {

using json = nlohmann::json;

namespace {

constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;
constexpr size_t kChecksumBytes = 8;
constexpr uint32_t kSpirvMagic = 0x07230203;
// Plans hold a model's kernels and a manifest, never its weights; anything this large is not a plan.
constexpr uint64_t kMaxFileBytes = uint64_t(4) << 30;

// ---- Little-endian encoding, independent of the host byte order.

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

void putU64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

uint32_t getU32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}

uint64_t getU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

std::string lower(std::string s) {
  for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<BufferKind> parseBufferKind(const std::string &s) {
  for (BufferKind k : {BufferKind::Weight, BufferKind::Arena, BufferKind::KVCache, BufferKind::Input,
                       BufferKind::State, BufferKind::Scratch})
    if (s == toString(k)) return k;
  return std::nullopt;
}

// ---- Writing the manifest.

json bindingToJson(const Binding &b) {
  return json{{"kind", toString(b.kind)}, {"weight", b.weight}, {"offset", b.offset}, {"size", b.size}};
}

json dispatchesToJson(const std::vector<Dispatch> &dispatches) {
  json list = json::array();
  for (const Dispatch &d : dispatches) {
    json bindings = json::array();
    for (const Binding &b : d.bindings) bindings.push_back(bindingToJson(b));
    json grid = json::array();
    for (const GridDim &g : d.grid) grid.push_back(json{{"mulT", g.mulT}, {"add", g.add}, {"div", g.div}});
    list.push_back(json{{"kernel", d.kernel},
                        {"label", d.label},
                        {"bindings", bindings},
                        {"grid", grid},
                        {"overlapsNext", d.overlapsNext}});
  }
  return list;
}

} // namespace

json requirementsToJson(const Requirements &r) {
  return json{{"shaderFloat16", r.shaderFloat16},
              {"storageBuffer16BitAccess", r.storageBuffer16BitAccess},
              {"maxStorageBufferRange", r.maxStorageBufferRange},
              {"maxSharedMemoryBytes", r.maxSharedMemoryBytes},
              {"vulkanMemoryModel", r.vulkanMemoryModel},
              {"subgroupSize", r.subgroupSize},
              {"deviceExtensions", r.deviceExtensions},
              {"subgroupArithmetic", r.subgroupArithmetic},
              {"minSubgroupSize", r.minSubgroupSize},
              {"bufferDeviceAddress", r.bufferDeviceAddress},
              {"pushConstantBytes", r.pushConstantBytes},
              {"cooperativeMatrixShapes", r.cooperativeMatrixShapes}};
}

namespace {

json manifestToJson(const Plan &plan) {
  json m;
  m["model"] =
      json{{"architecture", plan.model.architecture}, {"family", plan.model.family},
           {"vocabSize", plan.model.vocabSize},       {"hiddenSize", plan.model.hiddenSize},
           {"numLayers", plan.model.numLayers},       {"bosTokenIds", plan.model.bosTokenIds},
           {"eosTokenIds", plan.model.eosTokenIds},   {"configJson", plan.model.configJson},
           {"configPath", plan.model.configPath},     {"ignoredSourceKeys", plan.model.ignoredSourceKeys}};
  m["limits"] = json{{"maxSequence", plan.limits.maxSequence}, {"prefillChunk", plan.limits.prefillChunk}};
  m["requires"] = requirementsToJson(plan.requires_);
  m["target"] = plan.target;
  m["compilerVersion"] = plan.compilerVersion;
  m["bufferAccess"] = toString(plan.bufferAccess);

  json weights = json::array();
  for (const Weight &w : plan.weights)
    weights.push_back(json{{"name", w.name},
                           {"sourceKeys", w.sourceKeys},
                           {"shape", w.shape},
                           {"deviceDType", toString(w.deviceDType)},
                           {"layout", toString(w.layout)},
                           {"transpose", w.transpose},
                           {"sliceDim", w.sliceDim},
                           {"sliceStart", w.sliceStart},
                           {"sliceLength", w.sliceLength},
                           {"scaleColumnsBy", w.scaleColumnsBy}});
  m["weights"] = weights;

  m["kvCache"] = json{{"numLayers", plan.kvCache.numLayers}, {"numKVHeads", plan.kvCache.numKVHeads},
                      {"headDim", plan.kvCache.headDim},     {"dtype", toString(plan.kvCache.dtype)},
                      {"layout", plan.kvCache.layout},       {"bytes", plan.kvCache.bytes}};
  m["arenaBytes"] = plan.arenaBytes;
  m["inputBytes"] = plan.inputBytes;
  m["inputIds"] = bindingToJson(plan.inputIds);
  m["logits"] = bindingToJson(plan.logits);
  m["stateBytes"] = plan.stateBytes;
  m["scratchBytes"] = plan.scratchBytes;
  m["gpuArgmax"] = plan.gpuArgmax;
  m["decodeArgmaxLaunch"] = plan.decodeArgmaxLaunch;
  m["lastRowLogits"] = json{{"prefill", plan.lastRowLogits.prefill},
                            {"decode", plan.lastRowLogits.decode},
                            {"prefillDispatches", plan.lastRowLogits.prefillDispatches}};

  // The SPIR-V itself goes to the blob; the manifest says where each kernel's words are.
  json kernels = json::array();
  uint64_t wordOffset = 0;
  for (const Kernel &k : plan.kernels) {
    kernels.push_back(json{{"name", k.name},
                           {"numBindings", k.numBindings},
                           {"workgroupSize", k.workgroupSize},
                           {"spirvOffset", wordOffset},
                           {"spirvWords", k.spirv.size()}});
    wordOffset += k.spirv.size();
  }
  m["kernels"] = kernels;
  m["prefill"] = dispatchesToJson(plan.prefill);
  m["decode"] = dispatchesToJson(plan.decode);
  m["sampler"] = dispatchesToJson(plan.sampler);
  m["samplingOffset"] = plan.samplingOffset;
  return m;
}

// ---- Reading the manifest. Reader is a JSON value together with its path in the manifest
// ("weights[3].shape"), so that every error can say which key is missing or has the wrong type.

struct ManifestError {
  std::string message;
};

class Reader {
public:
  Reader(const json &value, std::string path) : value_(value), path_(std::move(path)) {}

  Reader operator[](const char *key) const {
    if (!value_.is_object()) fail("must be an object");
    std::string childPath = path_.empty() ? std::string(key) : path_ + "." + key;
    auto it = value_.find(key);
    if (it == value_.end()) throw ManifestError{"missing key '" + childPath + "'"};
    return Reader(*it, std::move(childPath));
  }

  size_t size() const {
    if (!value_.is_array()) fail("must be an array");
    return value_.size();
  }

  Reader operator[](size_t index) const {
    size(); // checks that it is an array
    return Reader(value_[index], path_ + "[" + std::to_string(index) + "]");
  }

  // Reads an array, converting each element with `convert(Reader)`.
  template <typename Convert> auto list(Convert convert) const {
    std::vector<decltype(convert(std::declval<Reader>()))> out;
    size_t n = size();
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(convert((*this)[i]));
    return out;
  }

  std::string string() const {
    if (!value_.is_string()) fail("must be a string");
    return value_.get<std::string>();
  }

  bool boolean() const {
    if (!value_.is_boolean()) fail("must be a boolean");
    return value_.get<bool>();
  }

  uint64_t u64() const {
    if (!value_.is_number_unsigned()) fail("must be a non-negative integer");
    return value_.get<uint64_t>();
  }

  uint32_t u32() const {
    if (!value_.is_number_unsigned() || value_.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      fail("must be an integer in [0, 2^32)");
    return uint32_t(value_.get<uint64_t>());
  }

  int64_t i64() const {
    if (value_.is_number_unsigned()) {
      if (value_.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail("must be a 64-bit signed integer");
      return int64_t(value_.get<uint64_t>());
    }
    if (!value_.is_number_integer()) fail("must be an integer");
    return value_.get<int64_t>();
  }

  int32_t i32() const {
    int64_t v = i64();
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      fail("must be a 32-bit signed integer");
    return int32_t(v);
  }

  [[noreturn]] void fail(const std::string &problem) const {
    throw ManifestError{"'" + (path_.empty() ? std::string("manifest") : path_) + "' " + problem};
  }

private:
  const json &value_;
  std::string path_;
};

DType readDType(const Reader &r) {
  std::optional<DType> t = parseDType(r.string());
  if (!t) r.fail("is not a known dtype ('" + r.string() + "')");
  return *t;
}

Binding readBinding(const Reader &r) {
  Binding b;
  std::string kind = r["kind"].string();
  std::optional<BufferKind> parsed = parseBufferKind(kind);
  if (!parsed) r["kind"].fail("is not a known buffer kind ('" + kind + "')");
  b.kind = *parsed;
  b.weight = r["weight"].u32();
  b.offset = r["offset"].u64();
  b.size = r["size"].u64();
  return b;
}

std::vector<Dispatch> readDispatches(const Reader &r) {
  return r.list([](const Reader &d) {
    Dispatch out;
    out.kernel = d["kernel"].u32();
    out.label = d["label"].string();
    out.bindings = d["bindings"].list(readBinding);
    Reader grid = d["grid"];
    if (grid.size() != 3) grid.fail("must have 3 elements");
    for (size_t i = 0; i < 3; ++i) {
      out.grid[i].mulT = grid[i]["mulT"].i64();
      out.grid[i].add = grid[i]["add"].i64();
      out.grid[i].div = grid[i]["div"].i64();
    }
    out.overlapsNext = d["overlapsNext"].boolean();
    return out;
  });
}

Plan readManifest(const json &manifest, const uint8_t *blob, uint64_t blobWords) {
  Reader root(manifest, "");
  if (!manifest.is_object()) throw ManifestError{"not a JSON object"};
  Plan plan;

  Reader model = root["model"];
  plan.model.architecture = model["architecture"].string();
  plan.model.family = model["family"].string();
  plan.model.vocabSize = model["vocabSize"].i64();
  plan.model.hiddenSize = model["hiddenSize"].i64();
  plan.model.numLayers = model["numLayers"].i64();
  plan.model.bosTokenIds = model["bosTokenIds"].list([](const Reader &r) { return r.i64(); });
  plan.model.eosTokenIds = model["eosTokenIds"].list([](const Reader &r) { return r.i64(); });
  plan.model.configJson = model["configJson"].string();
  plan.model.configPath = model["configPath"].string();
  plan.model.ignoredSourceKeys = model["ignoredSourceKeys"].list([](const Reader &r) { return r.string(); });

  plan.limits.maxSequence = root["limits"]["maxSequence"].u32();
  plan.limits.prefillChunk = root["limits"]["prefillChunk"].u32();

  Reader req = root["requires"];
  plan.requires_.shaderFloat16 = req["shaderFloat16"].boolean();
  plan.requires_.storageBuffer16BitAccess = req["storageBuffer16BitAccess"].boolean();
  plan.requires_.maxStorageBufferRange = req["maxStorageBufferRange"].u64();
  plan.requires_.maxSharedMemoryBytes = req["maxSharedMemoryBytes"].u32();
  plan.requires_.vulkanMemoryModel = req["vulkanMemoryModel"].boolean();
  plan.requires_.subgroupSize = req["subgroupSize"].u32();
  plan.requires_.deviceExtensions = req["deviceExtensions"].list([](const Reader &e) { return e.string(); });
  plan.requires_.subgroupArithmetic = req["subgroupArithmetic"].boolean();
  plan.requires_.minSubgroupSize = req["minSubgroupSize"].u32();
  plan.requires_.bufferDeviceAddress = req["bufferDeviceAddress"].boolean();
  plan.requires_.pushConstantBytes = req["pushConstantBytes"].u32();
  plan.requires_.cooperativeMatrixShapes =
      req["cooperativeMatrixShapes"].list([](const Reader &e) { return e.string(); });

  plan.target = root["target"].string();
  plan.compilerVersion = root["compilerVersion"].string();
  std::optional<BufferAccess> access = parseBufferAccess(root["bufferAccess"].string());
  if (!access) root["bufferAccess"].fail("is not 'descriptors' or 'addresses'");
  plan.bufferAccess = *access;

  plan.weights = root["weights"].list([](const Reader &r) {
    Weight w;
    w.name = r["name"].string();
    w.sourceKeys = r["sourceKeys"].list([](const Reader &k) { return k.string(); });
    w.shape = r["shape"].list([](const Reader &d) { return d.i64(); });
    w.deviceDType = readDType(r["deviceDType"]);
    std::optional<Layout> layout = parseLayout(r["layout"].string());
    if (!layout) r["layout"].fail("is not a known layout ('" + r["layout"].string() + "')");
    w.layout = *layout;
    w.transpose = r["transpose"].boolean();
    w.sliceDim = r["sliceDim"].i32();
    w.sliceStart = r["sliceStart"].i64();
    w.sliceLength = r["sliceLength"].i64();
    w.scaleColumnsBy = r["scaleColumnsBy"].i32();
    return w;
  });

  Reader kv = root["kvCache"];
  plan.kvCache.numLayers = kv["numLayers"].i64();
  plan.kvCache.numKVHeads = kv["numKVHeads"].i64();
  plan.kvCache.headDim = kv["headDim"].i64();
  plan.kvCache.dtype = readDType(kv["dtype"]);
  plan.kvCache.layout = kv["layout"].string();
  plan.kvCache.bytes = kv["bytes"].u64();

  plan.arenaBytes = root["arenaBytes"].u64();
  plan.inputBytes = root["inputBytes"].u64();
  plan.inputIds = readBinding(root["inputIds"]);
  plan.logits = readBinding(root["logits"]);
  plan.stateBytes = root["stateBytes"].u64();
  plan.scratchBytes = root["scratchBytes"].u64();
  plan.gpuArgmax = root["gpuArgmax"].boolean();
  plan.decodeArgmaxLaunch = root["decodeArgmaxLaunch"].boolean();
  plan.lastRowLogits = {root["lastRowLogits"]["prefill"].i32(), root["lastRowLogits"]["decode"].i32(),
                        root["lastRowLogits"]["prefillDispatches"].i32()};

  // Kernels share no words (serialize lays them out one after another): otherwise a small file could make the
  // reader copy a large blob once per kernel.
  uint64_t wordsUsed = 0;
  plan.kernels = root["kernels"].list([&](const Reader &r) {
    Kernel k;
    k.name = r["name"].string();
    k.numBindings = r["numBindings"].u32();
    Reader wg = r["workgroupSize"];
    if (wg.size() != 3) wg.fail("must have 3 elements");
    for (size_t i = 0; i < 3; ++i) k.workgroupSize[i] = wg[i].u32();
    uint64_t offset = r["spirvOffset"].u64();
    uint64_t words = r["spirvWords"].u64();
    if (offset > blobWords || words > blobWords - offset)
      r.fail("SPIR-V words [" + std::to_string(offset) + ", +" + std::to_string(words) +
             ") lie outside the blob of " + std::to_string(blobWords) + " words");
    if (words > blobWords - wordsUsed)
      r.fail("SPIR-V words [" + std::to_string(offset) + ", +" + std::to_string(words) +
             ") and those of the kernels before it add up to more than the blob's " +
             std::to_string(blobWords) + " words: kernels may not share words");
    wordsUsed += words;
    k.spirv.resize(words);
    for (uint64_t i = 0; i < words; ++i) k.spirv[i] = getU32(blob + 4 * (offset + i));
    return k;
  });

  plan.prefill = readDispatches(root["prefill"]);
  plan.decode = readDispatches(root["decode"]);
  plan.sampler = readDispatches(root["sampler"]);
  plan.samplingOffset = root["samplingOffset"].u64();
  return plan;
}

// ---- Consistency checks.

std::string rangeText(uint64_t offset, uint64_t size) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(size) + ")";
}

bool isKnown(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I32;
}

// Checks one binding; `where` says whose binding it is for the message.
void validateBinding(const Plan &plan, const Binding &b, const std::string &where) {
  if (b.kind == BufferKind::Weight) {
    if (b.weight >= plan.weights.size())
      throw PlanError(where + " names weight " + std::to_string(b.weight) + " but the plan has " +
                      std::to_string(plan.weights.size()) + " weights");
    return;
  }
  uint64_t limit = 0;
  const char *buffer = "";
  switch (b.kind) {
  case BufferKind::Arena:
    limit = plan.arenaBytes;
    buffer = "arena";
    break;
  case BufferKind::KVCache:
    limit = plan.kvCache.bytes;
    buffer = "KV cache";
    break;
  case BufferKind::Input:
    limit = plan.inputBytes;
    buffer = "input buffer";
    break;
  case BufferKind::State:
    limit = plan.stateBytes;
    buffer = "state buffer";
    break;
  case BufferKind::Scratch:
    limit = plan.scratchBytes;
    buffer = "scratch buffer";
    break;
  default:
    throw PlanError(where + " has an unknown buffer kind " + std::to_string(int(b.kind)));
  }
  if (b.size == 0) throw PlanError(where + " has size 0");
  if (plan.bufferAccess == BufferAccess::Addresses && b.offset % kBufferAddressAlignment != 0)
    throw PlanError(where + ": " + buffer + " offset " + std::to_string(b.offset) + " is not a multiple of " +
                    std::to_string(kBufferAddressAlignment) + " (kernels reach their bindings by address)");
  // offset + size may overflow; compare against what is left after the offset instead.
  if (b.offset > limit || b.size > limit - b.offset)
    throw PlanError(where + ": " + buffer + " range " + rangeText(b.offset, b.size) + " lies outside the " +
                    std::to_string(limit) + " bytes of the " + buffer);
}

void validateDispatches(const Plan &plan, const std::vector<Dispatch> &dispatches, const std::string &what,
                        const char *schedule) {
  for (size_t i = 0; i < dispatches.size(); ++i) {
    const Dispatch &d = dispatches[i];
    std::string where = what + ": " + schedule + " dispatch " + std::to_string(i) + " '" + d.label + "'";
    if (d.kernel >= plan.kernels.size())
      throw PlanError(where + " uses kernel " + std::to_string(d.kernel) + " but the plan has " +
                      std::to_string(plan.kernels.size()) + " kernels");
    const Kernel &kernel = plan.kernels[d.kernel];
    if (d.bindings.size() != kernel.numBindings)
      throw PlanError(where + " has " + std::to_string(d.bindings.size()) + " bindings but kernel '" +
                      kernel.name + "' takes " + std::to_string(kernel.numBindings));
    for (size_t b = 0; b < d.bindings.size(); ++b)
      validateBinding(plan, d.bindings[b], where + ": binding " + std::to_string(b));
    for (size_t axis = 0; axis < 3; ++axis)
      if (d.grid[axis].div <= 0)
        throw PlanError(where + ": grid dimension " + std::to_string(axis) + " has divisor " +
                        std::to_string(d.grid[axis].div) + " (must be > 0)");
    if (d.overlapsNext && i + 1 == dispatches.size())
      throw PlanError(where + " overlaps the next dispatch, but it is the schedule's last");
  }
}

void validateLastRowLogits(const Plan &plan, const std::string &what) {
  const Plan::LastRowLogits &l = plan.lastRowLogits;
  if (l.prefill == -1 && l.decode == -1) return;
  if (l.prefill < 0 || size_t(l.prefill) >= plan.prefill.size() || l.decode < 0 ||
      size_t(l.decode) >= plan.decode.size())
    throw PlanError(what + ": lastRowLogits names prefill dispatch " + std::to_string(l.prefill) +
                    " and decode dispatch " + std::to_string(l.decode) + ", which the schedules of " +
                    std::to_string(plan.prefill.size()) + " and " + std::to_string(plan.decode.size()) +
                    " dispatches do not have");
  if (l.prefillDispatches < 1 || l.prefillDispatches > 2 ||
      size_t(l.prefill) + size_t(l.prefillDispatches) > plan.prefill.size())
    throw PlanError(what + ": lastRowLogits stands in for " + std::to_string(l.prefillDispatches) +
                    " prefill dispatches from " + std::to_string(l.prefill) + " (1 or 2, within the " +
                    std::to_string(plan.prefill.size()) + " of the schedule)");
  const std::vector<Binding> &prefill = plan.prefill[size_t(l.prefill)].bindings,
                             &decode = plan.decode[size_t(l.decode)].bindings;
  if (!extendsBindings(decode, prefill))
    throw PlanError(what + ": lastRowLogits pairs prefill dispatch '" +
                    plan.prefill[size_t(l.prefill)].label + "' with decode dispatch '" +
                    plan.decode[size_t(l.decode)].label + "', whose bindings do not extend its own");
}

void validateWeights(const Plan &plan, const std::string &what) {
  std::set<std::string> seen;
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const Weight &w = plan.weights[i];
    std::string where = what + ": weight " + std::to_string(i) + " '" + w.name + "'";
    if (w.name.empty()) throw PlanError(where + " has an empty name");
    if (!seen.insert(w.name).second) throw PlanError(where + " appears twice");
    if (!isKnown(w.deviceDType)) throw PlanError(where + " has an unknown device dtype");
    if (w.layout != Layout::RowMajor) throw PlanError(where + " has an unknown layout");
    if (w.shape.empty()) throw PlanError(where + " has an empty shape");
    uint64_t bytes = byteSize(w.deviceDType);
    for (int64_t dim : w.shape) {
      if (dim <= 0) throw PlanError(where + " has a dimension " + std::to_string(dim) + " (must be > 0)");
      if (__builtin_mul_overflow(bytes, uint64_t(dim), &bytes))
        throw PlanError(where + " is too large: its byte size overflows 64 bits");
    }
    if (w.sliceDim < -1 || w.sliceDim >= int64_t(w.shape.size()))
      throw PlanError(where + " slices dimension " + std::to_string(w.sliceDim) + " of a rank-" +
                      std::to_string(w.shape.size()) + " shape");
    if (w.sliceDim >= 0) {
      if (w.sliceStart < 0 || w.sliceLength <= 0)
        throw PlanError(where + " has slice start " + std::to_string(w.sliceStart) + " and length " +
                        std::to_string(w.sliceLength) + " (start must be >= 0 and length > 0)");
      // The shape is the device shape, after the slice: the sliced dimension is the slice's length.
      if (w.shape[w.sliceDim] != w.sliceLength)
        throw PlanError(where + " has shape[" + std::to_string(w.sliceDim) +
                        "] = " + std::to_string(w.shape[w.sliceDim]) + " but a slice of length " +
                        std::to_string(w.sliceLength));
    }
  }
  // Once every weight's own shape is known good: the weights that scale others' columns.
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const Weight &w = plan.weights[i];
    if (w.scaleColumnsBy == -1) continue;
    std::string where = what + ": weight " + std::to_string(i) + " '" + w.name + "'";
    if (w.scaleColumnsBy < 0 || size_t(w.scaleColumnsBy) >= plan.weights.size() ||
        size_t(w.scaleColumnsBy) == i)
      throw PlanError(where + " scales its columns by weight " + std::to_string(w.scaleColumnsBy) + " of " +
                      std::to_string(plan.weights.size()));
    const Weight &scale = plan.weights[size_t(w.scaleColumnsBy)];
    if (w.shape.size() != 2 || scale.shape.size() != 1 || scale.shape[0] != w.shape[1] ||
        scale.scaleColumnsBy != -1)
      throw PlanError(where + " scales its columns by '" + scale.name +
                      "', which is not an unscaled vector of its row length");
  }
}

void validateKernels(const Plan &plan, const std::string &what) {
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const Kernel &k = plan.kernels[i];
    std::string where = what + ": kernel " + std::to_string(i) + " '" + k.name + "'";
    if (k.name.empty()) throw PlanError(where + " has an empty name");
    if (k.spirv.empty()) throw PlanError(where + " has no SPIR-V");
    if (k.spirv[0] != kSpirvMagic) throw PlanError(where + " does not start with the SPIR-V magic number");
    for (uint32_t size : k.workgroupSize)
      if (size == 0) throw PlanError(where + " has a workgroup size of 0");
    if (k.numBindings > kMaxBindings)
      throw PlanError(where + " has " + std::to_string(k.numBindings) + " bindings (at most " +
                      std::to_string(kMaxBindings) + ")");
    if (pushConstantBytes(plan.bufferAccess, k) > plan.requires_.pushConstantBytes)
      throw PlanError(where + " takes " + std::to_string(pushConstantBytes(plan.bufferAccess, k)) +
                      " bytes of push constants, more than requires.pushConstantBytes (" +
                      std::to_string(plan.requires_.pushConstantBytes) + ")");
  }
  if (plan.bufferAccess == BufferAccess::Addresses && !plan.requires_.bufferDeviceAddress)
    throw PlanError(what + ": kernels that reach their buffers by address need requires.bufferDeviceAddress");
}

} // namespace

// ---- Enums.

const char *toString(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  }
  return "unknown";
}

std::optional<DType> parseDType(const std::string &s) {
  // Case-insensitive so that "F16" (safetensors spelling) and "f16" (ours) both work.
  std::string l = lower(s);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32})
    if (l == toString(t)) return t;
  return std::nullopt;
}

size_t byteSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  }
  return 0;
}

const char *toString(Layout l) {
  switch (l) {
  case Layout::RowMajor:
    return "row_major";
  }
  return "unknown";
}

std::optional<Layout> parseLayout(const std::string &s) {
  if (lower(s) == toString(Layout::RowMajor)) return Layout::RowMajor;
  return std::nullopt;
}

const char *toString(BufferAccess a) {
  switch (a) {
  case BufferAccess::Descriptors:
    return "descriptors";
  case BufferAccess::Addresses:
    return "addresses";
  }
  return "unknown";
}

std::optional<BufferAccess> parseBufferAccess(const std::string &s) {
  for (BufferAccess a : {BufferAccess::Descriptors, BufferAccess::Addresses})
    if (s == toString(a)) return a;
  return std::nullopt;
}

uint32_t pushConstantBytes(BufferAccess access, const Kernel &kernel) {
  // numBindings is at most kMaxBindings in a valid plan; the clamp keeps an invalid one from wrapping.
  const uint32_t addresses =
      access == BufferAccess::Addresses ? std::min(kernel.numBindings, kMaxBindings) : 0;
  return kPushConstantBytes + 8 * addresses;
}

const char *toString(BufferKind k) {
  switch (k) {
  case BufferKind::Weight:
    return "weight";
  case BufferKind::Arena:
    return "arena";
  case BufferKind::KVCache:
    return "kv_cache";
  case BufferKind::Input:
    return "input";
  case BufferKind::State:
    return "state";
  case BufferKind::Scratch:
    return "scratch";
  }
  return "unknown";
}

uint64_t Weight::bytes() const {
  // Saturates instead of wrapping so that an absurd shape cannot look small; validate() rejects it anyway.
  uint64_t total = byteSize(deviceDType);
  for (int64_t dim : shape) {
    if (dim <= 0) return 0;
    if (__builtin_mul_overflow(total, uint64_t(dim), &total)) return std::numeric_limits<uint64_t>::max();
  }
  return total;
}

uint32_t GridDim::evaluate(uint32_t tokens) const {
  if (div <= 0) return 0;
  // 128-bit arithmetic: mulT * tokens + add cannot overflow for any int64 coefficients.
  __int128 numerator = __int128(mulT) * tokens + add;
  if (numerator <= 0) return 0;
  __int128 count = (numerator + div - 1) / div;
  return count > std::numeric_limits<uint32_t>::max() ? std::numeric_limits<uint32_t>::max()
                                                      : uint32_t(count);
}

// ---- Validation.

namespace {
// The cache holds f32 or f16 (kernels read f16 a value at a time: 16-bit storage), and its size is its
// shape's, so that every layer's range the bindings name lies inside it.
void validateKVCache(const Plan &plan, const std::string &what) {
  const KVCache &kv = plan.kvCache;
  if (!isKnown(kv.dtype)) throw PlanError(what + ": kvCache has an unknown dtype");
  if (kv.dtype != DType::F32 && kv.dtype != DType::F16)
    throw PlanError(what + ": kvCache holds " + toString(kv.dtype) + "; f32 or f16 are supported");
  if (kv.dtype == DType::F16 && !plan.requires_.storageBuffer16BitAccess)
    throw PlanError(what + ": an f16 kvCache needs requires.storageBuffer16BitAccess");
  if (kv.numLayers < 0 || kv.numKVHeads < 0 || kv.headDim < 0)
    throw PlanError(what + ": kvCache has a negative dimension");
  const unsigned __int128 bytes = (unsigned __int128)2 * uint64_t(kv.numLayers) * uint64_t(kv.numKVHeads) *
                                  plan.limits.maxSequence * uint64_t(kv.headDim) * byteSize(kv.dtype);
  if (bytes != kv.bytes)
    throw PlanError(what + ": kvCache.bytes is " + std::to_string(kv.bytes) +
                    ", not 2 · layers · kv heads · " + "maxSequence · head dim · " +
                    std::to_string(byteSize(kv.dtype)) + " bytes");
}
// The sampler replaces the greedy token in the state's token list, and its words fit the state buffer.
void validateSampler(const Plan &plan, const std::string &what) {
  if (plan.sampler.empty()) return;
  if (!plan.gpuArgmax) throw PlanError(what + ": a GPU sampler needs the GPU argmax's state (gpuArgmax)");
  if (plan.sampler.size() != kSamplerStages)
    throw PlanError(what + ": the sampler has " + std::to_string(plan.sampler.size()) + " dispatches, not " +
                    std::to_string(kSamplerStages));
  const uint64_t tokensEnd = (kStateHeaderWords + plan.limits.maxSequence) * 4;
  const uint64_t bytes = samplingWords(plan.model.vocabSize) * 4;
  if (plan.samplingOffset < tokensEnd || plan.samplingOffset % 4 != 0 ||
      plan.samplingOffset > plan.stateBytes || bytes > plan.stateBytes - plan.samplingOffset)
    throw PlanError(what + ": the sampling words " + rangeText(plan.samplingOffset, bytes) +
                    " do not lie in the state buffer of " + std::to_string(plan.stateBytes) +
                    " bytes after its token list");
}
} // namespace

void validate(const Plan &plan, const std::string &what) {
  if (plan.limits.maxSequence == 0) throw PlanError(what + ": limits.maxSequence must be > 0");
  if (plan.limits.prefillChunk == 0) throw PlanError(what + ": limits.prefillChunk must be > 0");
  validateKVCache(plan, what);
  validateWeights(plan, what);
  validateKernels(plan, what);
  if (plan.inputIds.kind != BufferKind::Input)
    throw PlanError(what + ": inputIds must be in the input buffer, not the " +
                    std::string(toString(plan.inputIds.kind)) + " buffer");
  validateBinding(plan, plan.inputIds, what + ": inputIds");
  if (plan.logits.kind == BufferKind::Weight) throw PlanError(what + ": logits cannot be a weight");
  if (plan.gpuArgmax && plan.stateBytes < (kStateHeaderWords + plan.limits.maxSequence) * 4)
    throw PlanError(what + ": the state buffer of " + std::to_string(plan.stateBytes) +
                    " bytes cannot hold the tokens of " + std::to_string(plan.limits.maxSequence) +
                    " positions");
  validateBinding(plan, plan.logits, what + ": logits");
  if (plan.decodeArgmaxLaunch && (!plan.gpuArgmax || plan.decode.empty()))
    throw PlanError(what + ": decodeArgmaxLaunch needs a decode schedule that ends with the GPU argmax "
                           "(gpuArgmax)");
  validateDispatches(plan, plan.prefill, what, "prefill");
  validateDispatches(plan, plan.decode, what, "decode");
  validateDispatches(plan, plan.sampler, what, "sampler");
  validateSampler(plan, what);
  validateLastRowLogits(plan, what);
}

// ---- Serialisation.

bool extendsBindings(const std::vector<Binding> &bindings, const std::vector<Binding> &base) {
  if (base.empty() || bindings.size() < base.size() || bindings.back() != base.back()) return false;
  return std::equal(base.begin(), base.end() - 1, bindings.begin());
}

std::vector<uint8_t> serialize(const Plan &plan) {
  validate(plan, "plan");
  std::string manifest;
  try {
    manifest = manifestToJson(plan).dump(1);
  } catch (const json::exception &e) {
    // dump() throws on strings that are not UTF-8 (a label or config from a bad source).
    throw PlanError(std::string("plan: cannot write the manifest: ") + e.what());
  }

  uint64_t blobWords = 0;
  for (const Kernel &k : plan.kernels) blobWords += k.spirv.size();

  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + manifest.size() + 4 * blobWords + kChecksumBytes);
  for (char c : kMagic) out.push_back(uint8_t(c));
  putU32(out, kFormatVersion);
  putU32(out, 0); // flags
  putU64(out, manifest.size());
  putU64(out, 4 * blobWords);
  out.insert(out.end(), manifest.begin(), manifest.end());
  for (const Kernel &k : plan.kernels)
    for (uint32_t word : k.spirv) putU32(out, word);
  putU64(out, XXH64(out.data(), out.size(), 0));
  return out;
}

Plan deserialize(const uint8_t *data, size_t size, const std::string &what) {
  if (data == nullptr || size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0)
    throw PlanError(what + ": not a gerbil plan (no GERBPLAN magic)");
  if (size < kHeaderBytes + kChecksumBytes)
    throw PlanError(what + ": truncated: " + std::to_string(size) + " bytes is shorter than a plan header");
  uint32_t version = getU32(data + 8);
  if (version != kFormatVersion)
    throw PlanError(what + ": format version " + std::to_string(version) + ", this gerbil reads version " +
                    std::to_string(kFormatVersion) + ": recompile with this gerbilc");
  uint32_t flags = getU32(data + 12);
  uint64_t manifestBytes = getU64(data + 16);
  uint64_t blobBytes = getU64(data + 24);

  // Compare each length with what is left of the file, so that no sum can overflow.
  uint64_t available = size - kHeaderBytes - kChecksumBytes;
  if (manifestBytes > available || blobBytes > available - manifestBytes ||
      manifestBytes + blobBytes != available)
    throw PlanError(what + ": manifest length " + std::to_string(manifestBytes) + " and blob length " +
                    std::to_string(blobBytes) + " do not match the file size " + std::to_string(size) +
                    ": the file is corrupt or truncated");

  uint64_t stored = getU64(data + size - kChecksumBytes);
  if (XXH64(data, size - kChecksumBytes, 0) != stored)
    throw PlanError(what + ": checksum mismatch: the file is corrupt or truncated");
  if (flags != 0) throw PlanError(what + ": unknown flags " + std::to_string(flags) + " in the header");
  if (blobBytes % 4 != 0)
    throw PlanError(what + ": the SPIR-V blob is " + std::to_string(blobBytes) +
                    " bytes, not a whole number of words");

  const char *manifestBegin = reinterpret_cast<const char *>(data + kHeaderBytes);
  json manifest;
  try {
    manifest = json::parse(manifestBegin, manifestBegin + manifestBytes);
  } catch (const json::exception &e) {
    throw PlanError(what + ": manifest: not valid JSON: " + e.what());
  }

  Plan plan;
  try {
    plan = readManifest(manifest, data + kHeaderBytes + manifestBytes, blobBytes / 4);
  } catch (const ManifestError &e) {
    throw PlanError(what + ": manifest: " + e.message);
  } catch (const json::exception &e) {
    // The Reader checks types before every access; this is a safety net, not the usual path.
    throw PlanError(what + ": manifest: " + e.what());
  }
  validate(plan, what);
  return plan;
}

// ---- Files.

uint64_t writeFile(const Plan &plan, const std::string &path) {
  std::vector<uint8_t> bytes = serialize(plan);
  // Write beside the destination and rename, so that a reader never sees half a plan and a failed write
  // leaves the old plan in place.
  static std::atomic<unsigned> counter{0};
  std::string temp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw PlanError("cannot write " + path + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      throw PlanError("cannot write " + path + ": " + std::strerror(err));
    }
    written += size_t(n);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw PlanError("cannot write " + path + ": " + std::strerror(err));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw PlanError("cannot write " + path + ": " + std::strerror(err));
  }
  return bytes.size();
}

Plan readFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw PlanError("cannot open " + path + ": " + std::strerror(errno));
  struct stat info;
  bool known = ::fstat(fd, &info) == 0;
  if (!known || !S_ISREG(info.st_mode)) {
    ::close(fd);
    if (known && S_ISDIR(info.st_mode)) // a model folder, most likely: the plan is what gerbilc makes of it
      throw PlanError("cannot open " + path + ": it is a folder, not a plan (gerbilc " + path +
                      "/config.json -o model.plan writes one)");
    throw PlanError("cannot open " + path + ": not a regular file");
  }
  if (uint64_t(info.st_size) > kMaxFileBytes) {
    ::close(fd);
    throw PlanError(path + ": " + std::to_string(info.st_size) +
                    " bytes is too large to be a plan (> 4 GiB)");
  }
  std::vector<uint8_t> bytes(size_t(info.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw PlanError("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break; // the file shrank under us; deserialize reports the truncation
    done += size_t(n);
  }
  ::close(fd);
  bytes.resize(done);
  return deserialize(bytes.data(), bytes.size(), path);
}

} // namespace gerbil::plan
