#include "compiler/frontend/Rope.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <string>

namespace gerbil {

namespace {

// The rope types transformers implements that gerbil resolves at compile time. dynamic (NTK) rescales with
// the running sequence length and yarn needs its ramp and mscale; both are refused rather than approximated.
constexpr const char *kSupportedRopeTypes = "default, linear, llama3, longrope";

double positiveNumber(const ConfigReader &reader, const std::string &key) {
  double value = reader.requireNumber(key);
  if (!(value > 0))
    reader.fail("key '" + reader.keyPath(key) + "' must be positive, got " + std::to_string(value));
  return value;
}

// transformers' standardize_rope_params: a top-level original_max_position_embeddings wins (Phi-3 keeps it
// there), then the one inside the rope parameters, then max_position_embeddings.
double originalMaxPositions(const ConfigReader &config, const ConfigReader &params,
                            int64_t maxPositionEmbeddings) {
  const char *key = "original_max_position_embeddings";
  std::optional<int64_t> value = config.getInt(key);
  const ConfigReader *source = &config;
  if (!value) {
    value = params.getInt(key);
    source = &params;
  }
  if (!value) return static_cast<double>(maxPositionEmbeddings);
  if (*value <= 0)
    source->fail("key '" + source->keyPath(key) + "' must be positive, got " + std::to_string(*value));
  return static_cast<double>(*value);
}

void applyLinear(const ConfigReader &params, RopeDescription &rope) {
  double factor = positiveNumber(params, "factor");
  for (double &frequency : rope.invFreq) frequency /= factor;
}

// Llama 3.1: low frequencies (long wavelengths) are divided by `factor`, high ones kept, and the band between
// interpolated smoothly.
void applyLlama3(const ConfigReader &config, const ConfigReader &params, int64_t maxPositionEmbeddings,
                 RopeDescription &rope) {
  double factor = positiveNumber(params, "factor");
  double lowFreqFactor = positiveNumber(params, "low_freq_factor");
  double highFreqFactor = positiveNumber(params, "high_freq_factor");
  if (!(highFreqFactor > lowFreqFactor))
    params.fail("key '" + params.keyPath("high_freq_factor") + "' must be greater than '" +
                params.keyPath("low_freq_factor") + "'");
  double oldContextLength = originalMaxPositions(config, params, maxPositionEmbeddings);
  double lowFreqWavelength = oldContextLength / lowFreqFactor;
  double highFreqWavelength = oldContextLength / highFreqFactor;
  for (double &frequency : rope.invFreq) {
    double wavelength = 2 * std::numbers::pi / frequency;
    if (wavelength > lowFreqWavelength) {
      frequency /= factor;
    } else if (!(wavelength < highFreqWavelength)) {
      double smooth = (oldContextLength / wavelength - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      frequency = (1 - smooth) * frequency / factor + smooth * frequency;
    }
  }
}

// Phi-3's LongRoPE: a per-frequency extension factor, the long set when the sequence may exceed the
// pretraining length, and a cos/sin scale that grows with the context extension.
void applyLongRope(const ConfigReader &config, const ConfigReader &params, int64_t maxPositionEmbeddings,
                   int64_t maxSequence, RopeDescription &rope) {
  double originalMax = originalMaxPositions(config, params, maxPositionEmbeddings);
  size_t expected = rope.invFreq.size();
  auto readFactors = [&](const char *key) {
    auto factors = params.getNumberList(key);
    if (!factors) params.failMissing(key, "longrope needs short_factor and long_factor");
    if (factors->size() != expected)
      params.fail("key '" + params.keyPath(key) + "' has " + std::to_string(factors->size()) +
                  " entries, expected " + std::to_string(expected) + " (rotary dim " +
                  std::to_string(rope.rotaryDim) + " / 2)");
    for (double value : *factors)
      if (!(value > 0)) params.fail("key '" + params.keyPath(key) + "' must hold positive numbers");
    return *factors;
  };
  std::vector<double> shortFactor = readFactors("short_factor");
  std::vector<double> longFactor = readFactors("long_factor");
  const std::vector<double> &extension =
      maxSequence > 0 && static_cast<double>(maxSequence) > originalMax ? longFactor : shortFactor;
  for (size_t i = 0; i < expected; ++i) rope.invFreq[i] /= extension[i];

  // transformers 5: an explicit factor wins, else the context extension max_position / original_max.
  std::optional<double> factor = params.getNumber("factor");
  if (!factor) factor = static_cast<double>(maxPositionEmbeddings) / originalMax;
  if (auto attentionFactor = params.getNumber("attention_factor")) {
    if (!(*attentionFactor > 0))
      params.fail("key '" + params.keyPath("attention_factor") + "' must be positive");
    rope.attentionScaling = *attentionFactor;
  } else {
    rope.attentionScaling = *factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(*factor) / std::log(originalMax));
  }
}

} // namespace

std::vector<double> defaultInvFreq(double theta, int64_t rotaryDim) {
  std::vector<double> frequencies;
  for (int64_t i = 0; i < rotaryDim; i += 2)
    frequencies.push_back(1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(rotaryDim)));
  return frequencies;
}

