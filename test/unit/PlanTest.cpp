// The plan format: round trips, and a reader that rejects every malformed file with a message instead of
// crashing (truncations, flipped bytes, hand-made manifests with missing keys or wrong types).
#include "runtime/plan/Plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
// Inline xxhash into the test so that it can forge correctly checksummed files without linking libxxhash.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <unistd.h>

using namespace gerbil::plan;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<uint32_t> fakeSpirv(uint32_t seed, size_t words) {
  std::vector<uint32_t> spirv = {0x07230203, 0x00010500, 0, 100, 0};
  for (size_t i = spirv.size(); i < words; ++i) spirv.push_back(seed * 1000003u + uint32_t(i));
  return spirv;
}

Binding arena(uint64_t offset, uint64_t size) {
  return Binding{BufferKind::Arena, 0, offset, size};
}
Binding weightBinding(uint32_t index) {
  return Binding{BufferKind::Weight, index, 0, 0};
}

// A small but complete plan: every field differs from its default so that a dropped field shows.
Plan makePlan() {
  Plan plan;
  plan.model.architecture = "LlamaForCausalLM";
  plan.model.family = "llama";
  plan.model.vocabSize = 512;
  plan.model.hiddenSize = 64;
  plan.model.numLayers = 2;
  plan.model.bosTokenIds = {1};
  plan.model.eosTokenIds = {2, 7};
  plan.model.configJson = "{\"model_type\": \"llama\",\n \"note\": \"quotes \\\" and unicode \xc3\xa9\"}";
  plan.model.configPath = "/models/llama-tiny";
  plan.model.ignoredSourceKeys = {"*.rotary_emb.inv_freq", "model.layers.*.attn.bias"};
  plan.limits = {256, 32};
  plan.requires_ = {true,
                    true,
                    uint64_t(1) << 31,
                    16384,
                    true,
                    32,
                    {"VK_KHR_cooperative_matrix"},
                    true,
                    8,
                    false,
                    kPushConstantBytes,
                    {"16x16x16 f16*f16+f32->f32"}};
  plan.target = "rdna3";
  plan.compilerVersion = "gerbilc 0.1.0-test";

  Weight embed;
  embed.name = "embed";
  embed.sourceKeys = {"model.embed_tokens.weight", "transformer.wte.weight"};
  embed.shape = {512, 64};
  embed.deviceDType = DType::F16;
  Weight qkv;
  qkv.name = "layers.0.q";
  qkv.sourceKeys = {"transformer.h.0.attn.c_attn.weight"};
  qkv.shape = {64, 64};
  qkv.deviceDType = DType::BF16;
  qkv.transpose = true;
  qkv.sliceDim = 0;
  qkv.sliceStart = 64;
  qkv.sliceLength = 64;
  qkv.scaleColumnsBy = 2; // the norm before it, folded
  Weight norm;
  norm.name = "norm";
  norm.sourceKeys = {"model.norm.weight"};
  norm.shape = {64};
  plan.weights = {embed, qkv, norm};

  plan.kvCache = {2, 1, 32, DType::F16, "LHSd", 2 * 2 * 1 * 256 * 32 * 2};
  plan.arenaBytes = 1 << 20;
  plan.inputBytes = 32 * 4;
  plan.inputIds = Binding{BufferKind::Input, 0, 0, 128};
  plan.logits = arena(4096, 32 * 512 * 4);

  plan.kernels = {Kernel{"embed_lookup", fakeSpirv(1, 12), 3, {64, 1, 1}},
                  Kernel{"matmul_bf16", fakeSpirv(2, 40), 4, {16, 16, 1}}};

  Dispatch embedDispatch;
  embedDispatch.kernel = 0;
  embedDispatch.label = "embed";
  embedDispatch.bindings = {plan.inputIds, weightBinding(0), arena(0, 4096)};
  embedDispatch.grid = {GridDim{1, 0, 1}, GridDim{0, 1, 1}, GridDim{0, 1, 1}};
  Dispatch matmul;
  matmul.kernel = 1;
  matmul.label = "layers.0.q_proj";
  matmul.bindings = {arena(0, 4096), weightBinding(1), Binding{BufferKind::KVCache, 0, 512, 1024},
                     arena(4096, 8192)};
  matmul.grid = {GridDim{64, 15, 16}, GridDim{0, 4, 1}, GridDim{-1, 40, 2}};
  Dispatch decodeMatmul = matmul;
  decodeMatmul.label = "decode.layers.0.q_proj";
  decodeMatmul.grid[0] = GridDim{0, 4, 1};
  decodeMatmul.bindings[2] = Binding{BufferKind::Scratch, 0, 256, 768};
  plan.scratchBytes = 1024;
  plan.prefill = {embedDispatch, matmul};
  plan.decode = {decodeMatmul};
  return plan;
}

void expectBindingEqual(const Binding &a, const Binding &b, const std::string &where) {
  EXPECT_EQ(a.kind, b.kind) << where;
  EXPECT_EQ(a.weight, b.weight) << where;
  EXPECT_EQ(a.offset, b.offset) << where;
  EXPECT_EQ(a.size, b.size) << where;
}

