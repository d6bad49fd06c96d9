// Rotary embedding frequencies, computed as HuggingFace transformers' modeling_rope_utils.py does (in
// double). Reads both config forms: the classic `rope_theta` + `rope_scaling` ({"type" | "rope_type": ...,
// ...}) and transformers-5's `rope_parameters` ({"rope_type", "rope_theta", scaling keys,
// "partial_rotary_factor"}).
#pragma once

#include "compiler/frontend/ArchSpec.h"
#include "compiler/frontend/ConfigReader.h"
#include "compiler/frontend/ModelDescription.h"

#include <cstdint>
#include <vector>

namespace gerbil {

// rotaryDim / 2 frequencies 1 / theta^(2i / rotaryDim).
std::vector<double> defaultInvFreq(double theta, int64_t rotaryDim);

// maxSequence (0: unknown) picks longrope's long or short factors, as transformers does by sequence length.
// Throws FrontendError naming the key for unsupported rope types and bad values.
RopeDescription resolveRope(const ConfigReader &config, const RopeSpec &spec, int64_t headDim,
                            int64_t maxPositionEmbeddings, int64_t maxSequence);

} // namespace gerbil
