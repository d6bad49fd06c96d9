#include "tools/gerbil-exec/Interrupt.h"

#include <csignal>
#include <unistd.h>

namespace gerbil::tool {
namespace {

volatile std::sig_atomic_t interruptFlag = 0;
volatile std::sig_atomic_t waitingFlag = 0;

// Only async-signal-safe calls here: write, _exit, signal, raise.
extern "C" void onInterrupt(int) {
  if (waitingFlag) {
    // Nothing is half written at the prompt; the newline keeps the shell's prompt off the chat's line.
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(kInterrupted);
  }
  if (interruptFlag) { // a second Ctrl-C while the first is still being handled: the default, ending now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  interruptFlag = 1;
}

} // namespace

void catchInterrupts() {
  struct sigaction action = {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART; // a read or a device wait goes on; the generation loop checks the flag
  sigaction(SIGINT, &action, nullptr);
}

bool interrupted() {
  return interruptFlag != 0;
}

void clearInterrupt() {
  interruptFlag = 0;
}

void waitingForInput(bool waiting) {
  waitingFlag = waiting ? 1 : 0;
}

} // namespace gerbil::tool
