#include "tools/gerbil-exec/Common.h"

#include "runtime/vulkan/Device.h"
#include "runtime/weights/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>

namespace gerbil::tool {

void writeLogits(const std::string &path, const std::vector<float> &prompt, const std::vector<float> &steps,
                 int64_t vocab) {
  namespace w = gerbil::weights;
  std::vector<w::OwnedTensor> tensors;
  auto tensor = [&](const std::string &name, const std::vector<float> &data) {
    w::OwnedTensor t{name, w::TensorDType::F32, {static_cast<int64_t>(data.size()) / vocab, vocab}, {}};
    t.data.resize(data.size() * sizeof(float));
    std::memcpy(t.data.data(), data.data(), t.data.size());
    tensors.push_back(std::move(t));
  };
  tensor("logits", prompt);
  if (!steps.empty()) tensor("step_logits", steps);
  w::writeSafetensors(path, tensors, {{"producer", "gerbil-exec"}});
}

int listDevices(bool json) {
  auto devices = gerbil::vk::Context::listDevices();
  nlohmann::json list = nlohmann::json::array();
  for (const auto &d : devices) {
    if (!json)
      std::printf("%u: %s (%s, %s, %.1f GiB, subgroup %u)\n", d.index, d.name.c_str(), d.type.c_str(),
                  d.driver.c_str(), static_cast<double>(d.deviceLocalBytes) / (1 << 30), d.subgroupSize);
    list.push_back({{"index", d.index},
                    {"name", d.name},
                    {"type", d.type},
                    {"driver", d.driver},
                    {"device_local_bytes", d.deviceLocalBytes},
                    {"subgroup_size", d.subgroupSize}});
  }
  if (json) std::cout << list.dump() << "\n";
  return kOk;
}

} // namespace gerbil::tool
