// Loads the weights a plan names from a checkpoint, converts each to its device dtype and layout, and
// uploads it. Every tensor is checked against the plan first: missing tensors and wrong shapes are errors
// naming the tensor; checkpoint tensors the plan does not use are reported.
#pragma once

#include "runtime/plan/Plan.h"
#include "runtime/vulkan/Device.h"
#include "runtime/weights/Safetensors.h"

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace gerbil::exec {

class RuntimeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct LoadedWeights {
  std::vector<vk::Buffer> buffers; // one per plan weight, in plan order
  uint64_t bytes = 0;
  // Where the load's time went (host wall-clock): converting tensors to their device bytes (dtype, folded
  // norm weights, layouts; mostly straight into the staging buffer while the device copies out its other
  // half), and the rest of the upload (copies from the file into the staging buffer or mapped memory, and
  // waits for the device's copies), each including the page faults of the mapped checkpoint it reads.
  double convertMs = 0, uploadMs = 0;
};

// (bytes done, bytes in all)
using ProgressFn = std::function<void(uint64_t, uint64_t)>;

// Checks that the checkpoint has every weight with the right shape and dtype. Returns the names of
// checkpoint tensors that no weight uses and no ignore pattern covers. Throws WeightError.
std::vector<std::string> checkCheckpoint(const plan::Plan &plan, const weights::Checkpoint &checkpoint);

// Converts one weight to its device bytes (exposed for tests).
// columnScale: the values that multiply the matrix's columns (plan::Weight::scaleColumnsBy's), or empty.
std::vector<uint8_t> convertWeight(const plan::Weight &weight, const weights::TensorView &tensor,
                                   std::span<const float> columnScale = {});
// The same into `out` (resized to the weight's bytes): the loader reuses one buffer for every weight, as
// fresh memory for each matrix cost a page fault every 4 KiB (the 8B's folded matrices loaded in 9 s,
// against 2.7 s copied straight from the file).
void convertWeightInto(const plan::Weight &weight, const weights::TensorView &tensor,
                       std::span<const float> columnScale, std::vector<uint8_t> &out);
// Rows [firstRow, firstRow + rowCount) of the weight's device bytes, written to `out` (the loader converts
// into the staging buffer a run of rows at a time). Not for transposed weights (each device row gathers a
// column of the tensor): throws WeightError, as for rows outside the weight.
void convertWeightRows(const plan::Weight &weight, const weights::TensorView &tensor,
                       std::span<const float> columnScale, int64_t firstRow, int64_t rowCount, uint8_t *out);
// The bytes of one device row of the weight; 0 for a transposed one.
uint64_t weightRowBytes(const plan::Weight &weight);
// The device bytes of a weight where the tensor already holds them in one block (same dtype, not transposed,
// not cut across its rows): a pointer into the tensor's data, else nullptr. Throws WeightError as
// convertWeight.
const uint8_t *deviceBytesInPlace(const plan::Weight &weight, const weights::TensorView &tensor);

// The small weights share device allocations of up to blockBytes, and each matrix has its own, dedicated to
// it (vk::Context::createBuffers with the context's default allocation; blockBytes 0: one each).
inline constexpr uint64_t kDefaultWeightBlockBytes = 1ull << 30;
LoadedWeights uploadWeights(vk::Context &context, const plan::Plan &plan,
                            const weights::Checkpoint &checkpoint, const ProgressFn &progress,
                            uint64_t blockBytes = kDefaultWeightBlockBytes);

bool globMatch(const std::string &pattern, const std::string &text);

} // namespace gerbil::exec
