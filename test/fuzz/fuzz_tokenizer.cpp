// libFuzzer target for the tokenizer.json reader (gerbil::tokenizer::Tokenizer::fromJson). A bad
// tokenizer.json must give a TokenizerError; any other exception, a crash or a sanitizer report is a bug. An
// accepted tokenizer encodes a few texts (ASCII, multi-byte UTF-8, its own special tokens), decodes what it
// made and every id below 300 that exists, and streams the ids through a StreamDecoder.
#include "runtime/tokenizer/Tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace gerbil::tokenizer;

namespace {

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "fuzz-tokenizer: %s\n", what);
  std::abort();
}

void exercise(const Tokenizer &tokenizer) {
  static const std::vector<std::string> texts = {
      "",
      "Hello world!",
      " leading  and trailing spaces \n\t",
      "n't it's 1234567 3.14 ,.;:!?",
      "caf\xc3\xa9 \xe2\x96\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xcc\x81", // é ▁ 中文 😀, a lone
                                                                                     // combining mark
      "<s>hi</s><|endoftext|><unk>",
  };
  int32_t vocab = tokenizer.vocabSize();
  if (vocab < 0) bug("negative vocabulary size");
  for (const std::string &text : texts) {
    for (bool special : {true, false}) {
      std::vector<int32_t> ids = tokenizer.encode(text, special, special);
      for (int32_t id : ids)
        if (id < 0 || id >= vocab) bug("encode gave an id outside the vocabulary");
      tokenizer.decode(ids, !special, special);
      StreamDecoder stream(tokenizer, !special);
      for (int32_t id : ids) stream.push(id);
      stream.finish();
    }
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab && id < 300; ++id) {
    tokenizer.isSpecialToken(id);
    // The ids need not be contiguous: decode only those that exist.
    if (tokenizer.tokenString(id)) ids.push_back(id);
  }
  tokenizer.decode(ids);
  tokenizer.decode(ids, true, true);
  for (const char *key : {"bos_token", "eos_token", "pad_token", "unk_token"}) tokenizer.configTokenId(key);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    Tokenizer tokenizer = Tokenizer::fromJson(text, "tokenizer.json");
    exercise(tokenizer);
  } catch (const TokenizerError &) {
  }
  return 0;
}
