#!/usr/bin/env python3
"""HuggingFace transformers on the same GPU and configs as gerbil's benchmark: random f16 weights,
batch 1, sdpa attention; prefill of a 512-token prompt and 128 greedy tokens after a 128-token prompt with a
plain KV-cache loop (as in ../shared/docs/device-vulkan.md). Prefill asks for the last row of logits only
(logits_to_keep=1, as generate() does and as gerbil's generation prefill computes), where this transformers
has the argument; it reports whether it did. Prints one JSON object per config."""
import inspect, json, sys, time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def bench(config_path):
    config = AutoConfig.from_pretrained(config_path)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float16, attn_implementation="sdpa")
    model.eval()
    vocab = config.vocab_size
    prompt512 = torch.randint(0, vocab, (1, 512), device="cuda")
    prompt128 = torch.randint(0, vocab, (1, 128), device="cuda")
    parameters = inspect.signature(model.forward).parameters
    last_row = next(({name: 1} for name in ("logits_to_keep", "num_logits_to_keep") if name in parameters), {})
    with torch.inference_mode():
        for _ in range(2):
            model(prompt512, **last_row)
        torch.cuda.synchronize()
        best = 1e30
        for _ in range(3):
            t = time.perf_counter()
            model(prompt512, **last_row)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
        prefill_ms = best * 1000

        def decode(n):
            out = model(prompt128, use_cache=True)
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(n):
                out = model(token, past_key_values=past, use_cache=True)
                past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            return (time.perf_counter() - t) * 1000 / n

        decode(8)
        ms_per_token = min(decode(128) for _ in range(2))
    return {"config": config_path, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
            "prefill_512_ms": prefill_ms, "prefill_last_row_logits_only": bool(last_row), "decode_ms_per_token": ms_per_token, "decode_tokens_per_s": 1000 / ms_per_token}


def copy_bandwidth():
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(10):
        t = time.perf_counter()
        y.copy_(x)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * x.numel() / best / 1e12  # TB/s, read + write


if __name__ == "__main__":
    # --bandwidth-only: the copy bandwidth alone (the rooflines of a quick run without the baseline).
    results = {"copy_tb_per_s": copy_bandwidth(), "gpu": torch.cuda.get_device_name(0), "models": []}
    for path in [a for a in sys.argv[1:] if a != "--bandwidth-only"]:
        results["models"].append(bench(path))
        torch.cuda.empty_cache()
    print(json.dumps(results))
