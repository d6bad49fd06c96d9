#!/usr/bin/env bash
# Here (the build machine): builds gerbil and fills the ignored .device/ folder with what bench/device.sh
# needs on the GPU machine: the runtime tools, the plans (compiled here: the GPU machine has no MLIR), the
# Vulkan loader packages and the new-fixture specs. Then: device run with carry [".device"], command
# "bash bench/device.sh"; and bench/report.py turns the results into BENCHMARKS.md.
# GERBILC_FLAGS: gerbilc arguments for every plan (default --target nvidia, the H200's; empty: generic).
# PLAN_VARIANTS="NAME:GERBILC ARGS;NAME:ARGS...": every model's plan and every fixture's f16 plan is also
# compiled with these arguments added, as MODEL+NAME.plan and FIXTURE+NAME.f16.plan: device.sh benchmarks
# them beside the default plans on the same weights, and check_fixtures.py checks them against the
# references. E.g. PLAN_VARIANTS="kv16:--kv-dtype f16;early:--kernel-define attention_decode:ATTENTION_EARLY_VALUES=1"
# A variant that names its own --target (e.g. "khr:--target khr") is compiled without GERBILC_FLAGS.
# A model variant that names --max-seq or --prefill-chunk gets it instead of 1024 / 512 (ctx4k:--max-seq 4096).
# FIXTURE_VARIANTS=0: the variants for the models alone (a kernel define that fits only their shapes, say).
# BASELINE_GERBILC=PATH: another gerbilc (a copy of build/bin/gerbilc taken before a compiler change, say)
# compiles each model's plan too, as MODEL+base.plan, so that one call times the change against what it
# changed on the same card (H100s differ by ~2%, more than many changes gain).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake --build "$build" --target gerbilc gerbil-exec gerbil-bench gerbil-random-weights gerbil-kernel-bench test-kernels
D=.device
# An earlier run's pack (below) holds what it built; unpacked, its stale variants are removed as before.
if [ -f $D/pack.tar.xz ]; then tar xJf $D/pack.tar.xz -C $D && rm $D/pack.tar.xz; fi
mkdir -p $D/bin $D/plans $D/gl $D/specs
rm -f $D/plans/*+*.plan # variants of an earlier run, compiled by another gerbilc
IFS=';' read -ra planVariants <<< "${PLAN_VARIANTS:-}"
git rev-parse --short HEAD > $D/commit
# The benchmark's plans are the H200's: --target nvidia unless GERBILC_FLAGS says otherwise (a call of
# 2026-12-05 measured generic plans by leaving it out).
GERBILC_FLAGS=${GERBILC_FLAGS---target nvidia}
echo "$GERBILC_FLAGS" > $D/gerbilc-flags  # bench/report.py names them in BENCHMARKS.md
# The flags a variant's plans get before its own: none where it names its target (gerbilc takes one).
flagsFor() {
  case " $1" in *" --target"*) ;; *) echo "$GERBILC_FLAGS" ;; esac
}
# The models' sizes (--max-seq 1024 --prefill-chunk 512) but those a variant names itself (ctx4k:--max-seq 4096).
sizesFor() {
  case " $1" in *" --max-seq"*) ;; *) echo "--max-seq 1024" ;; esac
  case " $1" in *" --prefill-chunk"*) ;; *) echo "--prefill-chunk 512" ;; esac
}
cp "$build"/bin/{gerbil-exec,gerbil-bench,gerbil-random-weights,gerbil-kernel-bench,test-kernels} $D/bin/
# The runtime's shared libraries beyond glibc and libstdc++ (the GPU machine has no Debian packages of them).
mkdir -p $D/lib
for lib in $(ldd $D/bin/gerbil-exec | awk '/libutf8proc|libpcre2/ {print $3}'); do cp -L "$lib" $D/lib/; done
for fixture in test/fixtures/models/*/; do
  name=$(basename "$fixture")
  for dtype in f32 f16; do
    "$build"/bin/gerbilc "$fixture/config.json" -o $D/plans/$name.$dtype.plan --dtype $dtype ${GERBILC_FLAGS}
  done
  [ "${FIXTURE_VARIANTS:-1}" = 0 ] && continue
  for variant in "${planVariants[@]}"; do
    # shellcheck disable=SC2086
    "$build"/bin/gerbilc "$fixture/config.json" -o "$D/plans/$name+${variant%%:*}.f16.plan" --dtype f16 \
      $(flagsFor "${variant#*:}") ${variant#*:}
  done
done
for model in qwen2.5-0.5b llama-3.2-1b llama-3-8b; do
  "$build"/bin/gerbilc test/fixtures/configs/$model.json -o $D/plans/$model.plan --dtype f16 --max-seq 1024 \
    --prefill-chunk 512 ${GERBILC_FLAGS}
  for variant in "${planVariants[@]}"; do
    # shellcheck disable=SC2086
    "$build"/bin/gerbilc test/fixtures/configs/$model.json -o "$D/plans/$model+${variant%%:*}.plan" --dtype f16 \
      $(sizesFor "${variant#*:}") $(flagsFor "${variant#*:}") ${variant#*:}
  done
  if [ -n "${BASELINE_GERBILC:-}" ]; then
    # shellcheck disable=SC2086
    "$BASELINE_GERBILC" test/fixtures/configs/$model.json -o $D/plans/$model+base.plan --dtype f16 \
      --max-seq 1024 --prefill-chunk 512 ${GERBILC_FLAGS}
  fi
done
if [ -z "$(ls $D/gl/*.deb 2>/dev/null)" ]; then
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p /tmp/amd64/partial
  apt-get $o update -q
  (cd $D/gl && apt-get $o download libvulkan1 libglvnd0 libglx0 libegl1 libopengl0 libgl1 libgles2)
fi
# llama.cpp's Vulkan build for device.sh to time beside gerbil (LLAMA_CPP=0: not; it needs the npm registry).
if [ "${LLAMA_CPP:-1}" != 0 ]; then
  bash bench/llama-cpp/fetch.sh || echo "prepare.sh: no llama.cpp for device.sh (bench/llama-cpp/fetch.sh failed)" >&2
fi
cp test/fixtures/specs/*.json $D/specs/ 2>/dev/null || true
[ -f $D/make_reference.py ] || cp ../shared/tools/make_reference.py $D/ 2>/dev/null || true
# What travels to the GPU machine (the tree's ~25 MB and .device) must stay under 64 MiB: with a few plan
# variants the binaries and plans alone are ~60 MiB, ~8 MiB packed. device.sh and sweep.sh unpack it.
tar cJf $D/pack.tar.xz -C $D bin plans lib && rm -rf $D/bin $D/plans $D/lib
du -sh $D