void expectDispatchesEqual(const std::vector<Dispatch> &a, const std::vector<Dispatch> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kernel, b[i].kernel);
    EXPECT_EQ(a[i].label, b[i].label);
    EXPECT_EQ(a[i].overlapsNext, b[i].overlapsNext) << a[i].label;
    ASSERT_EQ(a[i].bindings.size(), b[i].bindings.size());
    for (size_t j = 0; j < a[i].bindings.size(); ++j)
      expectBindingEqual(a[i].bindings[j], b[i].bindings[j], a[i].label + " binding " + std::to_string(j));
    for (size_t axis = 0; axis < 3; ++axis) {
      EXPECT_EQ(a[i].grid[axis].mulT, b[i].grid[axis].mulT);
      EXPECT_EQ(a[i].grid[axis].add, b[i].grid[axis].add);
      EXPECT_EQ(a[i].grid[axis].div, b[i].grid[axis].div);
    }
  }
}

void expectPlansEqual(const Plan &a, const Plan &b) {
  EXPECT_EQ(a.model.architecture, b.model.architecture);
  EXPECT_EQ(a.model.family, b.model.family);
  EXPECT_EQ(a.model.vocabSize, b.model.vocabSize);
  EXPECT_EQ(a.model.hiddenSize, b.model.hiddenSize);
  EXPECT_EQ(a.model.numLayers, b.model.numLayers);
  EXPECT_EQ(a.model.bosTokenIds, b.model.bosTokenIds);
  EXPECT_EQ(a.model.eosTokenIds, b.model.eosTokenIds);
  EXPECT_EQ(a.model.configJson, b.model.configJson);
  EXPECT_EQ(a.model.configPath, b.model.configPath);
  EXPECT_EQ(a.model.ignoredSourceKeys, b.model.ignoredSourceKeys);
  EXPECT_EQ(a.limits.maxSequence, b.limits.maxSequence);
  EXPECT_EQ(a.limits.prefillChunk, b.limits.prefillChunk);
  EXPECT_EQ(a.requires_.shaderFloat16, b.requires_.shaderFloat16);
  EXPECT_EQ(a.requires_.storageBuffer16BitAccess, b.requires_.storageBuffer16BitAccess);
  EXPECT_EQ(a.requires_.maxStorageBufferRange, b.requires_.maxStorageBufferRange);
  EXPECT_EQ(a.requires_.maxSharedMemoryBytes, b.requires_.maxSharedMemoryBytes);
  EXPECT_EQ(a.requires_.vulkanMemoryModel, b.requires_.vulkanMemoryModel);
  EXPECT_EQ(a.requires_.subgroupSize, b.requires_.subgroupSize);
  EXPECT_EQ(a.requires_.deviceExtensions, b.requires_.deviceExtensions);
  EXPECT_EQ(a.requires_.subgroupArithmetic, b.requires_.subgroupArithmetic);
  EXPECT_EQ(a.requires_.minSubgroupSize, b.requires_.minSubgroupSize);
  EXPECT_EQ(a.requires_.bufferDeviceAddress, b.requires_.bufferDeviceAddress);
  EXPECT_EQ(a.requires_.cooperativeMatrixShapes, b.requires_.cooperativeMatrixShapes);
  EXPECT_EQ(a.requires_.pushConstantBytes, b.requires_.pushConstantBytes);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.bufferAccess, b.bufferAccess);
  EXPECT_EQ(a.compilerVersion, b.compilerVersion);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const Weight &x = a.weights[i], &y = b.weights[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.sourceKeys, y.sourceKeys);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.deviceDType, y.deviceDType);
    EXPECT_EQ(x.layout, y.layout);
    EXPECT_EQ(x.transpose, y.transpose);
    EXPECT_EQ(x.sliceDim, y.sliceDim);
    EXPECT_EQ(x.sliceStart, y.sliceStart);
    EXPECT_EQ(x.sliceLength, y.sliceLength);
    EXPECT_EQ(x.scaleColumnsBy, y.scaleColumnsBy);
  }
  EXPECT_EQ(a.kvCache.numLayers, b.kvCache.numLayers);
  EXPECT_EQ(a.kvCache.numKVHeads, b.kvCache.numKVHeads);
  EXPECT_EQ(a.kvCache.headDim, b.kvCache.headDim);
  EXPECT_EQ(a.kvCache.dtype, b.kvCache.dtype);
  EXPECT_EQ(a.kvCache.layout, b.kvCache.layout);
  EXPECT_EQ(a.kvCache.bytes, b.kvCache.bytes);
  EXPECT_EQ(a.arenaBytes, b.arenaBytes);
  EXPECT_EQ(a.inputBytes, b.inputBytes);
  EXPECT_EQ(a.scratchBytes, b.scratchBytes);
  EXPECT_EQ(a.gpuArgmax, b.gpuArgmax);
  EXPECT_EQ(a.decodeArgmaxLaunch, b.decodeArgmaxLaunch);
  expectBindingEqual(a.inputIds, b.inputIds, "inputIds");
  expectBindingEqual(a.logits, b.logits, "logits");
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    EXPECT_EQ(a.kernels[i].name, b.kernels[i].name);
    EXPECT_EQ(a.kernels[i].spirv, b.kernels[i].spirv);
    EXPECT_EQ(a.kernels[i].numBindings, b.kernels[i].numBindings);
    EXPECT_EQ(a.kernels[i].workgroupSize, b.kernels[i].workgroupSize);
  }
  expectDispatchesEqual(a.prefill, b.prefill);
  expectDispatchesEqual(a.decode, b.decode);
  EXPECT_EQ(a.lastRowLogits.prefill, b.lastRowLogits.prefill);
  EXPECT_EQ(a.lastRowLogits.decode, b.lastRowLogits.decode);
  EXPECT_EQ(a.lastRowLogits.prefillDispatches, b.lastRowLogits.prefillDispatches);
}

uint64_t readU64(const std::vector<uint8_t> &bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(bytes[at + i]) << (8 * i);
  return v;
}

