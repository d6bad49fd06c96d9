#!/usr/bin/env bash
# The 8B's prefetch beside its decode attention with the shorter attention of 8a95921 (one query head a
# workgroup: 8.6 µs a layer against 10.6, less idle memory to fill): none (+pb0), the default 8 MiB, 16 MiB
# (+pb16). Here: FIXTURE_VARIANTS=0 PLAN_VARIANTS="pb0:--prefetch-bytes 0;pb16:--prefetch-bytes 16777216
# --prefetch-beside" bash bench/prepare.sh; then device run, carry [".device"]: bash bench/sweeps/2026-12-07-dc.sh.
set -u
O=$OUT
nvidia-smi -L > "$O/gpu.txt"
if [ -f .device/pack.tar.xz ]; then tar xJf .device/pack.tar.xz -C .device && rm .device/pack.tar.xz; fi
rm -f .device/plans/*tiny* .device/plans/*small* .device/plans/qwen* .device/plans/llama-3.2*
SKIP_TEST_KERNELS=1 SKIP_FIXTURES=1 SKIP_TRANSFORMERS=1 BENCH_MODELS="llama-3-8b" \
  BENCH_VARIANTS="--dispatch-barrier full" timeout 150 bash bench/device.sh > "$O/device.log" 2>&1
ls "$O"
