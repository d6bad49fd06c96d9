// The plan: the one contract between gerbilc and gerbil-exec. A plan holds every SPIR-V kernel of one model,
// the weights it expects (with the device layout each one is repacked to at load), the buffers it needs and
// the schedules that run it. This header is plain C++; it depends on nothing heavy.
//
// File layout (little endian):
//   magic "GERBPLAN" (8 bytes) | format version u32 | flags u32 | manifest length u64 | blob length u64
//   | manifest (JSON, UTF-8) | blob (SPIR-V words of every kernel) | XXH64 of everything before it (u64)
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil::plan {

inline constexpr char kMagic[8] = {'G', 'E', 'R', 'B', 'P', 'L', 'A', 'N'};
inline constexpr uint32_t kFormatVersion = 11;

class PlanError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t { F32, F16, BF16, I32 };
const char *toString(DType t);
std::optional<DType> parseDType(const std::string &s);
size_t byteSize(DType t);

// How a weight sits on the device. RowMajor: [rows, cols] of deviceDType, rows contiguous.
enum class Layout : uint8_t { RowMajor };
const char *toString(Layout l);
std::optional<Layout> parseLayout(const std::string &s);

struct Weight {
  std::string name;                    // canonical name
  std::vector<std::string> sourceKeys; // safetensors names accepted for it (first is the usual one)
  std::vector<int64_t> shape;          // device shape, after transpose and slice
  DType deviceDType = DType::F32;
  Layout layout = Layout::RowMajor;
  bool transpose = false; // the source is [in, out] (GPT-2 Conv1D)
  int32_t sliceDim = -1;  // -1: the whole (transposed) source tensor
  int64_t sliceStart = 0;
  int64_t sliceLength = 0;
  // The index of a 1-D weight whose values multiply this matrix's columns as it is loaded (W[n, k] · g[k]):
  // an RMSNorm's weight folded into the projection after it, whose kernels then leave it out; -1: none.
  int32_t scaleColumnsBy = -1;
  uint64_t bytes() const;
};

// State: the step state every kernel reads, { uint position; uint generated; uint tokens[maxSequence]; }:
// the position of the step's first token, and the tokens the GPU argmax has chosen so far, so that decode
// steps can follow each other on the GPU without the host.
// Scratch: zeroed once when the plan is loaded; kernels keep cross-workgroup partial results there (split
// attention's partial softmax sums and the counters that find the last workgroup, which returns them to 0).
enum class BufferKind : uint8_t { Weight, Arena, KVCache, Input, State, Scratch };
const char *toString(BufferKind k);

// One descriptor binding of a dispatch. Weight: the weight with this index, whole. The others: a byte range
// of the named buffer.
struct Binding {
  BufferKind kind = BufferKind::Arena;
  uint32_t weight = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const Binding &) const = default;
};

// Workgroup counts as functions of the token count T of a step: count = ceil((mulT * T + add) / div).
struct GridDim {
  int64_t mulT = 0;
  int64_t add = 1;
  int64_t div = 1;
  uint32_t evaluate(uint32_t tokens) const;
};

struct Dispatch {
  uint32_t kernel = 0;
  std::string label; // what it computes, for profiles and errors
  std::vector<Binding> bindings;
  std::array<GridDim, 3> grid;
  // The next dispatch may start before this one ends: no barrier between them, so the next one must not read
  // what this one writes (a decode attention and the launch that prefetches weights beside it, gerbilc
  // --prefetch-beside).
  bool overlapsNext = false;
};

// Every kernel receives the push constants { uint tokens; uint firstRow; } first, and binds the state buffer
// as its last binding (the step's position lives there so that recorded command buffers can be replayed).
// firstRow is 0 but for the one-row logits dispatch of Plan::lastRowLogits.
inline constexpr uint32_t kPushConstantBytes = 8;
inline constexpr uint64_t kStateHeaderWords = 2; // position, generated

