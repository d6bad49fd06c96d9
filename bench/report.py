#!/usr/bin/env python3
"""Turns the results of bench/device.sh (results.tgz unpacked into a folder) into the table of
BENCHMARKS.md. usage: report.py RESULTS_DIR COMMIT > table.md"""
import glob, json, os, sys

results, commit = sys.argv[1], sys.argv[2]
transformers = {}
for path in glob.glob(os.path.join(results, "transformers*.json")):
    data = json.load(open(path))
    copy = data["copy_tb_per_s"]
    for m in data["models"]:
        transformers[os.path.basename(m["config"]).removesuffix(".json")] = m
print("| model | weight GB/token | roofline (copy BW) | gerbil decode | gerbil GB/s | transformers decode | gerbil prefill 512 | transformers prefill 512 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(os.path.join(results, "*.gerbil.json"))):
    g = json.load(open(path))
    name = os.path.basename(path).split(".gerbil")[0].rsplit(".2026", 1)[0]
    gb = g["weight_bytes"] / 1e9
    t = transformers.get(name, {})
    print(f"| {name} | {gb:.2f} | {copy * 1e3 / gb:.0f} tok/s | {g['decode']['tokens_per_s']:.0f} tok/s "
          f"({g['decode']['ms_per_token']:.2f} ms) | {g['decode']['weight_gb_per_s']:.0f} | "
          f"{t.get('decode_tokens_per_s', 0):.0f} tok/s | {g['prefill']['ms']:.1f} ms | {t.get('prefill_512_ms', 0):.1f} ms |")
print(f"\ncopy bandwidth (torch, read + write): {copy:.2f} TB/s; commit {commit}")