void writeU64(std::vector<uint8_t> &bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = uint8_t(v >> (8 * i));
}

// Splits a serialized plan into its manifest text and blob.
std::pair<std::string, std::vector<uint8_t>> split(const std::vector<uint8_t> &file) {
  uint64_t manifestBytes = readU64(file, 16), blobBytes = readU64(file, 24);
  std::string manifest(file.begin() + 32, file.begin() + 32 + manifestBytes);
  std::vector<uint8_t> blob(file.begin() + 32 + manifestBytes, file.begin() + 32 + manifestBytes + blobBytes);
  return {manifest, blob};
}

// Builds a plan file by hand, with a correct checksum, so that the manifest checks are reached.
std::vector<uint8_t> forge(const std::string &manifest, const std::vector<uint8_t> &blob,
                           uint32_t version = kFormatVersion) {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(version >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(0);
  out.resize(32);
  writeU64(out, 16, manifest.size());
  writeU64(out, 24, blob.size());
  out.insert(out.end(), manifest.begin(), manifest.end());
  out.insert(out.end(), blob.begin(), blob.end());
  uint64_t checksum = XXH64(out.data(), out.size(), 0);
  out.resize(out.size() + 8);
  writeU64(out, out.size() - 8, checksum);
  return out;
}

// The message of the PlanError that `f` throws; fails the test when it throws nothing or something else.
template <typename F> std::string errorOf(F f) {
  try {
    f();
  } catch (const PlanError &e) {
    return e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "expected PlanError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected PlanError, nothing was thrown";
  return "";
}

// Deserializes a hand-edited manifest (and the blob of makePlan) and returns the error message.
std::string manifestError(const std::function<void(json &)> &edit) {
  auto [manifestText, blob] = split(serialize(makePlan()));
  json manifest = json::parse(manifestText);
  edit(manifest);
  std::vector<uint8_t> file = forge(manifest.dump(), blob);
  return errorOf([&] { deserialize(file.data(), file.size(), "plan.bin"); });
}

std::string validateError(const std::function<void(Plan &)> &edit) {
  Plan plan = makePlan();
  edit(plan);
  return errorOf([&] { validate(plan, "plan.bin"); });
}

fs::path uniqueTempPath(const std::string &stem) {
  static int counter = 0;
  return fs::temp_directory_path() /
         (stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
          std::to_string(std::random_device{}()));
}

} // namespace

TEST(Plan, RoundTripKeepsEveryField) {
  Plan plan = makePlan();
  plan.prefill[0].overlapsNext = true;
  std::vector<uint8_t> bytes = serialize(plan);
  Plan back = deserialize(bytes.data(), bytes.size(), "plan.bin");
  expectPlansEqual(plan, back);
  EXPECT_TRUE(back.prefill[0].overlapsNext);
  // Serialisation is deterministic: the same plan gives the same bytes.
  EXPECT_EQ(serialize(back), bytes);
}

TEST(Plan, HeaderLayout) {
  Plan plan = makePlan();
  std::vector<uint8_t> bytes = serialize(plan);
  ASSERT_GE(bytes.size(), 40u);
  EXPECT_EQ(std::memcmp(bytes.data(), "GERBPLAN", 8), 0);
  EXPECT_EQ(bytes[8], kFormatVersion);
  EXPECT_EQ(bytes[12], 0); // flags
  uint64_t manifestBytes = readU64(bytes, 16), blobBytes = readU64(bytes, 24);
  EXPECT_EQ(blobBytes, 4 * (plan.kernels[0].spirv.size() + plan.kernels[1].spirv.size()));
  EXPECT_EQ(32 + manifestBytes + blobBytes + 8, bytes.size());
  EXPECT_EQ(readU64(bytes, bytes.size() - 8), XXH64(bytes.data(), bytes.size() - 8, 0));
  // The blob is the kernels' words in order, little endian.
  const uint8_t *blob = bytes.data() + 32 + manifestBytes;
  EXPECT_EQ(blob[0], 0x03);
  EXPECT_EQ(blob[3], 0x07);
  EXPECT_EQ(blob[4 * plan.kernels[0].spirv.size()], 0x03);
  EXPECT_TRUE(json::parse(split(bytes).first).is_object());
}

TEST(Plan, EveryTruncationIsRejected) {
  std::vector<uint8_t> bytes = serialize(makePlan());
  for (size_t length = 0; length < bytes.size(); ++length) {
    // A copy of exactly `length` bytes, so that a sanitizer build catches any read past the end.
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + length);
    EXPECT_THROW(deserialize(prefix.data(), prefix.size(), "plan.bin"), PlanError) << "length " << length;
  }
  EXPECT_THROW(deserialize(nullptr, 0, "plan.bin"), PlanError);
}

TEST(Plan, TrailingBytesAreRejected) {
  std::vector<uint8_t> bytes = serialize(makePlan());
  bytes.push_back(0);
  EXPECT_THROW(deserialize(bytes.data(), bytes.size()), PlanError);
}

TEST(Plan, EveryFlippedByteIsRejected) {
  const std::vector<uint8_t> bytes = serialize(makePlan());
  for (size_t at = 0; at < bytes.size(); ++at)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::vector<uint8_t> corrupt = bytes;
      corrupt[at] ^= mask;
      EXPECT_THROW(deserialize(corrupt.data(), corrupt.size(), "plan.bin"), PlanError)
          << "byte " << at << " mask " << int(mask);
    }
}

