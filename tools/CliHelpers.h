// What the command lines of gerbil's tools share on top of CLI11: number checks whose messages a person can
// read (CLI11's own range checks print the largest double in full), and parse errors in the tools' own
// "TOOL: error: ..." form with a "did you mean" for a mistyped flag.
#pragma once

#include "tools/ExitCodes.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace gerbil::cli {

// 2147483647 as that, not 2.14748e+09.
inline std::string describeNumber(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  std::ostringstream text;
  text << value;
  return text.str();
}

// A number at least `low` (above it when `strict`) and at most `high`.
inline CLI::Validator number(double low, bool strict, double high = std::numeric_limits<double>::infinity()) {
  std::string wanted = std::isinf(high) ? (strict ? "more than " : "at least ") + describeNumber(low)
                                        : "from " + describeNumber(low) + " to " + describeNumber(high);
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || std::isnan(value))
          return "'" + text + "' is not a number";
        if (value < low || (strict && value == low) || value > high)
          return "must be " + wanted + ", not " + text;
        return "";
      },
      ""); // the help says what is valid
}

// A whole number of 0 or more written in digits: CLI11 reads "-1" into an unsigned option as 2^64 - 1.
inline CLI::Validator unsignedInteger() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        unsigned long long value = 0;
        bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || !CLI::detail::lexical_cast(text, value))
          return "must be a whole number from 0 to " + std::to_string(std::numeric_limits<uint64_t>::max()) +
                 ", not " + text;
        return "";
      },
      "");
}

// An option that takes a whole number from 0 to `max`.
template <typename T>
CLI::Option *addWholeNumberOption(CLI::App &app, const std::string &name, T &value, const std::string &help,
                                  double max) {
  return app.add_option(name, value, help)->check(unsignedInteger())->check(number(0, false, max));
}

// --spin-wait as gerbil-exec and gerbil-bench take it (vk::ContextOptions::spinWaitMicroseconds, whose
// default the caller passes: this header stays free of Vulkan).
inline CLI::Option *addSpinWaitOption(CLI::App &app, std::optional<uint32_t> &microseconds,
                                      uint32_t defaultMicroseconds) {
  return addWholeNumberOption(app, "--spin-wait", microseconds,
                              "Microseconds to poll for the GPU before a wait blocks (0: block at once, the "
                              "least CPU; default " +
                                  std::to_string(defaultMicroseconds) + ", 0 on CPU devices)",
                              std::numeric_limits<uint32_t>::max());
}

// --weight-block-mib as gerbil-exec and gerbil-bench take it (exec::uploadWeights' blockBytes).
inline CLI::Option *addWeightBlockOption(CLI::App &app, uint64_t &mebibytes, uint64_t defaultMebibytes) {
  mebibytes = defaultMebibytes;
  return addWholeNumberOption(app, "--weight-block-mib", mebibytes,
                              "The weights share device allocations of up to this many MiB (0: one "
                              "allocation a weight; default " +
                                  std::to_string(defaultMebibytes) + ")",
                              1 << 20);
}

// Edit distance, for "did you mean".
inline size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// For App::failure_message: "TOOL: error: ...", the nearest real flag for each unknown one, and the pointer
// to --help.
inline std::function<std::string(const CLI::App *, const CLI::Error &)> failureMessage(std::string tool) {
  return [tool](const CLI::App *failed, const CLI::Error &error) {
    std::string message = tool + ": error: " + error.what();
    if (dynamic_cast<const CLI::ExtrasError *>(&error))
      for (const std::string &argument : failed->remaining()) {
        if (argument.rfind("--", 0) != 0) continue;
        std::string name = argument.substr(0, argument.find('=')), best;
        size_t bestDistance = 3; // a typo, not another word
        for (const CLI::Option *option : failed->get_options())
          for (const std::string &longName : option->get_lnames())
            if (size_t d = editDistance(name, "--" + longName); d < bestDistance) {
              bestDistance = d;
              best = "--" + longName;
            }
        if (!best.empty()) message += "\n  " + name + ": did you mean " + best + "?";
      }
    return message + "\nRun with --help for more information.\n";
  };
}

// The exception types a tool names as bad input and as device errors (exitCodeFor).
template <class... Types> struct ErrorTypes {};

// The exit code of an error a tool caught: kUsage for a command-line error found after parsing, kBadInput
// for one of the bad-input types, kDevice for one of the device types, else kIO (files that cannot be read
// or written, and whatever else the library throws).
template <class... BadInput, class... Device>
int exitCodeFor(const std::exception &e, ErrorTypes<BadInput...>, ErrorTypes<Device...>) {
  if (dynamic_cast<const CLI::Error *>(&e)) return kUsage;
  if ((... || (dynamic_cast<const Device *>(&e) != nullptr))) return kDevice;
  if ((... || (dynamic_cast<const BadInput *>(&e) != nullptr))) return kBadInput;
  return kIO;
}

// Prints "TOOL: error: WHAT" and returns the error's exit code.
template <class BadInput, class Device>
int reportError(const char *tool, const std::exception &e, BadInput badInput, Device device) {
  std::cerr << tool << ": error: " << e.what() << "\n";
  return exitCodeFor(e, badInput, device);
}

// Parses the command line, errors in failureMessage(tool)'s form: nothing where the tool goes on, else the
// exit code to return (0 after --help, kUsage after an error, which is printed).
inline std::optional<int> parseCommandLine(CLI::App &app, int argc, char **argv, const std::string &tool) {
  app.failure_message(failureMessage(tool));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : kUsage;
  }
  return std::nullopt;
}

} // namespace gerbil::cli
