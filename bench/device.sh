#!/usr/bin/env bash
# Runs on the GPU machine in one call (see BENCHMARKS.md's opening): checks the fixtures against transformers'
# references, benchmarks gerbil on real-size configs with random f16 weights, runs transformers on the same
# configs, llama.cpp's Vulkan build too where bench/llama-cpp/fetch.sh packed it, and measures copy
# bandwidth. Everything it needs was put into .device/ by bench/prepare.sh.
# Results go to $OUT (one results.tgz).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device-setup.sh
OUT=${OUT:-/tmp/gerbil-bench-out}
R=/tmp/results
mkdir -p "$OUT" "$R"

{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/machine.txt
$D/bin/gerbil-exec --list-devices --json > $R/devices.json 2>&1
$D/bin/gerbil-exec --device-info > $R/device-info.txt 2>&1
$D/bin/gerbil-exec --device-info --json > $R/device-info.json 2>&1
# The matmul kernels against a reference, the cooperative-matrix one included where the device has it.
# Line-buffered: what ran before a timeout still reaches the log.
# They compile ~200 kernels in the driver (over 2 minutes in one process; the tensor-core ones run each way
# the device has, NV and KHR, since 5cf3647: more on the H200), so TEST_KERNELS_SHARDS processes (default 8;
# GoogleTest's sharding, a tensor-core tiling a test) take them side by side: the driver's compiles are the
# host's work. SKIP_TEST_KERNELS=1 leaves them out, TEST_KERNELS_FILTER takes a GoogleTest filter and
# TEST_KERNELS_TIMEOUT the seconds (default 240). test-kernels.txt: the shards' logs one after another.
if [ -x $D/bin/test-kernels ] && [ -z "${SKIP_TEST_KERNELS:-}" ]; then
  shards=${TEST_KERNELS_SHARDS:-8}
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${TEST_KERNELS_TIMEOUT:-240} \
      stdbuf -oL $D/bin/test-kernels --gtest_filter="${TEST_KERNELS_FILTER:-*}" > $R/test-kernels.$i.txt 2>&1 &
  done
  wait
  for ((i = 0; i < shards; i++)); do cat $R/test-kernels.$i.txt; done > $R/test-kernels.txt
  rm -f $R/test-kernels.*.txt
fi

[ -n "${SKIP_FIXTURES:-}" ] ||
  CHECK_OUT=$R/fixtures.json python3 bench/check_fixtures.py $D/bin $D/plans test/fixtures/models/* > $R/fixtures.txt 2>&1
# New fixtures from a spec (make_reference.py, with transformers there) only when asked: NEW_FIXTURES=1.
if [ -n "${NEW_FIXTURES:-}" ] && [ -f $D/specs/stablelm.json ]; then
  python3 $D/make_reference.py --spec $D/specs/stablelm.json --out /tmp/newfixtures > $R/make_reference.txt 2>&1
  tar czf "$OUT/new-fixtures.tgz" -C /tmp/newfixtures .
fi

for model in ${BENCH_MODELS:-qwen2.5-0.5b llama-3.2-1b llama-3-8b}; do
  [ -f $D/plans/$model.plan ] || continue
  $D/bin/gerbil-random-weights $D/plans/$model.plan -o /tmp/weights/$model --dtype f16 > $R/$model.weights.txt 2>&1
  timeout 300 $D/bin/gerbil-bench $D/plans/$model.plan --weights /tmp/weights/$model --profile --json \
    > $R/$model.gerbil.json 2> $R/$model.gerbil.err
  # Plans MODEL+VARIANT.plan (the same model compiled with other gerbilc options: prepare.sh's
  # PLAN_VARIANTS) run on the same weights.
  for variant in $D/plans/"$model"+*.plan; do
    [ -f "$variant" ] || continue
    name=$(basename "$variant" .plan)
    timeout 300 $D/bin/gerbil-bench "$variant" --weights /tmp/weights/$model --profile --json \
      > $R/$name.gerbil.json 2> $R/$name.gerbil.err
  done
  # BENCH_VARIANTS="ARGS;ARGS...": more gerbil-bench runs with these arguments (runtime options to compare),
  # to $model.variant-N.txt (the arguments, then the JSON).
  n=0
  IFS=';' read -ra variants <<< "${BENCH_VARIANTS:-}"
  for args in "${variants[@]}"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    { echo "# $args"; timeout 120 $D/bin/gerbil-bench $D/plans/$model.plan --weights /tmp/weights/$model --json $args; } \
      > $R/$model.variant-$n.txt 2>&1
  done
  rm -rf /tmp/weights/$model
  # llama.cpp's Vulkan build on the same shapes, where bench/llama-cpp/fetch.sh packed it (SKIP_LLAMA_CPP=1:
  # not): a GGUF of random f16 weights, timed as gerbil-bench times gerbil (LLAMA_CPP_TIMEOUT, default 300 s).
  if [ -f $D/llama-cpp.tar.xz ] && [ -z "${SKIP_LLAMA_CPP:-}" ]; then
    [ -x /tmp/llama-cpp/llama-cpp-bench ] || tar xJf $D/llama-cpp.tar.xz -C /tmp
    mkdir -p /tmp/gguf
    python3 bench/llama-cpp/gguf_random.py test/fixtures/configs/$model.json -o /tmp/gguf/$model.gguf \
      > $R/$model.gguf.txt 2> $R/$model.llamacpp.err &&
      timeout ${LLAMA_CPP_TIMEOUT:-300} /tmp/llama-cpp/llama-cpp-bench /tmp/gguf/$model.gguf --libs /tmp/llama-cpp \
        > $R/$model.llamacpp.json 2>> $R/$model.llamacpp.err
    rm -rf /tmp/gguf
  fi
  # What is measured so far comes back even if a later model or the baseline runs out of time.
  tar czf "$OUT/results.tgz" -C $R .
done
if [ -z "${SKIP_TRANSFORMERS:-}" ]; then
  configs=""
  for model in ${BENCH_MODELS:-qwen2.5-0.5b llama-3.2-1b llama-3-8b}; do configs="$configs test/fixtures/configs/$model.json"; done
  timeout ${TRANSFORMERS_TIMEOUT:-400} python3 bench/transformers_baseline.py $configs > $R/transformers.json 2> $R/transformers.err
else
  # Without the baseline, the copy bandwidth alone (seconds), for the rooflines.
  timeout 60 python3 bench/transformers_baseline.py --bandwidth-only > $R/transformers.json 2> $R/transformers.err
fi
# The dated section of BENCHMARKS.md, written into this copy of the repo and sent back with the results
# (bench/collect.sh puts both in place on the build machine).
GERBILC_FLAGS="$(cat $D/gerbilc-flags 2>/dev/null)" python3 bench/report.py $R --commit "$(cat $D/commit 2>/dev/null || echo unknown)" --title "${BENCH_TITLE:-}" \
  --write BENCHMARKS.md && cp BENCHMARKS.md $R/BENCHMARKS.md
tar czf "$OUT/results.tgz" -C $R .
ls -la $R
