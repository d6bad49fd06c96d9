#!/usr/bin/env python3
"""Writes a GGUF file of random f16 weights for a HuggingFace Llama or Qwen2 config, for timing llama.cpp on
the same shapes as gerbil (whose gerbil-random-weights does the same in safetensors): speed does not depend on
the values, so no checkpoint is downloaded.

usage: gguf_random.py CONFIG.json -o MODEL.gguf

The file follows GGUF version 3 as llama.cpp reads it: the architecture's hyperparameters, no tokenizer (the
"none" model with `ARCH.vocab_size` dummy tokens: the benchmark feeds token ids), 2-D weights in f16 and norm
weights and biases in f32. Tied embeddings (tie_word_embeddings) get no output.weight, as llama.cpp's
converter writes them. Llama 3's rope_scaling is left out: it changes RoPE's frequencies, not the time.
Pure Python (no numpy on the build machine): the values come from one pool of random halves, repeated.
"""
import argparse
import json
import os
import random
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32
# gguf_type values of the key-value section, and ggml_type values of the tensors.
UINT32, FLOAT32, STRING = 4, 6, 8
GGML_F32, GGML_F16 = 0, 1
ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}
POOL_HALVES = 1 << 20


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def key_value(key, kind, value):
    packed = {UINT32: lambda v: struct.pack("<I", v), FLOAT32: lambda v: struct.pack("<f", v),
              STRING: gguf_string}[kind](value)
    return gguf_string(key) + struct.pack("<I", kind) + packed


class Tensor:
    """A tensor as GGUF lists it: dims innermost first (a HuggingFace [out, in] matrix is (in, out))."""

    def __init__(self, name, dims, ggml_type):
        self.name, self.dims, self.type = name, dims, ggml_type
        count = 1
        for d in dims:
            count *= d
        self.bytes = count * (2 if ggml_type == GGML_F16 else 4)


def config_value(config, key, path):
    if key not in config:
        sys.exit(f"gguf_random.py: {path} has no '{key}'")
    return config[key]


def model_tensors(config, path, arch):
    hidden = config_value(config, "hidden_size", path)
    heads = config_value(config, "num_attention_heads", path)
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden // heads
    ffn = config_value(config, "intermediate_size", path)
    vocab = config_value(config, "vocab_size", path)
    layers = config_value(config, "num_hidden_layers", path)
    tensors = [Tensor("token_embd.weight", (hidden, vocab), GGML_F16),
               Tensor("output_norm.weight", (hidden,), GGML_F32)]
    if not config.get("tie_word_embeddings", False):
        tensors.append(Tensor("output.weight", (hidden, vocab), GGML_F16))
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [Tensor(b + "attn_norm.weight", (hidden,), GGML_F32),
                    Tensor(b + "attn_q.weight", (hidden, heads * head_dim), GGML_F16),
                    Tensor(b + "attn_k.weight", (hidden, kv_heads * head_dim), GGML_F16),
                    Tensor(b + "attn_v.weight", (hidden, kv_heads * head_dim), GGML_F16),
                    Tensor(b + "attn_output.weight", (heads * head_dim, hidden), GGML_F16),
                    Tensor(b + "ffn_norm.weight", (hidden,), GGML_F32),
                    Tensor(b + "ffn_gate.weight", (hidden, ffn), GGML_F16),
                    Tensor(b + "ffn_up.weight", (hidden, ffn), GGML_F16),
                    Tensor(b + "ffn_down.weight", (ffn, hidden), GGML_F16)]
        if arch == "qwen2":  # Qwen2's q/k/v have biases
            tensors += [Tensor(b + "attn_q.bias", (heads * head_dim,), GGML_F32),
                        Tensor(b + "attn_k.bias", (kv_heads * head_dim,), GGML_F32),
                        Tensor(b + "attn_v.bias", (kv_heads * head_dim,), GGML_F32)]
    meta = [key_value("general.architecture", STRING, arch),
            key_value("general.name", STRING, f"random {arch} ({os.path.basename(path)})"),
            key_value(f"{arch}.vocab_size", UINT32, vocab),
            key_value(f"{arch}.context_length", UINT32, config.get("max_position_embeddings", 4096)),
            key_value(f"{arch}.embedding_length", UINT32, hidden),
            key_value(f"{arch}.block_count", UINT32, layers),
            key_value(f"{arch}.feed_forward_length", UINT32, ffn),
            key_value(f"{arch}.attention.head_count", UINT32, heads),
            key_value(f"{arch}.attention.head_count_kv", UINT32, kv_heads),
            key_value(f"{arch}.attention.key_length", UINT32, head_dim),
            key_value(f"{arch}.attention.value_length", UINT32, head_dim),
            key_value(f"{arch}.rope.dimension_count", UINT32, head_dim),
            key_value(f"{arch}.rope.freq_base", FLOAT32, float(config.get("rope_theta", 10000.0))),
            key_value(f"{arch}.attention.layer_norm_rms_epsilon", FLOAT32, float(config.get("rms_norm_eps", 1e-6))),
            key_value("tokenizer.ggml.model", STRING, "none")]
    return meta, tensors


def padding(offset):
    return (ALIGNMENT - offset % ALIGNMENT) % ALIGNMENT


def write(path, meta, tensors):
    rng = random.Random(0)
    halves = b"".join(struct.pack("<e", rng.gauss(0.0, 0.02)) for _ in range(POOL_HALVES))
    with open(path, "wb") as f:
        f.write(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(meta)))
        for kv in meta:
            f.write(kv)
        offset = 0
        for t in tensors:
            f.write(gguf_string(t.name) + struct.pack("<I", len(t.dims)))
            f.write(struct.pack(f"<{len(t.dims)}Q", *t.dims) + struct.pack("<IQ", t.type, offset))
            offset += t.bytes + padding(t.bytes)
        f.write(b"\0" * padding(f.tell()))
        for t in tensors:
            if t.type == GGML_F32:  # norm weights 1, biases 0.01
                value = 1.0 if t.name.endswith("norm.weight") else 0.01
                f.write(struct.pack("<f", value) * (t.bytes // 4))
            else:
                left = t.bytes
                while left:
                    part = halves[:min(left, len(halves))]
                    f.write(part)
                    left -= len(part)
            f.write(b"\0" * padding(t.bytes))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    architecture = (config.get("architectures") or ["?"])[0]
    if architecture not in ARCHITECTURES:
        sys.exit(f"gguf_random.py: {args.config}: architecture {architecture} is not one of "
                 f"{', '.join(ARCHITECTURES)}")
    meta, tensors = model_tensors(config, args.config, ARCHITECTURES[architecture])
    write(args.output, meta, tensors)
    print(f"{args.output}: {len(tensors)} tensors, {sum(t.bytes for t in tensors) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