// The GPU sampler's words in the state buffer, from Plan::samplingOffset (sample.glsl): the parameters, then
// a bit per vocabulary token that the repetition penalty sees (the context, then each token drawn).
enum SamplingParam : uint32_t {
  kInverseTemperature, // f32 1 / temperature; 0: greedy (the penalised argmax)
  kTopK,               // 0: off
  kTopPFraction,       // p as a fraction of 2^32; 0: off
  kMinPKey,            // samplingKey(ln min-p); 0: off
  kPenalty,            // f32 repetition penalty (1: off), and its inverse
  kInversePenalty,
  kSeedLow,
  kSeedHigh,
  kAdvances, // 1: the step ran without its greedy argmax launch; the sampler appends and advances instead
  kSamplingParamWords
};
// The sampler's five dispatches, in order (sample.glsl's STAGE): the runtime records only those its options
// need (no top-k or top-p: neither histogram; not both: no second low-byte pass; greedy: the maximum alone).
enum SamplerStage : uint32_t {
  kSamplerMaximum,
  kSamplerHighBytes,
  kSamplerLowBytes,
  kSamplerTopPLowBytes,
  kSamplerDraw,
  kSamplerStages
};
inline uint64_t samplingWords(int64_t vocab) {
  return kSamplingParamWords + static_cast<uint64_t>(vocab + 31) / 32;
}
// The sampler's cuts compare a 16-bit key of s = (logit - max) / temperature over [ln 2^-31, 0]; its
// weights are exp(s) in units of 2^-31 (0 below). The runtime keys min-p's cut the same way.
inline constexpr float kSamplingMinScaled = -21.48756217956543f; // ln 2^-31 as a float
inline constexpr float kSamplingKeyScale = 3049.950439453125f;   // 65536 / -kSamplingMinScaled
inline uint32_t samplingKey(float s) {
  const float k = (s - kSamplingMinScaled) * kSamplingKeyScale;
  return k <= 0.0f ? 0u : k >= 65535.0f ? 65535u : static_cast<uint32_t>(k);
}

// How a kernel reaches its bindings. Descriptors: binding i of a descriptor set is the dispatch's binding i.
// Addresses: no descriptor set; after { tokens, firstRow } the push constants hold each binding's device
// address (its buffer's address + offset) as 8 bytes, in binding order (bufferDeviceAddress): a launch then
// has no descriptors to fetch before its first load (gerbilc --buffer-addresses).
enum class BufferAccess : uint8_t { Descriptors, Addresses };
const char *toString(BufferAccess a);
std::optional<BufferAccess> parseBufferAccess(const std::string &s);
// Addresses: a binding's address as the push constants hold it (two words, the low one first, as the
// kernels' uvec2 reads them), appended to `push`.
inline void appendAddress(std::vector<uint32_t> &push, uint64_t address) {
  push.push_back(static_cast<uint32_t>(address));
  push.push_back(static_cast<uint32_t>(address >> 32));
}
// Addresses: what the kernels declare of each binding's address (GL_EXT_buffer_reference's alignment), so
// that 16-byte loads may be aligned ones; the plan's byte ranges start at multiples of it.
inline constexpr uint64_t kBufferAddressAlignment = 16;

// More bindings than any kernel has: bounds what a plan file may ask of a descriptor set layout.
inline constexpr uint32_t kMaxBindings = 64;

struct Kernel {
  std::string name;
  std::vector<uint32_t> spirv;
  uint32_t numBindings = 0;
  std::array<uint32_t, 3> workgroupSize = {1, 1, 1};
};

// The bytes of push constants a kernel of the plan takes: { tokens, firstRow }, and with Addresses its
// bindings' addresses.
uint32_t pushConstantBytes(BufferAccess access, const Kernel &kernel);

struct ModelInfo {
  std::string architecture;
  std::string family;
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  std::vector<int64_t> bosTokenIds;
  std::vector<int64_t> eosTokenIds;
  std::string configJson; // the config.json that was compiled, verbatim
  std::string configPath; // where it was compiled from (the default weights folder)
  std::vector<std::string>
      ignoredSourceKeys; // glob patterns ('*') of checkpoint tensors that are not weights
};

struct Limits {
  uint32_t maxSequence = 0;  // KV cache length
  uint32_t prefillChunk = 0; // most tokens one step processes
};

struct KVCache {
  int64_t numLayers = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  DType dtype = DType::F32;
  std::string layout = "LHSd"; // [layer][k|v][kv head][position][head dim]
  uint64_t bytes = 0;
};

