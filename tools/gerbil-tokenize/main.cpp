// gerbil-tokenize: encodes text with a HuggingFace tokenizer.json, one JSON string per input line to one JSON
// array of ids per output line; with --decode, arrays of ids back to JSON strings.
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/CliHelpers.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <limits>
#include <optional>
#include <string>

namespace {

enum ExitCode : int { kOk = 0, kUsage = 2, kBadInput = 3 };

struct Options {
  std::string tokenizerPath;
  bool addSpecialTokens = false;
  bool splitSpecialTokens = false;
  bool decode = false;
  bool skipSpecialTokens = false;
  bool cleanUp = false;
};

class LineError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

std::string dumpString(const std::string &text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string encodeLine(const gerbil::tokenizer::Tokenizer &tokenizer, const std::string &line,
                       const Options &o) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception &) {
    throw LineError("not valid JSON (expected a JSON string such as \"Hello\")");
  }
  if (!value.is_string()) throw LineError("expected a JSON string, got " + std::string(value.type_name()));
  auto ids = tokenizer.encode(value.get<std::string>(), o.addSpecialTokens, !o.splitSpecialTokens);
  return nlohmann::json(ids).dump();
}

std::string decodeLine(const gerbil::tokenizer::Tokenizer &tokenizer, const std::string &line,
                       const Options &o) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception &) {
    throw LineError("not valid JSON (expected an array of token ids such as [9707, 1879])");
  }
  if (!value.is_array())
    throw LineError("expected a JSON array of token ids, got " + std::string(value.type_name()));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    const auto &item = value[i];
    if (!item.is_number_integer() || item.get<int64_t>() < 0 ||
        item.get<int64_t>() > std::numeric_limits<int32_t>::max() ||
        (item.is_number_unsigned() && item.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())))
      throw LineError("element " + std::to_string(i) + " (" + item.dump() + ") is not a token id");
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return dumpString(tokenizer.decode(ids, o.skipSpecialTokens, o.cleanUp));
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"gerbil-tokenize: tokenizes text with a HuggingFace tokenizer.json.\n"
               "Reads one JSON string per line on stdin and prints one JSON array of token ids per line;\n"
               "with --decode, reads JSON arrays of ids and prints JSON strings."};
  Options options;
  app.add_option("--tokenizer", options.tokenizerPath,
                 "The tokenizer.json (a tokenizer_config.json beside it is read too)")
      ->required();
  app.add_flag("--add-special-tokens", options.addSpecialTokens,
               "Add what the post-processor adds (BOS/EOS), as transformers' add_special_tokens=True");
  app.add_flag("--split-special-tokens", options.splitSpecialTokens,
               "Read special tokens in the text as plain text (transformers' split_special_tokens=True)");
  app.add_flag("--decode", options.decode, "Decode arrays of ids instead of encoding strings");
  app.add_flag("--skip-special-tokens", options.skipSpecialTokens, "With --decode: leave special tokens out");
  app.add_flag("--clean-up-tokenization-spaces", options.cleanUp,
               "With --decode: apply transformers' clean_up_tokenization (\" .\" -> \".\", ...)");
  if (std::optional<int> exitCode = gerbil::cli::parseCommandLine(app, argc, argv, "gerbil-tokenize"))
    return *exitCode;

  std::optional<gerbil::tokenizer::Tokenizer> tokenizer;
  try {
    tokenizer = gerbil::tokenizer::Tokenizer::fromFile(options.tokenizerPath);
  } catch (const gerbil::tokenizer::TokenizerError &e) {
    std::cerr << "gerbil-tokenize: error: " << e.what() << "\n";
    return kBadInput;
  }

  std::string line;
  size_t lineNumber = 0;
  while (std::getline(std::cin, line)) {
    ++lineNumber;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    try {
      std::cout << (options.decode ? decodeLine(*tokenizer, line, options)
                                   : encodeLine(*tokenizer, line, options))
                << "\n";
    } catch (const std::exception &e) {
      std::cout.flush();
      std::cerr << "gerbil-tokenize: error: line " << lineNumber << ": " << e.what() << "\n";
      return kBadInput;
    }
  }
  return kOk;
}