TEST(Plan, ChecksumMismatchMessage) {
  std::vector<uint8_t> bytes = serialize(makePlan());
  bytes[40] ^= 0x20; // inside the manifest
  EXPECT_EQ(errorOf([&] { deserialize(bytes.data(), bytes.size(), "plan.bin"); }),
            "plan.bin: checksum mismatch: the file is corrupt or truncated");
}

TEST(Plan, WrongMagicMessage) {
  std::vector<uint8_t> bytes = serialize(makePlan());
  bytes[0] = 'X';
  std::string message = errorOf([&] { deserialize(bytes.data(), bytes.size(), "plan.bin"); });
  EXPECT_EQ(message.rfind("plan.bin: ", 0), 0u) << message;
  EXPECT_NE(message.find("not a gerbil plan"), std::string::npos) << message;

  const char text[] = "{\"weights\": []}";
  message = errorOf([&] { deserialize(reinterpret_cast<const uint8_t *>(text), sizeof text, "model.json"); });
  EXPECT_NE(message.find("model.json: not a gerbil plan"), std::string::npos) << message;
}

TEST(Plan, WrongVersionMessage) {
  auto [manifest, blob] = split(serialize(makePlan()));
  const uint32_t older = kFormatVersion - 1;
  std::vector<uint8_t> bytes = forge(manifest, blob, older);
  EXPECT_EQ(errorOf([&] { deserialize(bytes.data(), bytes.size(), "plan.bin"); }),
            "plan.bin: format version " + std::to_string(older) + ", this gerbil reads version " +
                std::to_string(kFormatVersion) + ": recompile with this gerbilc");
  // The version is checked before the checksum: an old file gets the useful message, not "corrupt".
  bytes[bytes.size() - 1] ^= 1;
  EXPECT_NE(errorOf([&] {
              deserialize(bytes.data(), bytes.size(), "plan.bin");
            }).find("format version " + std::to_string(older)),
            std::string::npos);
}

TEST(Plan, LengthsLargerThanTheFileAreRejected) {
  std::vector<uint8_t> bytes = serialize(makePlan());
  for (uint64_t bogus : {std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max() - 31,
                         uint64_t(1) << 63, uint64_t(bytes.size())}) {
    std::vector<uint8_t> a = bytes, b = bytes;
    writeU64(a, 16, bogus);
    writeU64(b, 24, bogus);
    EXPECT_THROW(deserialize(a.data(), a.size()), PlanError);
    EXPECT_THROW(deserialize(b.data(), b.size()), PlanError);
  }
}

TEST(Plan, ForgedValidFileIsAccepted) {
  // The hand-made file path itself works, so the manifest tests below fail for the edit, not the forging.
  auto [manifest, blob] = split(serialize(makePlan()));
  std::vector<uint8_t> bytes = forge(manifest, blob);
  expectPlansEqual(deserialize(bytes.data(), bytes.size(), "plan.bin"), makePlan());
}

TEST(Plan, ManifestNotJson) {
  std::vector<uint8_t> bytes = forge("{\"model\": ", {});
  std::string message = errorOf([&] { deserialize(bytes.data(), bytes.size(), "plan.bin"); });
  EXPECT_EQ(message.rfind("plan.bin: manifest: not valid JSON", 0), 0u) << message;
  bytes = forge("[1, 2, 3]", {});
  message = errorOf([&] { deserialize(bytes.data(), bytes.size(), "plan.bin"); });
  EXPECT_EQ(message, "plan.bin: manifest: not a JSON object");
}

TEST(Plan, ManifestMissingKeyIsNamed) {
  EXPECT_EQ(manifestError([](json &m) { m["weights"][2].erase("shape"); }),
            "plan.bin: manifest: missing key 'weights[2].shape'");
  EXPECT_EQ(manifestError([](json &m) { m.erase("kernels"); }), "plan.bin: manifest: missing key 'kernels'");
  EXPECT_EQ(manifestError([](json &m) { m["model"].erase("vocabSize"); }),
            "plan.bin: manifest: missing key 'model.vocabSize'");
  EXPECT_EQ(manifestError([](json &m) { m["prefill"][1]["bindings"][2].erase("offset"); }),
            "plan.bin: manifest: missing key 'prefill[1].bindings[2].offset'");
  EXPECT_EQ(manifestError([](json &m) { m["decode"][0]["grid"][2].erase("div"); }),
            "plan.bin: manifest: missing key 'decode[0].grid[2].div'");
}

TEST(Plan, ManifestWrongTypeIsNamed) {
  EXPECT_EQ(manifestError([](json &m) { m["kernels"][0]["name"] = 5; }),
            "plan.bin: manifest: 'kernels[0].name' must be a string");
  EXPECT_EQ(manifestError([](json &m) { m["weights"] = json::object(); }),
            "plan.bin: manifest: 'weights' must be an array");
  EXPECT_EQ(manifestError([](json &m) { m["arenaBytes"] = -4; }),
            "plan.bin: manifest: 'arenaBytes' must be a non-negative integer");
  EXPECT_EQ(manifestError([](json &m) { m["arenaBytes"] = 4.5; }),
            "plan.bin: manifest: 'arenaBytes' must be a non-negative integer");
  EXPECT_EQ(manifestError([](json &m) { m["weights"][1]["transpose"] = "yes"; }),
            "plan.bin: manifest: 'weights[1].transpose' must be a boolean");
  EXPECT_EQ(manifestError([](json &m) { m["model"]["eosTokenIds"][1] = "2"; }),
            "plan.bin: manifest: 'model.eosTokenIds[1]' must be an integer");
  EXPECT_EQ(manifestError([](json &m) { m["limits"]["maxSequence"] = uint64_t(1) << 40; }),
            "plan.bin: manifest: 'limits.maxSequence' must be an integer in [0, 2^32)");
  EXPECT_EQ(manifestError([](json &m) { m["model"]["hiddenSize"] = std::numeric_limits<uint64_t>::max(); }),
            "plan.bin: manifest: 'model.hiddenSize' must be a 64-bit signed integer");
  EXPECT_EQ(manifestError([](json &m) { m["limits"] = json::array(); }),
            "plan.bin: manifest: 'limits' must be an object");
  EXPECT_EQ(manifestError([](json &m) { m["decode"][0]["grid"].erase(2); }),
            "plan.bin: manifest: 'decode[0].grid' must have 3 elements");
  std::string message = manifestError([](json &m) { m["weights"][0]["deviceDType"] = "f8"; });
  EXPECT_NE(message.find("'weights[0].deviceDType' is not a known dtype ('f8')"), std::string::npos)
      << message;
  message = manifestError([](json &m) { m["inputIds"]["kind"] = "texture"; });
  EXPECT_NE(message.find("'inputIds.kind' is not a known buffer kind"), std::string::npos) << message;
}