// What the runtime needs from the device, checked before anything runs.
struct Requirements {
  bool shaderFloat16 = false;
  bool storageBuffer16BitAccess = false;
  uint64_t maxStorageBufferRange = 0; // largest single binding
  uint32_t maxSharedMemoryBytes = 0;
  bool vulkanMemoryModel = false;            // SPIR-V with the Vulkan memory model (cooperative matrices)
  uint32_t subgroupSize = 0;                 // the kernels assume exactly this subgroup size; 0: any
  std::vector<std::string> deviceExtensions; // Vulkan device extensions the kernels use (enabled at startup)
  // Kernels reduce with subgroupAdd/subgroupMax in compute shaders (GL_KHR_shader_subgroup_arithmetic) and
  // exchange with subgroupShuffleXor (GL_KHR_shader_subgroup_shuffle, within minSubgroupSize lanes), and
  // size their shared arrays of per-subgroup partial results for subgroups of at least minSubgroupSize.
  bool subgroupArithmetic = false;
  uint32_t minSubgroupSize = 0;
  bool bufferDeviceAddress = false;                // kernels reach buffers by address (BufferAccess)
  uint32_t pushConstantBytes = kPushConstantBytes; // the most any kernel takes (maxPushConstantsSize)
  // The fragments kernels multiply through VK_KHR_cooperative_matrix, as "MxNxK A*B+C->D" with component
  // types ("16x16x16 f16*f16+f32->f32"): the device must list each among its subgroup-scope shapes.
  std::vector<std::string> cooperativeMatrixShapes;
};

struct Plan {
  ModelInfo model;
  Limits limits;
  Requirements requires_;
  std::string target = "generic";
  std::string compilerVersion;
  BufferAccess bufferAccess = BufferAccess::Descriptors;
  std::vector<Weight> weights;
  KVCache kvCache;
  uint64_t arenaBytes = 0;
  uint64_t inputBytes = 0;   // int32 token ids, prefillChunk of them
  Binding inputIds;          // where the kernels read the token ids
  Binding logits;            // F32 [T, vocab] after a step
  uint64_t stateBytes = 0;   // the State buffer: (2 + maxSequence) uint32
  uint64_t scratchBytes = 0; // the Scratch buffer (0: none)
  // The last dispatch of each schedule picks the greedy token of the last logits row on the GPU (an argmax
  // launch, or in decode the logits projection's gemv that also takes the argmax): it writes the chosen
  // token into input_ids[0], appends it to the state's tokens and advances the position by T.
  bool gpuArgmax = false;
  // Decode's last dispatch is an argmax launch of its own (not the logits projection that also picks the
  // token): a replayed sampled step leaves it out, and the sampler appends the token it draws instead.
  bool decodeArgmaxLaunch = false;
  // Prefill steps that need no more than the last row of logits (generation, not --dump-logits) run the
  // decode dispatch `decode` (the logits projection as a one-row gemv) in place of the prefill dispatch
  // `prefill` (the same projection of all T rows), with firstRow = T - 1: the decode one's bindings extend
  // the prefill one's (extendsBindings), so row T - 1 of the logits is written as the full dispatch would
  // write it. -1 and -1: no such pair. prefillDispatches: how many prefill dispatches from `prefill` on the
  // decode one stands in for: 1, or 2 where it also picks the greedy token (the logits projection grouped
  // with its argmax, which prefill runs as a second launch).
  struct LastRowLogits {
    int32_t prefill = -1, decode = -1, prefillDispatches = 1;
  } lastRowLogits;
  std::vector<Kernel> kernels;
  std::vector<Dispatch> prefill;
  std::vector<Dispatch> decode;
  // The GPU sampler's launches (sample.glsl), run after a step's logits in place of its greedy token (empty:
  // none; plans with gpuArgmax have one), and where its words start in the state buffer (samplingWords).
  std::vector<Dispatch> sampler;
  uint64_t samplingOffset = 0;
};

// Whether `bindings` are `base` with more inserted before its last (the state buffer, which every dispatch
// binds last): what a one-row logits dispatch that also picks the token binds beside the projection's.
bool extendsBindings(const std::vector<Binding> &bindings, const std::vector<Binding> &base);

// Serialises the plan. Throws PlanError when the plan is inconsistent (a binding naming no weight, ...).
std::vector<uint8_t> serialize(const Plan &plan);
// Returns the size of the file written.
uint64_t writeFile(const Plan &plan, const std::string &path);

// Parses and checks a plan: magic, version, checksum, manifest, every index and range. Throws PlanError with
// a message that names the file and what is wrong; never crashes on malformed input.
Plan deserialize(const uint8_t *data, size_t size, const std::string &what = "plan");
Plan readFile(const std::string &path);

// Checks the internal consistency of a plan (indices, ranges, grids). Throws PlanError.
void validate(const Plan &plan, const std::string &what = "plan");

} // namespace gerbil::plan
