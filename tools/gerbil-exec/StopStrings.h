// --stop: ends generation when the text contains a stop string. Streaming, it holds back the end of the text
// while it could still be the start of a stop string, so that no part of one is ever printed.
#pragma once

#include <string>
#include <vector>

namespace gerbil::tool {

class StopStrings {
public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds newly decoded text; returns the text that is safe to show now. Once a stop string appears, returns
  // the text before it and stopped() is true: the rest is dropped.
  std::string push(const std::string &text);
  // At the end of generation: what is still held back.
  std::string finish();
  bool stopped() const { return stopped_; }

private:
  std::vector<std::string> stops_;
  std::string pending_; // text not shown yet
  bool stopped_ = false;
};

} // namespace gerbil::tool
