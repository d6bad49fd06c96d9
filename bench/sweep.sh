#!/usr/bin/env bash
# Kernel tuning on the GPU machine in one call: gerbil-kernel-bench over the variants listed in a sweep file
# (one gerbil-kernel-bench argument list a line; # comments), after bench/prepare.sh filled .device/ here.
#   device run, carry [".device"]: bash bench/sweep.sh bench/sweeps/NAME.txt
# Each line's JSON result (or its error) goes to $OUT/sweep.jsonl; a table of them is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device-setup.sh
OUT=${OUT:-/tmp/gerbil-sweep-out}
mkdir -p "$OUT"
results=$OUT/sweep.jsonl
: > "$results"
while IFS= read -r line; do
  line=${line%%#*}
  [ -z "${line// }" ] && continue
  # shellcheck disable=SC2086
  if ! out=$(timeout 60 $D/bin/gerbil-kernel-bench $line 2>&1); then
    out=$(printf '{"args": "%s", "error": "%s"}' "$line" "$(echo "$out" | tail -1 | tr -d '"\\')")
  fi
  echo "$out" | tail -1 >> "$results"
done < "${1:?usage: bench/sweep.sh SWEEP_FILE}"
python3 - "$results" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "error" in r:
        print(f"ERROR {r['args']}: {r['error']}")
        continue
    if r["kernel"] == "sync":
        what = f"n {r['n']}, {r['phases']} phases, {r['workgroups']} x {r['workgroup_size']}, {r['weight_copies']} W" + (" empty" if r["empty"] else "")
        print(f"sync             {what:40} {' '.join(r['defines']):28} dispatch {r['dispatch_us']:.2f} us, persistent {r['persistent_us']:.2f}, chained {r.get('chained_us', float('nan')):.2f} us a phase")
        continue
    if r["kernel"] == "mlp":
        what = f"{r['hidden']} / {r['inter']}, slice {r['slice']}, {r['workgroup_size']}, {r['weight_copies']} W"
        print(f"mlp              {what:40} {' '.join(r['defines']):28} {r['us']:9.1f} us a phase {r['gb_per_s']:.0f} GB/s")
        continue
    shape = {"matmul": lambda: f"T{r['tokens']} N{r['n']} K{r['k']} {r['tiling']}" + (" gate/up" if r.get("gate_up") else "") + (" f16 x" if r.get("half_input") else ""),
             "gemv": lambda: f"N{r['n']} K{r['k']} split {r['split']}{' gate/up' if r.get('gate_up') else ''}{' qkv' if r.get('qkv_kv_rows') else ''}" + (f" wg {r['workgroup']}" if "workgroup" in r else ""),
             "attention-decode": lambda: f"H{r['heads']}/{r['kv_heads']} d{r['head_dim']} pos {r['position']}",
             "attention-prefill": lambda: f"H{r['heads']}/{r['kv_heads']} d{r['head_dim']} T{r['tokens']} at {r['position']} {r['target']} splits {r.get('key_splits', 1)}" + (" f16 out" if r.get("half_result") else "") + (f" key tile {r['key_tile']}" if r.get("key_tile") else "")}[r["kernel"]]()
    rate = f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else f"{r['gb_per_s']:.0f} GB/s"
    if r.get("weights_in_l2"): shape += " (L2)"
    if r.get("rotate_mib", 512) != 512: shape += f" ({r['rotate_mib']} MiB)"
    if r.get("one_buffer"): shape += " 1 buf"
    # Lines without the key (before sweep cm) were timed in plain allocations, as was the default then.
    if r.get("allocation", "dedicated") != "dedicated": shape += " " + r["allocation"]
    print(f"{r['kernel']:16} {shape:40} {' '.join(r['defines']):28} {r['ms'] * 1000:9.1f} us {rate}")
EOF
