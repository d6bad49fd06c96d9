// Ctrl-C in the text modes. While a reply is being generated, Ctrl-C ends that reply, not the program: the
// chat goes back to its prompt with the conversation intact. At the chat's prompt (or a second Ctrl-C while
// a reply is ending) it ends gerbil-exec at once with exit code 130, after a newline, as a shell would.
#pragma once

namespace gerbil::tool {

constexpr int kInterrupted = 130; // 128 + SIGINT, what shells report for a program ended by Ctrl-C

// Installs the SIGINT handler (idempotent).
void catchInterrupts();
// Whether Ctrl-C came since the last clearInterrupt().
bool interrupted();
void clearInterrupt();
// Between waitingForInput(true) and waitingForInput(false) Ctrl-C ends the program at once.
void waitingForInput(bool waiting);

} // namespace gerbil::tool
