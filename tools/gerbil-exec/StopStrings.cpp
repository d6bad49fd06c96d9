#include "tools/gerbil-exec/StopStrings.h"

#include <algorithm>

namespace gerbil::tool {

std::string StopStrings::push(const std::string &text) {
  if (stopped_) return "";
  pending_ += text;
  size_t first = std::string::npos;
  for (const std::string &stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string shown = pending_.substr(0, first);
    pending_.clear();
    return shown;
  }
  // Hold back the longest end of the text that begins some stop string. A stop string is valid UTF-8, so
  // the cut falls between characters.
  size_t held = 0;
  for (const std::string &stop : stops_)
    for (size_t n = std::min(stop.size() - 1, pending_.size()); n > held; --n)
      if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
        held = n;
        break;
      }
  std::string shown = pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return shown;
}

std::string StopStrings::finish() {
  std::string rest = stopped_ ? "" : pending_;
  pending_.clear();
  return rest;
}

} // namespace gerbil::tool