TEST(Plan, ManifestKernelOutsideBlob) {
  std::string message = manifestError([](json &m) { m["kernels"][1]["spirvWords"] = 1000; });
  EXPECT_NE(message.find("'kernels[1]' SPIR-V words"), std::string::npos) << message;
  message =
      manifestError([](json &m) { m["kernels"][1]["spirvOffset"] = std::numeric_limits<uint64_t>::max(); });
  EXPECT_NE(message.find("outside the blob"), std::string::npos) << message;
}

// Found reading the reader while fuzzing: kernels whose ranges overlap made the reader copy the blob once per
// kernel, so a plan of a few megabytes could ask for gigabytes. serialize never shares words between kernels.
TEST(Plan, ManifestKernelsCannotShareWords) {
  std::string message = manifestError([](json &m) {
    uint64_t blobWords = 0;
    for (const json &k : m["kernels"]) blobWords += k["spirvWords"].get<uint64_t>();
    for (json &k : m["kernels"]) {
      k["spirvOffset"] = 0;
      k["spirvWords"] = blobWords;
    }
  });
  EXPECT_NE(message.find("'kernels[1]' SPIR-V words [0, +"), std::string::npos) << message;
  EXPECT_NE(message.find("kernels may not share words"), std::string::npos) << message;
}

TEST(Plan, ManifestThatBreaksValidationIsRejected) {
  std::string message = manifestError([](json &m) { m["prefill"][0]["kernel"] = 9; });
  EXPECT_EQ(message.rfind("plan.bin: prefill dispatch 0 'embed'", 0), 0u) << message;
}

TEST(Plan, RandomManifestMutationsNeverCrash) {
  // Byte-level damage to the manifest, with the checksum repaired so that the parser sees it.
  auto [manifest, blob] = split(serialize(makePlan()));
  std::mt19937 random(12345);
  const char replacements[] = "{}[]\":,0123456789-.eE \\ntfalsu\x80\xff";
  for (int round = 0; round < 3000; ++round) {
    std::string damaged = manifest;
    int edits = 1 + int(random() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = random() % damaged.size();
      switch (random() % 3) {
      case 0:
        damaged[at] = replacements[random() % (sizeof replacements - 1)];
        break;
      case 1:
        damaged.erase(at, 1 + random() % 8);
        break;
      default:
        damaged.insert(at, 1, replacements[random() % (sizeof replacements - 1)]);
      }
      if (damaged.empty()) damaged.push_back('{');
    }
    std::vector<uint8_t> bytes = forge(damaged, blob);
    try {
      deserialize(bytes.data(), bytes.size(), "plan.bin");
    } catch (const PlanError &e) {
      EXPECT_EQ(std::string(e.what()).rfind("plan.bin: ", 0), 0u) << e.what();
    }
  }
}

TEST(Plan, ValidateAcceptsTheTestPlan) {
  EXPECT_NO_THROW(validate(makePlan()));
}

// The test plan with its q_proj's decode dispatch bound as the prefill one, paired as last-row logits.
Plan planWithLastRowLogits() {
  Plan plan = makePlan();
  plan.decode[0].bindings = plan.prefill[1].bindings;
  plan.lastRowLogits = {1, 0};
  return plan;
}

TEST(Plan, LastRowLogitsRoundTrip) {
  Plan plan = planWithLastRowLogits();
  EXPECT_NO_THROW(validate(plan));
  std::vector<uint8_t> bytes = serialize(plan);
  expectPlansEqual(deserialize(bytes.data(), bytes.size(), "plan.bin"), plan);
}

TEST(Plan, ValidateRejectsBadLastRowLogits) {
  Plan plan = planWithLastRowLogits();
  plan.lastRowLogits.decode = 1;
  std::string message = errorOf([&] { validate(plan, "plan.bin"); });
  EXPECT_NE(message.find("lastRowLogits names prefill dispatch 1 and decode dispatch 1"), std::string::npos)
      << message;
  plan = planWithLastRowLogits();
  plan.decode[0].bindings[2].offset += 4;
  message = errorOf([&] { validate(plan, "plan.bin"); });
  EXPECT_NE(message.find("whose bindings do not extend its own"), std::string::npos) << message;
  for (int32_t count : {0, 2, 3}) { // the schedule has no prefill dispatch after dispatch 1
    plan = planWithLastRowLogits();
    plan.lastRowLogits.prefillDispatches = count;
    message = errorOf([&] { validate(plan, "plan.bin"); });
    EXPECT_NE(
        message.find("lastRowLogits stands in for " + std::to_string(count) + " prefill dispatches from 1"),
        std::string::npos)
        << message;
  }
}