RopeDescription resolveRope(const ConfigReader &config, const RopeSpec &spec, int64_t headDim,
                            int64_t maxPositionEmbeddings, int64_t maxSequence) {
  // transformers 5 writes rope_parameters; older configs rope_scaling (null: no scaling). When both are
  // present, rope_parameters is what transformers 5 reads.
  std::optional<ConfigReader> params = config.getObject("rope_parameters");
  if (!params) params = config.getObject("rope_scaling");
  static const nlohmann::json kEmptyObject = nlohmann::json::object();
  if (!params) params = ConfigReader(kEmptyObject, config.fileName(), "rope_scaling");
  for (const auto &[key, value] : params->json().items())
    if (value.is_object())
      params->fail("key '" + params->keyPath(key) + "': per-layer-type rope parameters are not supported");

  RopeDescription rope;
  std::string typeKey = params->has("rope_type") ? "rope_type" : "type";
  rope.type = params->getString(typeKey).value_or("default");
  if (rope.type == "su") rope.type = "longrope"; // Phi-3's first name for longrope

  std::optional<double> theta = params->getNumber("rope_theta");
  const ConfigReader *thetaSource = &*params;
  if (!theta) {
    theta = config.getNumber("rope_theta");
    thetaSource = &config;
  }
  rope.theta = theta.value_or(spec.thetaDefault);
  if (!(rope.theta > 0))
    thetaSource->fail("key '" + thetaSource->keyPath("rope_theta") + "' must be positive");

  double partialRotaryFactor = 1.0;
  std::string partialKey = "partial_rotary_factor";
  if (spec.readsPartialRotaryFactor) {
    std::optional<double> value;
    const ConfigReader *source = &config;
    for (const auto &key : spec.partialRotaryFactorKeys) {
      // transformers copies a top-level factor into rope_parameters, so the top level wins.
      if ((value = config.getNumber(key))) {
        partialKey = config.keyPath(key);
        break;
      }
      if ((value = params->getNumber(key))) {
        source = &*params;
        partialKey = params->keyPath(key);
        break;
      }
    }
    partialRotaryFactor = value.value_or(spec.partialRotaryFactorDefault);
    if (!(partialRotaryFactor > 0 && partialRotaryFactor <= 1))
      source->fail("key '" + partialKey + "' must be in (0, 1], got " + std::to_string(partialRotaryFactor));
  }
  // int(head_dim * partial_rotary_factor), as transformers truncates it.
  rope.rotaryDim = static_cast<int64_t>(static_cast<double>(headDim) * partialRotaryFactor);
  if (rope.rotaryDim < 2 || rope.rotaryDim % 2 != 0)
    config.fail("the rotary dimension head_dim (" + std::to_string(headDim) + ") x " + partialKey + " (" +
                std::to_string(partialRotaryFactor) + ") = " + std::to_string(rope.rotaryDim) +
                " must be even and at least 2");
  rope.invFreq = defaultInvFreq(rope.theta, rope.rotaryDim);

  if (rope.type == "default") {
    // The frequencies as computed.
  } else if (rope.type == "linear") {
    applyLinear(*params, rope);
  } else if (rope.type == "llama3") {
    applyLlama3(config, *params, maxPositionEmbeddings, rope);
  } else if (rope.type == "longrope") {
    applyLongRope(config, *params, maxPositionEmbeddings, maxSequence, rope);
  } else {
    params->fail(params->keyPath(typeKey) + " '" + rope.type +
                 "' is not supported (supported: " + kSupportedRopeTypes + ")");
  }
  return rope;
}

} // namespace gerbil
