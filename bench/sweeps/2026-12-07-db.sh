#!/usr/bin/env bash
# The device call for the defaults of 2026-12-07 (one query head a decode-attention workgroup on an f16 cache,
# ATTENTION_VALUES_FIRST): the three models' default plans, each run twice (the second without --profile).
# Here: FIXTURE_VARIANTS=0 bash bench/prepare.sh; then device run, carry [".device"]:
# bash bench/sweeps/2026-12-07-db.sh.
set -u
O=$OUT
nvidia-smi -L > "$O/gpu.txt"
if [ -f .device/pack.tar.xz ]; then tar xJf .device/pack.tar.xz -C .device && rm .device/pack.tar.xz; fi
rm -f .device/plans/*tiny* .device/plans/*small* # the fixtures' plans: SKIP_FIXTURES below
SKIP_TEST_KERNELS=1 SKIP_FIXTURES=1 SKIP_TRANSFORMERS=1 BENCH_MODELS="llama-3-8b qwen2.5-0.5b llama-3.2-1b" \
  BENCH_VARIANTS="--dispatch-barrier full" timeout 200 bash bench/device.sh > "$O/device.log" 2>&1
ls "$O"
