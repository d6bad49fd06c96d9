// The three ways gerbil-exec runs a plan. Each returns the exit code or throws (main maps exceptions to
// codes).
#pragma once

#include "tools/gerbil-exec/Common.h"
#include "tools/gerbil-exec/Options.h"

namespace gerbil::tool {

// --prompt-ids: token ids in, token ids out (the contract the end-to-end tests rely on).
int runIds(const Options &options, Clock::time_point started);
// --prompt / --prompt-file: text in, the continuation streamed out.
int runPrompt(const Options &options, Clock::time_point started);
// --chat: user turns from stdin through the chat template, replies streamed out, the KV cache kept across
// turns.
int runChat(const Options &options, Clock::time_point started);

} // namespace gerbil::tool
