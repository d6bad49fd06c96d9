#!/usr/bin/env bash
# The device call prepared for sweep cz (prepared on 2026-12-06, when no machine could be started; run on an
# H100 on 2026-12-07 at 453d7d1, BENCHMARKS.md), from the
# repository root: sweep cz and the decode attention's variants in the model (+vf: ATTENTION_VALUES_FIRST,
# +l8: 8 score lanes), on an H200 the 8B's prefetch beside its attention (+pb16, +pb32) first. Here:
#   FIXTURE_VARIANTS=0 PLAN_VARIANTS="pb16:--prefetch-bytes 16777216 --prefetch-beside;pb32:--prefetch-bytes \
#     33554432 --prefetch-beside;l8:--kernel-define attention_decode:SCORE_LANES=8;vf:--kernel-define \
#     attention_decode:ATTENTION_VALUES_FIRST=1" bash bench/prepare.sh
# then device run, carry [".device"]: bash bench/sweeps/2026-12-07-cz.sh. Everything is written under $OUT as
# it goes, so a call cut short still returns what ran (results.tgz after each model, sweep.jsonl a line at a
# time).
set -u
O=$OUT
nvidia-smi -L > "$O/gpu.txt"
if [ -f .device/pack.tar.xz ]; then tar xJf .device/pack.tar.xz -C .device && rm .device/pack.tar.xz; fi
rm -f .device/plans/*tiny* .device/plans/*small* # the fixtures' plans: SKIP_FIXTURES below
bench() {
  # The runtime's narrower barriers against the default (--dispatch-barrier full: the default again, a
  # control without --profile, as the variants run).
  SKIP_TEST_KERNELS=1 SKIP_FIXTURES=1 SKIP_TRANSFORMERS=1 BENCH_MODELS="$1" \
    BENCH_VARIANTS="--dispatch-barrier compute;--dispatch-barrier storage;--dispatch-barrier full" \
    timeout "$2" bash bench/device.sh > "$O/device.log" 2>&1
}
if grep -q H200 "$O/gpu.txt"; then
  rm -f .device/plans/qwen*+pb*.plan .device/plans/llama-3.2*+pb*.plan .device/plans/qwen*+l8.plan
  bench "llama-3-8b qwen2.5-0.5b llama-3.2-1b" 390
  OUT=$O timeout 150 bash bench/sweep.sh bench/sweeps/2026-12-07-cz.txt > "$O/sweep.txt" 2>&1
else # an H100: the prefetch sizes were timed on H100s before (BENCHMARKS.md, a48cac9 and 73b149b)
  rm -f .device/plans/*+pb*.plan .device/plans/qwen*+l8.plan .device/plans/llama-3.2*+l8.plan
  OUT=$O timeout 150 bash bench/sweep.sh bench/sweeps/2026-12-07-cz.txt > "$O/sweep.txt" 2>&1
  bench "llama-3-8b qwen2.5-0.5b llama-3.2-1b" 330
fi
ls "$O"
