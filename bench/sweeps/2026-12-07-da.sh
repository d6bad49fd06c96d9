#!/usr/bin/env bash
# The device call after sweep cz (2026-12-07): the 8B with one query head a decode-attention workgroup (+q1,
# and +q1vf with ATTENTION_VALUES_FIRST), Qwen2.5-0.5B with ATTENTION_VALUES_FIRST (+vf: +1.8% on an H100 in
# the cz call), Llama-3.2-1B with it and with 16 score lanes (+l16), then sweep da. Here:
#   FIXTURE_VARIANTS=0 PLAN_VARIANTS="q1:--target nvidia@decode-query-heads=1;q1vf:--target \
#     nvidia@decode-query-heads=1 --kernel-define attention_decode:ATTENTION_VALUES_FIRST=1;vf:--kernel-define \
#     attention_decode:ATTENTION_VALUES_FIRST=1;l16:--kernel-define attention_decode:SCORE_LANES=16" \
#     bash bench/prepare.sh
# then device run, carry [".device"]: bash bench/sweeps/2026-12-07-da.sh. Results are written under $OUT as
# they come (results.tgz after each model, sweep.jsonl a line at a time).
set -u
O=$OUT
nvidia-smi -L > "$O/gpu.txt"
if [ -f .device/pack.tar.xz ]; then tar xJf .device/pack.tar.xz -C .device && rm .device/pack.tar.xz; fi
rm -f .device/plans/*tiny* .device/plans/*small* # the fixtures' plans: SKIP_FIXTURES below
rm -f .device/plans/llama-3-8b+vf.plan .device/plans/llama-3-8b+l16.plan .device/plans/qwen*+q1*.plan \
  .device/plans/qwen*+l16.plan .device/plans/llama-3.2*+q1*.plan
# The default plan again without --profile (--dispatch-barrier full is the default): a second figure for it.
SKIP_TEST_KERNELS=1 SKIP_FIXTURES=1 SKIP_TRANSFORMERS=1 BENCH_MODELS="llama-3-8b qwen2.5-0.5b llama-3.2-1b" \
  BENCH_VARIANTS="--dispatch-barrier full" timeout 230 bash bench/device.sh > "$O/device.log" 2>&1
OUT=$O timeout 30 bash bench/sweep.sh bench/sweeps/2026-12-07-da.txt > "$O/sweep.txt" 2>&1
ls "$O"