// A one-row logits dispatch that also picks the token (linear_argmax) binds more than the prefill
// projection, before the last binding, and stands in for the prefill's argmax launch too.
TEST(Plan, LastRowLogitsWithTheArgmax) {
  Plan plan = planWithLastRowLogits();
  plan.kernels.push_back(Kernel{"linear_argmax", fakeSpirv(3, 40), 5, {128, 1, 1}});
  plan.decode[0].kernel = 2;
  plan.decode[0].bindings.insert(plan.decode[0].bindings.end() - 1, Binding{BufferKind::Scratch, 0, 0, 256});
  plan.prefill.push_back(plan.prefill[0]); // the argmax's launch after the projection's
  plan.lastRowLogits = {1, 0, 2};
  EXPECT_NO_THROW(validate(plan));
  std::vector<uint8_t> bytes = serialize(plan);
  Plan read = deserialize(bytes.data(), bytes.size(), "plan.bin");
  expectPlansEqual(read, plan);
  EXPECT_EQ(read.lastRowLogits.prefillDispatches, 2);

  EXPECT_TRUE(extendsBindings(plan.decode[0].bindings, plan.prefill[1].bindings));
  EXPECT_FALSE(extendsBindings(plan.prefill[1].bindings, plan.decode[0].bindings));
  std::vector<Binding> movedLast = plan.decode[0].bindings;
  std::swap(movedLast[movedLast.size() - 1], movedLast[movedLast.size() - 2]);
  EXPECT_FALSE(extendsBindings(movedLast, plan.prefill[1].bindings));
  EXPECT_FALSE(extendsBindings(plan.decode[0].bindings, {}));
}

// decodeArgmaxLaunch (decode ends with an argmax launch a sampled step may leave out) round-trips, and only
// a plan whose decode ends with the GPU argmax may say so.
TEST(Plan, DecodeArgmaxLaunchNeedsTheGpuArgmax) {
  Plan plan = makePlan();
  plan.stateBytes = std::max<uint64_t>(plan.stateBytes, (kStateHeaderWords + plan.limits.maxSequence) * 4);
  plan.gpuArgmax = true;
  plan.decodeArgmaxLaunch = true;
  std::vector<uint8_t> bytes = serialize(plan);
  expectPlansEqual(deserialize(bytes.data(), bytes.size(), "plan.bin"), plan);
  EXPECT_EQ(validateError([](Plan &p) { p.decodeArgmaxLaunch = true; }),
            "plan.bin: decodeArgmaxLaunch needs a decode schedule that ends with the GPU argmax (gpuArgmax)");
}

TEST(Plan, ValidateRejectsBadKernelIndex) {
  std::string message = validateError([](Plan &p) { p.decode[0].kernel = 2; });
  EXPECT_EQ(message,
            "plan.bin: decode dispatch 0 'decode.layers.0.q_proj' uses kernel 2 but the plan has 2 kernels");
}

TEST(Plan, ValidateRejectsWrongBindingCount) {
  std::string message = validateError([](Plan &p) { p.prefill[1].bindings.pop_back(); });
  EXPECT_NE(
      message.find("prefill dispatch 1 'layers.0.q_proj' has 3 bindings but kernel 'matmul_bf16' takes 4"),
      std::string::npos)
      << message;
}

TEST(Plan, ValidateRejectsBadWeightIndex) {
  std::string message = validateError([](Plan &p) { p.prefill[0].bindings[1].weight = 3; });
  EXPECT_NE(message.find("prefill dispatch 0 'embed': binding 1 names weight 3 but the plan has 3 weights"),
            std::string::npos)
      << message;
}

// The cache holds f32 or f16, an f16 one only with 16-bit storage, and its bytes are its shape's.
TEST(Plan, ValidateChecksTheKVCache) {
  EXPECT_EQ(validateError([](Plan &p) { p.kvCache.dtype = DType::BF16; }),
            "plan.bin: kvCache holds bf16; f32 or f16 are supported");
  EXPECT_EQ(validateError([](Plan &p) { p.requires_.storageBuffer16BitAccess = false; }),
            "plan.bin: an f16 kvCache needs requires.storageBuffer16BitAccess");
  std::string message = validateError([](Plan &p) { p.kvCache.bytes /= 2; });
  EXPECT_NE(message.find("kvCache.bytes is 32768, not 2 · layers"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.kvCache.dtype = DType::F32; }); // the bytes of f16
  EXPECT_NE(message.find("head dim · 4 bytes"), std::string::npos) << message;
  Plan f32Cache = makePlan();
  f32Cache.kvCache.dtype = DType::F32;
  f32Cache.kvCache.bytes *= 2;
  EXPECT_NO_THROW(validate(f32Cache, "plan.bin"));
}

