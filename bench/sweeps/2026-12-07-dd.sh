#!/usr/bin/env bash
# Speed at depth (llama-bench's -d): a user's long chat decodes and prefills against a full KV cache, which
# the benchmark's 128-token prompt never shows. Each model compiled with --max-seq 4096: decode 128 tokens
# after 128, 1024, 2048 and 3840; a 512-token prefill after 0, 1024, 2048 and 3584 cached tokens; one
# profile at the deepest; a whole 4096-token prompt (8 steps of 512); then the attentions alone at depth
# (bench/sweeps/2026-12-07-dd.txt).
# Here: FIXTURE_VARIANTS=0 PLAN_VARIANTS="ctx4k:--max-seq 4096" bash bench/prepare.sh; then device run,
# carry [".device"]: bash bench/sweeps/2026-12-07-dd.sh
set -u
O=$OUT
nvidia-smi -L > "$O/gpu.txt"
source bench/device-setup.sh
for model in ${DEPTH_MODELS:-qwen2.5-0.5b llama-3.2-1b llama-3-8b}; do
  P=$D/plans/$model+ctx4k.plan
  $D/bin/gerbil-random-weights $D/plans/$model.plan -o /tmp/weights/$model --dtype f16 > "$O/$model.weights.txt" 2>&1
  run() { timeout 120 $D/bin/gerbil-bench "$P" --weights /tmp/weights/$model --json "$@"; }
  for depth in 0 1024 2048 3584; do
    prompt=$((depth > 0 ? depth : 128))
    [ $depth = 3584 ] && prompt=3840
    run --prefill-depth $depth --prompt-tokens $prompt --decode-tokens 128 --repeats 3 > "$O/$model.d$depth.json" 2>&1
  done
  run --prefill-depth 3584 --prompt-tokens 3840 --decode-tokens 128 --repeats 1 --profile > "$O/$model.deep-profile.json" 2>&1
  run --prefill-tokens 4096 --prompt-tokens 128 --decode-tokens 16 --repeats 2 > "$O/$model.pp4096.json" 2>&1
  rm -rf /tmp/weights/$model
done
# The attentions alone at depth (sweep dd).
timeout 120 bash bench/sweep.sh bench/sweeps/2026-12-07-dd.txt > "$O/sweep-dd.txt" 2>&1
ls "$O"
