#!/usr/bin/env python3
"""Turns the results of bench/device.sh (a folder: machine.txt, MODEL.gerbil.json, transformers.json,
MODEL.llamacpp.json, fixtures.json) into a dated section of BENCHMARKS.md.

usage: report.py RESULTS_DIR [--commit C] [--title T] [--write BENCHMARKS.md]

Without --write the section goes to stdout. With it, the section is put in the file right after its
introduction (before the first '## ' section), so that the newest measurement comes first; a section of the
same date, commit and title already there is replaced, so a re-run does not add a duplicate.
"""
import argparse
import glob
import json
import os
import re
import sys

# llama.cpp's figures on the same card from ../shared/docs/device-vulkan.md, for calls that did not time it
# (device.sh times it where bench/llama-cpp/fetch.sh packed it: MODEL.llamacpp.json).
LLAMA_CPP = {"llama-3-8b": ("173 tok/s", "43.8 ms"), "llama-3.2-1b": ("626–664 tok/s", "10.7 ms")}
TARGETS = {"llama-3-8b": ("240", "25"), "llama-3.2-1b": ("1200", "8"), "qwen2.5-0.5b": ("2000", "6")}
ORDER = ["llama-3-8b", "llama-3.2-1b", "qwen2.5-0.5b"]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def model_name(path):
    return os.path.basename(path).split(".gerbil")[0]


def runtime_variants(results):
    """device.sh's BENCH_VARIANTS runs: MODEL.variant-N.txt, the gerbil-bench arguments after '# ', then its
    JSON; each becomes a row 'MODEL [ARGUMENTS]'."""
    rows = {}
    for path in glob.glob(os.path.join(results, "*.variant-*.txt")):
        text = open(path).read()
        first, _, rest = text.partition("\n")
        try:
            run = json.loads(rest[rest.index("{"):])
        except ValueError:
            run = None
        model = os.path.basename(path).split(".variant-")[0]
        rows[f"{model} [{first.removeprefix('# ').strip()}]"] = run
    return rows


