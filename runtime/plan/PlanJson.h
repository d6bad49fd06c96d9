// Parts of the plan's manifest as JSON, for tools that print them (gerbil-exec --plan-info): the same
// objects, under the same keys, as the plan file holds (docs/plan-format.md).
#pragma once

#include "runtime/plan/Plan.h"

#include <nlohmann/json.hpp>

namespace gerbil::plan {

// The manifest's "requires": what the plan needs of a device.
nlohmann::json requirementsToJson(const Requirements &requirements);

} // namespace gerbil::plan