TEST(Plan, ValidateRejectsRangesOutsideTheirBuffer) {
  std::string message = validateError([](Plan &p) { p.prefill[1].bindings[3] = arena(p.arenaBytes - 4, 8); });
  EXPECT_NE(message.find("prefill dispatch 1 'layers.0.q_proj': binding 3: arena range"), std::string::npos)
      << message;
  // An offset near 2^64 must not wrap around and pass.
  message = validateError(
      [](Plan &p) { p.prefill[1].bindings[3] = arena(std::numeric_limits<uint64_t>::max() - 2, 8); });
  EXPECT_NE(message.find("outside the"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.prefill[1].bindings[2].size = p.kvCache.bytes; });
  EXPECT_NE(message.find("KV cache range"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.decode[0].bindings[2].size = p.scratchBytes; });
  EXPECT_NE(message.find("decode dispatch 0 'decode.layers.0.q_proj': binding 2: scratch buffer range"),
            std::string::npos)
      << message;
  message = validateError([](Plan &p) { p.inputIds.size = p.inputBytes + 4; });
  EXPECT_NE(message.find("inputIds: input buffer range"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.logits = arena(0, p.arenaBytes + 1); });
  EXPECT_NE(message.find("logits"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.prefill[0].bindings[2].size = 0; });
  EXPECT_NE(message.find("binding 2 has size 0"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.inputIds.kind = BufferKind::Arena; });
  EXPECT_NE(message.find("inputIds must be in the input buffer"), std::string::npos) << message;
}

TEST(Plan, ValidateRejectsBadGrid) {
  std::string message = validateError([](Plan &p) { p.prefill[1].grid[2].div = 0; });
  EXPECT_NE(message.find("prefill dispatch 1 'layers.0.q_proj': grid dimension 2 has divisor 0"),
            std::string::npos)
      << message;
}

TEST(Plan, ValidateRejectsAnOverlappingLastDispatch) {
  // Nothing after it to overlap: the step's end would not wait for it.
  std::string message = validateError([](Plan &p) { p.decode.back().overlapsNext = true; });
  EXPECT_NE(
      message.find("decode dispatch 0 'decode.layers.0.q_proj' overlaps the next dispatch, but it is the "
                   "schedule's last"),
      std::string::npos)
      << message;
}

TEST(Plan, ValidateRejectsBadWeights) {
  std::string message = validateError([](Plan &p) { p.weights[2].shape = {}; });
  EXPECT_NE(message.find("weight 2 'norm' has an empty shape"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[0].shape = {512, 0}; });
  EXPECT_NE(message.find("weight 0 'embed' has a dimension 0"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[0].shape = {-1, 64}; });
  EXPECT_NE(message.find("'embed'"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[1].sliceDim = 2; });
  EXPECT_NE(message.find("weight 1 'layers.0.q' slices dimension 2 of a rank-2 shape"), std::string::npos)
      << message;
  message = validateError([](Plan &p) { p.weights[1].sliceLength = 32; });
  EXPECT_NE(message.find("'layers.0.q' has shape[0] = 64 but a slice of length 32"), std::string::npos)
      << message;
  message = validateError([](Plan &p) { p.weights[1].sliceStart = -1; });
  EXPECT_NE(message.find("'layers.0.q' has slice start -1"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[1].scaleColumnsBy = 3; });
  EXPECT_NE(message.find("'layers.0.q' scales its columns by weight 3 of 3"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[1].scaleColumnsBy = 1; });
  EXPECT_NE(message.find("scales its columns by weight 1"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[1].scaleColumnsBy = 0; }); // not a vector
  EXPECT_NE(message.find("scales its columns by 'embed', which is not an unscaled vector"), std::string::npos)
      << message;
  message = validateError([](Plan &p) { p.weights[2].shape = {32}; }); // not the row length
  EXPECT_NE(message.find("which is not an unscaled vector of its row length"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[2].name = "embed"; });
  EXPECT_NE(message.find("appears twice"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.weights[0].shape = {int64_t(1) << 40, int64_t(1) << 40}; });
  EXPECT_NE(message.find("overflows"), std::string::npos) << message;
}

TEST(Plan, ValidateRejectsBadKernels) {
  std::string message = validateError([](Plan &p) { p.kernels[1].spirv.clear(); });
  EXPECT_NE(message.find("kernel 1 'matmul_bf16' has no SPIR-V"), std::string::npos) << message;
  message = validateError([](Plan &p) { p.kernels[0].spirv[0] = 0x03022307; }); // byte-swapped magic
  EXPECT_NE(message.find("kernel 0 'embed_lookup' does not start with the SPIR-V magic"), std::string::npos)
      << message;
  message = validateError([](Plan &p) { p.kernels[0].workgroupSize[1] = 0; });
  EXPECT_NE(message.find("workgroup size of 0"), std::string::npos) << message;
}

// Kernels that reach their buffers by address: the plan says so, requires bufferDeviceAddress and push
// constants for every binding's address, and its ranges start where the kernels' references may (16 bytes).
Plan planByAddress() {
  Plan plan = makePlan();
  plan.bufferAccess = BufferAccess::Addresses;
  plan.requires_.bufferDeviceAddress = true;
  plan.requires_.pushConstantBytes = 8 + 8 * 4; // matmul_bf16's 4 bindings
  return plan;
}

TEST(Plan, BufferAddressesRoundTrip) {
  Plan plan = planByAddress();
  EXPECT_EQ(pushConstantBytes(plan.bufferAccess, plan.kernels[1]), 40u);
  EXPECT_EQ(pushConstantBytes(BufferAccess::Descriptors, plan.kernels[1]), kPushConstantBytes);
  std::vector<uint8_t> bytes = serialize(plan);
  expectPlansEqual(deserialize(bytes.data(), bytes.size()), plan);
}

// A binding's address in the push constants: two words, the low one first (the kernels read a uvec2).
TEST(Plan, AddressesAreAppendedLowWordFirst) {
  std::vector<uint32_t> push = {7, 0};
  appendAddress(push, 0x1122334455667788ull);
  EXPECT_EQ(push, (std::vector<uint32_t>{7, 0, 0x55667788u, 0x11223344u}));
}

