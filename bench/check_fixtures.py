#!/usr/bin/env python3
"""Runs gerbil on the reference fixtures and compares with HuggingFace transformers' logits and greedy
tokens: the same check as the end-to-end tests, for any GPU.
usage: check_fixtures.py BIN_DIR PLAN_DIR FIXTURE_DIR... (PLAN_DIR/<fixture>.<dtype>.plan)"""
import array, json, os, struct, subprocess, sys


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


def run(exe, plan, weights, ids, new, dump):
    cmd = [exe, plan, "--weights", weights, "--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(new),
           "--json", "--dump-logits", dump]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    bin_dir, plan_dir, fixtures = sys.argv[1], sys.argv[2], sys.argv[3:]
    exe, results, ok = os.path.join(bin_dir, "gerbil-exec"), [], True
    for fixture in fixtures:
        name = os.path.basename(fixture.rstrip("/"))
        if not os.path.exists(os.path.join(fixture, "reference.safetensors")):
            continue
        ref = load(os.path.join(fixture, "reference.safetensors"))
        for dtype, tolerance in (("f32", 1e-3), ("f16", 0.1)):
            plan = os.path.join(plan_dir, f"{name}.{dtype}.plan")
            if not os.path.exists(plan):
                continue
            prompt = ref["greedy_prompt"]
            want = ref["greedy_output"][len(prompt):]
            run(exe, plan, fixture, ref["input_ids"], 0, "/tmp/prefill.safetensors")
            prefill = max(abs(a - b) for a, b in zip(load("/tmp/prefill.safetensors")["logits"], ref["logits"]))
            out = run(exe, plan, fixture, prompt, len(want), "/tmp/decode.safetensors")
            decode = max(abs(a - b) for a, b in
                         zip(load("/tmp/decode.safetensors")["step_logits"], ref["greedy_logits"]))
            passed = prefill <= tolerance and decode <= tolerance and out["output_ids"] == want
            ok &= passed
            results.append({"fixture": name, "dtype": dtype, "device": out["device"], "prefill_max_abs": prefill,
                            "decode_max_abs": decode, "greedy_identical": out["output_ids"] == want,
                            "passed": passed})
            print(f"{name:16} {dtype} prefill {prefill:.2e} decode {decode:.2e} greedy "
                  f"{'identical' if out['output_ids'] == want else 'DIFFERENT'} {'ok' if passed else 'FAIL'}")
    json.dump(results, open(os.environ.get("CHECK_OUT", "/tmp/check_fixtures.json"), "w"), indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
