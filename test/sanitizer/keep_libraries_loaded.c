/* Preloaded (LD_PRELOAD) into every process of the GERBIL_SANITIZE test run: dlclose does nothing, so that
 * the Vulkan loader never unloads lavapipe, LLVM 15 or the validation layer. LeakSanitizer checks at exit; by
 * then an unloaded driver's one-time allocations would have lost the globals that point at them, and their
 * stacks would name no library that lsan.supp could match ("<unknown module>"). Kept loaded, that memory stays
 * reachable, and a leak in gerbil is still a leak. Built without sanitizers: it is also preloaded into lit's
 * Python and the shell. */
#include <dlfcn.h>

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
