#!/usr/bin/env bash
# Builds the libFuzzer targets of the parsers (plan, safetensors, config.json, tokenizer.json) with clang-19,
# AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz, and runs each for SECONDS on its seed corpus
# (test/fuzz/corpus/<target>). Fails on the first crash, leak, sanitizer report or timeout; the input that
# caused it is left in build-fuzz/artifacts/<target>/. See docs/testing.md.
# Usage: tools/fuzz.sh [SECONDS]   (default 20 per target). Environment: BUILD_DIR (default build-fuzz),
# FUZZ_TARGETS (default: every target that was built, e.g. "plan config"), GERBIL_BUILD_LOCK (a file that
# cmake holds with flock, for machines where several builds share the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
build_dir=${BUILD_DIR:-build-fuzz}

locked() {
  if [ -n "${GERBIL_BUILD_LOCK:-}" ]; then flock "$GERBIL_BUILD_LOCK" "$@"; else "$@"; fi
}

# The fuzz build needs no MLIR: the front end is built on its own for fuzz-config.
locked env CC=clang-19 CXX=clang++-19 cmake -G Ninja -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGERBIL_FUZZ=ON -DGERBIL_BUILD_TESTS=OFF -DGERBIL_BUILD_COMPILER=OFF >/dev/null
locked cmake --build "$build_dir" --target fuzz -j "$(nproc)"

targets=${FUZZ_TARGETS:-plan safetensors config tokenizer}
status=0
for target in $targets; do
  binary=$build_dir/bin/fuzz-$target
  if [ ! -x "$binary" ]; then
    echo "fuzz-$target: not built, skipped"
    continue
  fi
  # New inputs go to a working corpus in the build folder; the committed seeds are only read.
  work=$build_dir/corpus/$target
  artifacts=$build_dir/artifacts/$target
  mkdir -p "$work" "$artifacts"
  log=$build_dir/fuzz-$target.log
  echo "fuzz-$target: ${seconds}s"
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$binary" "$work" "test/fuzz/corpus/$target" -dict=test/fuzz/json.dict -max_total_time="$seconds" \
      -rss_limit_mb=2048 -timeout=30 -max_len=200000 -print_final_stats=1 -artifact_prefix="$artifacts/" \
      >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+.*DONE)' "$log" | sed 's/^/  /' || true
  else
    status=1
    echo "fuzz-$target: FAILED (log: $log, inputs: $artifacts/)"
    grep -E -A40 'ERROR: |runtime error|fuzz-[a-z]+: |deadly signal|Test unit written' "$log" | head -80 || tail -40 "$log"
  fi
done
exit $status
