#!/usr/bin/env bash
# Call df: what a decode launch's workgroups cost, alone (sweep df: gerbil-kernel-bench gemv --workgroup N
# and empty launches of 132 to 1056 workgroups) and in the small models (+gw256, +gw512, +gw1024: gerbilc
# --target nvidia@gemv-workgroup=N), beside the default plans, without the fixtures and transformers.
# Here: FIXTURE_VARIANTS=0 PLAN_VARIANTS="gw256:--target nvidia@gemv-workgroup=256;gw512:--target
# nvidia@gemv-workgroup=512;gw1024:--target nvidia@gemv-workgroup=1024" bash bench/prepare.sh; then device
# run, carry [".device"]: bash bench/sweeps/2026-12-07-df.sh (about 5 minutes). Results: $OUT/sweep.jsonl,
# $OUT/sweep-df.txt and $OUT/results.tgz (device.sh's).
set -u
nvidia-smi -L > "$OUT/gpu.txt"
OUT=$OUT timeout 200 bash bench/sweep.sh bench/sweeps/2026-12-07-df.txt > "$OUT/sweep-df.txt" 2>&1
# The 8B's launches are long: its variants are left out (sweep df times its short ones alone).
rm -f .device/plans/llama-3-8b+*.plan
SKIP_TEST_KERNELS=1 SKIP_FIXTURES=1 SKIP_TRANSFORMERS=1 \
  BENCH_TITLE="the decode gemvs in wider workgroups (+gw256, +gw512, +gw1024: @gemv-workgroup=N); sweep df" \
  timeout 330 bash bench/device.sh > "$OUT/device.txt" 2>&1
ls -la "$OUT"
