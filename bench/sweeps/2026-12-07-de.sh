#!/usr/bin/env bash
# Call de: the decode attention's splits at depth, alone (sweep de) and in the models: each compiled with
# --max-seq 4096 and the catalog's splits (+ctx4k) or at most 2, 4, 8 (+s2, +s4, +s8: @decode-splits=N),
# decoding 128 tokens after 3840 (DE_VARIANTS, DE_PROMPTS: which; the call ran the defaults, its device time
# short). Everything into one de.tgz (a call returns few files).
# Here: FIXTURE_VARIANTS=0 PLAN_VARIANTS="ctx4k:--max-seq 4096;s2:--max-seq 4096 --target nvidia@decode-splits=2;
# s4:--max-seq 4096 --target nvidia@decode-splits=4;s8:--max-seq 4096 --target nvidia@decode-splits=8"
# bash bench/prepare.sh; then device run, carry [".device"]: bash bench/sweeps/2026-12-07-de.sh
set -u
O=/tmp/de
mkdir -p $O
nvidia-smi -L > "$O/gpu.txt"
source bench/device-setup.sh
OUT=$O timeout 150 bash bench/sweep.sh ${DE_SWEEP:-bench/sweeps/2026-12-07-de.txt} > "$O/sweep-de.txt" 2>&1
for model in ${DEPTH_MODELS:-qwen2.5-0.5b llama-3.2-1b llama-3-8b}; do
  $D/bin/gerbil-random-weights $D/plans/$model.plan -o /tmp/weights/$model --dtype f16 > "$O/$model.weights.txt" 2>&1
  for variant in ${DE_VARIANTS:-ctx4k s4 s8}; do
    for prompt in ${DE_PROMPTS:-3840}; do
      timeout 60 $D/bin/gerbil-bench $D/plans/$model+$variant.plan --weights /tmp/weights/$model --json \
        --prefill-tokens 16 --warm-up-ms 300 --prompt-tokens $prompt --decode-tokens 128 --repeats 2 \
        > "$O/$model+$variant.p$prompt.json" 2>&1
    done
  done
  rm -rf /tmp/weights/$model
  tar czf "$OUT/de.tgz" -C $O .
done
tar czf "$OUT/de.tgz" -C $O .
ls -la "$OUT"