def section(results, commit, title):
    machine = open(os.path.join(results, "machine.txt")).read().split("\n") if os.path.exists(
        os.path.join(results, "machine.txt")) else ["", ""]
    date = machine[0][:10] or "unknown date"
    fields = [f.strip() for f in machine[1].split(",")] if len(machine) > 1 else []
    gpu = f"{fields[0]} (driver {fields[1]})" if len(fields) >= 2 else "unknown GPU"
    transformers = load_json(os.path.join(results, "transformers.json")) or {}
    copy_tb = transformers.get("copy_tb_per_s")
    baseline = {os.path.basename(m["config"]).removesuffix(".json"): m for m in transformers.get("models", [])}
    runs = {model_name(p): load_json(p) for p in glob.glob(os.path.join(results, "*.gerbil.json"))}
    llama_cpp = {os.path.basename(p).split(".llamacpp")[0]: load_json(p)
                 for p in glob.glob(os.path.join(results, "*.llamacpp.json"))}
    llama_cpp = {name: run for name, run in llama_cpp.items() if run and "decode" in run}
    runs.update(runtime_variants(results))
    names = [n for n in ORDER if n in runs] + sorted(n for n in runs if n not in ORDER)

    out = [f"## {date} — {gpu}, commit {commit}{' — ' + title if title else ''}", ""]
    out += ["```", "bench/prepare.sh, then on the GPU machine: bash bench/device.sh   (carry .device)",
            "gerbilc CONFIG -o MODEL.plan --dtype f16 --max-seq 1024 --prefill-chunk 512 "
            + os.environ.get("GERBILC_FLAGS", "").strip(),
            "gerbil-bench MODEL.plan --weights RANDOM_F16_DIR --profile --json", "```", ""]
    out += ["| model | dispatches / token | gerbil decode | weight GB/s | % of roofline | target | llama.cpp |"
            " transformers | gerbil prefill 512 | target | llama.cpp | transformers |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in names:
        g = runs[name]
        if not g or "decode" not in g:
            out.append(f"| {name} | failed: see bench/results | | | | | | | | | | |")
            continue
        decode, prefill = g["decode"], g["prefill"]
        gb = g["weight_bytes"] / 1e9
        roofline = f"{decode['tokens_per_s'] / (copy_tb * 1e3 / gb) * 100:.0f}%" if copy_tb else "?"
        t = baseline.get(name, {})
        measured = llama_cpp.get(name)
        lc = (f"{measured['decode']['tokens_per_s']:.0f} tok/s", f"{measured['prefill']['ms']:.1f} ms") if measured \
            else ("–", "–") if llama_cpp else LLAMA_CPP.get(name, ("–", "–"))
        # A variant plan (MODEL+VARIANT: other gerbilc options, the same weights) or run (MODEL [ARGUMENTS]:
        # other gerbil-bench options) is held to its model's target.
        base = name.split("+", 1)[0].split(" [", 1)[0]
        variant = base != name
        target = TARGETS.get(base, ("–", "–"))
        decode_target = f"(≥ {target[0]})" if variant else f"≥ {target[0]}"
        prefill_target = f"(≤ {target[1]} ms)" if variant else f"≤ {target[1]} ms"
        t_decode = f"{t['decode_tokens_per_s']:.0f} tok/s" if t else "–"
        t_prefill = f"{t['prefill_512_ms']:.1f} ms" if t else "–"
        out.append(f"| {name} | {g.get('dispatches_per_decode_token', '?')} | {decode['tokens_per_s']:.0f} tok/s "
                   f"({decode['ms_per_token']:.2f} ms) | {decode['weight_gb_per_s']:.0f} | {roofline} | "
                   f"{decode_target} | {lc[0]} | {t_decode} | {prefill['ms']:.1f} ms | {prefill_target} | {lc[1]} | "
                   f"{t_prefill} |")
    out.append("")
    if copy_tb:
        out.append(f"Roofline = weight bytes per decode token ÷ copy bandwidth ({copy_tb:.2f} TB/s, torch, read + "
                   "write counted, measured in the same call).")
    out.append(llama_cpp_note(llama_cpp, results))
    profiles = [profile_line(n, runs[n]) for n in names if "+" not in n and " [" not in n and runs[n]]
    profiles = [p for p in profiles if p]
    if profiles:
        out += ["", "Decode profile (`--profile`: µs a launch × launches a token, and the weight bytes' rate; the "
                "timestamps add ~1 µs a launch):"] + profiles
    fixtures = load_json(os.path.join(results, "fixtures.json"))
    if isinstance(fixtures, list) and fixtures:
        failed = [f"{r.get('plan', r['fixture'])} {r['dtype']}" for r in fixtures if not r.get("passed")]
        worst = {d: max((max(r["prefill_max_abs"], r["decode_max_abs"]) for r in fixtures if r["dtype"] == d),
                        default=0) for d in ("f32", "f16")}
        verdict = "all pass" if not failed else "FAILED: " + ", ".join(failed)
        tied = [f"{r.get('plan', r['fixture'])} {r['dtype']}" for r in fixtures if r.get("passed") and not r["greedy_identical"]]
        if tied:
            verdict += f" ({', '.join(tied)}: greedy tokens the same up to a near-tie of the reference)"
        out.append(f"Fixtures against transformers on this GPU ({len(fixtures)} runs): {verdict}; max |Δlogit| "
                   f"{worst['f32']:.1e} in f32 (tolerance 1e-3), {worst['f16']:.3f} in f16 (tolerance 0.1).")
    out.append("")
    return date, "\n".join(out)


def llama_cpp_note(measured, results):
    """Where the llama.cpp columns come from: this call (the release and device llama-cpp-bench names, and
    its greedy loop beside llama-bench's way) or the shared document."""
    if not measured:
        failed = glob.glob(os.path.join(results, "*.llamacpp.err"))
        why = " (llama-cpp-bench ran and failed: see *.llamacpp.err)" if failed else ""
        return (f"llama.cpp: the figures of `../shared/docs/device-vulkan.md` (same card, its Vulkan backend), not "
                f"measured in this call{why}.")
    first = next(iter(measured.values()))
    greedy = ", ".join(f"{name} {run['decode_greedy']['tokens_per_s']:.0f}" for name, run in sorted(measured.items())
                       if "decode_greedy" in run)
    return (f"llama.cpp: measured in this call (`bench/llama-cpp`: {first.get('engine', '?')}, "
            f"{first.get('device', '?')}{matrix_cores(first)}, flash attention {first.get('flash_attn', '?')}; "
            "random f16 GGUF weights, "
            f"all layers on the GPU). Decode as llama-bench's tg: one-token steps after a "
            f"{first['decode'].get('prompt', '?')}-token prompt, the next token fed without reading the logits; with "
            f"the greedy token read from the logits on the host (tok/s): {greedy or '–'}. Prefill: one "
            f"{first['prefill'].get('tokens', '?')}-token step. The best of {len(first['prefill'].get('runs_ms', []))} "
            "runs each.")


def matrix_cores(run):
    """', matrix cores X' as ggml's Vulkan backend described the device (which of its matmul shaders ran)."""
    found = re.search(r"matrix cores: ([^|]+)", run.get("vulkan_device", ""))
    return f", matrix cores {found.group(1).strip()}" if found else ""


def profile_line(name, run):
    """The decode profile of a default plan in a line: each kernel family's µs a launch and, where the JSON
    has it (gerbil-bench since d4569d9), the rate its launches read their weights at."""
    rows = run.get("profile_decode") or []
    parts = []
    for row in rows:
        per_launch = row["ms"] * 1000 / max(row["dispatches"], 1)
        part = f"{row['kernel']} {per_launch:.1f}"
        if row["dispatches"] > 1:
            part += f" × {row['dispatches']}"
        if "weight_gb_per_s" in row:
            part += f" ({row['weight_gb_per_s']:.0f} GB/s)"
        parts.append(part)
    return f"- {name}: " + ", ".join(parts) if parts else None


def splice(path, date, text, heading):
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    parts = re.split(r"(?m)^(?=## )", old)
    intro, sections = parts[0], parts[1:]
    sections = [s for s in sections if s.split("\n", 1)[0] != heading]
    with open(path, "w") as f:
        f.write(intro + text + "\n" + "".join(sections))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--title", default="")
    parser.add_argument("--write", metavar="BENCHMARKS.md")
    args = parser.parse_args()
    if not os.path.isdir(args.results):
        sys.exit(f"report.py: {args.results}: not a folder of results")
    date, text = section(args.results, args.commit, args.title)
    if args.write:
        splice(args.write, date, text, text.split("\n", 1)[0])
        print(f"report.py: wrote the {date} section into {args.write}")
    else:
        print(text)


if __name__ == "__main__":
    main()
