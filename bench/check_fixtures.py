#!/usr/bin/env python3
"""Runs gerbil on the reference fixtures and compares with HuggingFace transformers' logits and greedy
tokens: the same check as the end-to-end tests, for any GPU.
usage: check_fixtures.py BIN_DIR PLAN_DIR FIXTURE_DIR... (PLAN_DIR/<fixture>.<dtype>.plan, and variants
<fixture>+<name>.<dtype>.plan compiled with other gerbilc options: bench/prepare.sh's PLAN_VARIANTS)"""
import array, glob, json, os, struct, subprocess, sys


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            f.seek(base + entry["data_offsets"][0])
            data = f.read(entry["data_offsets"][1] - entry["data_offsets"][0])
            values = array.array("q" if entry["dtype"] == "I64" else "f")
            values.frombytes(data)
            out[key] = list(values)
        return out


def decided_steps(logits, vocab, tolerance):
    """The greedy steps a path whose logits stay within `tolerance` of the reference's must reproduce, as in
    test/e2e/ModelsTest.cpp: all of them, or up to the reference's first near-tie (top two logits less than
    2 * tolerance apart), where either of the two tokens may win; after it the contexts may differ.
    Returns (steps, the near-tie's two tokens or None)."""
    steps = len(logits) // vocab
    for s in range(steps):
        row = logits[s * vocab:(s + 1) * vocab]
        first, second = sorted(range(vocab), key=row.__getitem__, reverse=True)[:2]
        if row[first] - row[second] < 2 * tolerance:
            return s + 1, (first, second)
    return steps, None


def greedy_matches(got, want, logits, tolerance):
    decided, tie = decided_steps(logits, len(logits) // len(want), tolerance)
    if len(got) != len(want):
        return False, decided
    for s in range(decided):
        if tie is not None and s + 1 == decided and decided < len(want):
            if got[s] not in tie:
                return False, decided
        elif got[s] != want[s]:
            return False, decided
    return True, decided


def run(exe, plan, weights, ids, new, dump):
    cmd = [exe, plan, "--weights", weights, "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(new),
           "--json", "--dump-logits", dump]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def check(exe, plan, label, fixture, name, ref, dtype, tolerance):
    """Runs one plan of a fixture against its reference; returns the result's record."""
    prompt = ref["greedy_prompt"]
    want = ref["greedy_output"][len(prompt):]
    run(exe, plan, fixture, ref["input_ids"], 0, "/tmp/prefill.safetensors")
    prefill = max(abs(a - b) for a, b in zip(load("/tmp/prefill.safetensors")["logits"], ref["logits"]))
    out = run(exe, plan, fixture, prompt, len(want), "/tmp/decode.safetensors")
    greedy_ok, decided = greedy_matches(out["output_ids"], want, ref["greedy_logits"], tolerance)
    vocab = len(ref["greedy_logits"]) // len(want)
    decode = max(abs(a - b) for a, b in
                 zip(load("/tmp/decode.safetensors")["step_logits"][:decided * vocab],
                     ref["greedy_logits"][:decided * vocab]))
    passed = prefill <= tolerance and decode <= tolerance and greedy_ok
    identical = out["output_ids"] == want
    greedy = "identical" if identical else f"same to a near-tie ({decided})" if greedy_ok else "DIFFERENT"
    print(f"{label:16} {dtype} prefill {prefill:.2e} decode {decode:.2e} greedy {greedy} "
          f"{'ok' if passed else 'FAIL'}")
    return {"fixture": name, "plan": label, "dtype": dtype, "device": out["device"], "prefill_max_abs": prefill,
            "decode_max_abs": decode, "decided_steps": decided, "greedy_identical": identical,
            "greedy_matches": greedy_ok, "passed": passed}


def main():
    bin_dir, plan_dir, fixtures = sys.argv[1], sys.argv[2], sys.argv[3:]
    exe, results = os.path.join(bin_dir, "gerbil-exec"), []
    for fixture in fixtures:
        name = os.path.basename(fixture.rstrip("/"))
        if not os.path.exists(os.path.join(fixture, "reference.safetensors")):
            continue
        ref = load(os.path.join(fixture, "reference.safetensors"))
        for dtype, tolerance in (("f32", 1e-3), ("f16", 0.1)):
            pattern = os.path.join(glob.escape(plan_dir), f"{glob.escape(name)}+*.{dtype}.plan")
            for plan in [os.path.join(plan_dir, f"{name}.{dtype}.plan")] + sorted(glob.glob(pattern)):
                if os.path.exists(plan):
                    label = os.path.basename(plan)[:-len(f".{dtype}.plan")]
                    results.append(check(exe, plan, label, fixture, name, ref, dtype, tolerance))
    json.dump(results, open(os.environ.get("CHECK_OUT", "/tmp/check_fixtures.json"), "w"), indent=1)
    sys.exit(0 if all(r["passed"] for r in results) else 1)


if __name__ == "__main__":
    main()