TEST(Plan, ValidateChecksBufferAddresses) {
  auto errorOfPlan = [](const std::function<void(Plan &)> &edit) {
    Plan plan = planByAddress();
    edit(plan);
    return errorOf([&] { validate(plan, "plan.bin"); });
  };
  EXPECT_EQ(errorOfPlan([](Plan &p) { p.requires_.bufferDeviceAddress = false; }),
            "plan.bin: kernels that reach their buffers by address need requires.bufferDeviceAddress");
  EXPECT_EQ(errorOfPlan([](Plan &p) { p.requires_.pushConstantBytes = 32; }),
            "plan.bin: kernel 1 'matmul_bf16' takes 40 bytes of push constants, more than "
            "requires.pushConstantBytes (32)");
  EXPECT_EQ(
      errorOfPlan([](Plan &p) { p.prefill[1].bindings[2].offset = 520; }),
      "plan.bin: prefill dispatch 1 'layers.0.q_proj': binding 2: KV cache offset 520 is not a multiple "
      "of 16 (kernels reach their bindings by address)");
  // The same offset is a descriptor's business (the device's minStorageBufferOffsetAlignment), not the
  // plan's.
  Plan descriptors = makePlan();
  descriptors.prefill[1].bindings[2].offset = 520;
  EXPECT_NO_THROW(validate(descriptors, "plan.bin"));
  EXPECT_NE(validateError([](Plan &p) {
              p.kernels[0].numBindings = kMaxBindings + 1;
            }).find("kernel 0 'embed_lookup' has 65 bindings (at most 64)"),
            std::string::npos);
}

TEST(Plan, ManifestBufferAccessIsChecked) {
  std::string message = manifestError([](json &m) { m["bufferAccess"] = "pointers"; });
  EXPECT_NE(message.find("bufferAccess"), std::string::npos) << message;
  EXPECT_NE(message.find("is not 'descriptors' or 'addresses'"), std::string::npos) << message;
}

TEST(Plan, SerializeValidatesFirst) {
  Plan plan = makePlan();
  plan.prefill[0].kernel = 7;
  EXPECT_THROW(serialize(plan), PlanError);
}

TEST(Plan, GridEvaluate) {
  EXPECT_EQ((GridDim{0, 1, 1}).evaluate(100), 1u);
  EXPECT_EQ((GridDim{1, 0, 1}).evaluate(17), 17u);
  EXPECT_EQ((GridDim{64, 15, 16}).evaluate(1), 5u); // ceil(79 / 16)
  EXPECT_EQ((GridDim{64, 0, 16}).evaluate(1), 4u);  // exact division is not rounded up
  EXPECT_EQ((GridDim{1, 63, 64}).evaluate(65), 2u); // ceil(128 / 64)
  EXPECT_EQ((GridDim{-1, 40, 2}).evaluate(41), 0u); // negative clamps to 0
  EXPECT_EQ((GridDim{-1, 40, 2}).evaluate(35), 3u); // ceil(5 / 2)
  EXPECT_EQ((GridDim{std::numeric_limits<int64_t>::max(), 0, 1}).evaluate(1000),
            std::numeric_limits<uint32_t>::max()); // no overflow, saturates
}

TEST(Plan, WeightBytes) {
  Plan plan = makePlan();
  EXPECT_EQ(plan.weights[0].bytes(), 512u * 64 * 2); // f16
  EXPECT_EQ(plan.weights[2].bytes(), 64u * 4);       // f32
}

TEST(Plan, EnumStrings) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32}) EXPECT_EQ(parseDType(toString(t)), t);
  EXPECT_EQ(parseDType("BF16"), DType::BF16);
  EXPECT_EQ(parseDType("f8"), std::nullopt);
  EXPECT_EQ(parseLayout(toString(Layout::RowMajor)), Layout::RowMajor);
  EXPECT_EQ(parseLayout("column_major"), std::nullopt);
  EXPECT_EQ(byteSize(DType::F32), 4u);
  EXPECT_EQ(byteSize(DType::F16), 2u);
  EXPECT_EQ(byteSize(DType::BF16), 2u);
  EXPECT_EQ(byteSize(DType::I32), 4u);
  EXPECT_STREQ(toString(BufferKind::KVCache), "kv_cache");
  EXPECT_STREQ(toString(BufferKind::Scratch), "scratch");
  for (BufferAccess a : {BufferAccess::Descriptors, BufferAccess::Addresses})
    EXPECT_EQ(parseBufferAccess(toString(a)), a);
  EXPECT_EQ(parseBufferAccess("Addresses"), std::nullopt);
}

TEST(Plan, FileRoundTrip) {
  fs::path dir = uniqueTempPath("gerbil-plan-test");
  fs::create_directories(dir);
  std::string path = (dir / "plan.bin").string();
  Plan plan = makePlan();
  writeFile(plan, path);
  expectPlansEqual(readFile(path), plan);
  // Overwriting goes through a temporary file and leaves nothing else behind.
  writeFile(plan, path);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  // Errors from a file name the file.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "GERBPLAN";
  std::string message = errorOf([&] { readFile(path); });
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  fs::remove_all(dir);
}

TEST(Plan, FileErrorsNameThePath) {
  fs::path missing = uniqueTempPath("gerbil-plan-missing") / "plan.bin";
  std::string message = errorOf([&] { readFile(missing.string()); });
  EXPECT_EQ(message.rfind("cannot open " + missing.string(), 0), 0u) << message;
  message = errorOf([&] { writeFile(makePlan(), missing.string()); });
  EXPECT_NE(message.find(missing.string()), std::string::npos) << message;
  message = errorOf([&] { readFile(fs::temp_directory_path().string()); }); // a folder
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
}
