#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets to test/fuzz/corpus/<target>/ from the test fixtures.

Usage: test/fuzz/make_corpus.py [--plan PLAN]
PLAN is a plan of llama-tiny (default: compiled with build/bin/gerbilc --max-seq 16 --prefill-chunk 4, or
GERBILC if set).
The seeds are committed; run this again only when a format changes.
"""
import argparse
import json
import os
import pathlib
import shutil
import struct
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "test" / "fuzz" / "corpus"
FIXTURES = ROOT / "test" / "fixtures"
SPIRV_MAGIC = 0x07230203


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# ---- plan: a whole plan file, and manifests in fuzz_plan's second form ("manifest NUL blob").

def plan_seeds(plan_path):
    data = pathlib.Path(plan_path).read_bytes()
    write("plan", "llama-tiny.plan", data)
    manifest_bytes, _ = struct.unpack_from("<QQ", data, 16)
    manifest = json.loads(data[32:32 + manifest_bytes])
    # Every kernel gets five words of its own (a SPIR-V header), so that the seed stays small and still validates.
    blob = struct.pack("<5I", SPIRV_MAGIC, 0x00010500, 0, 8, 0)
    for index, kernel in enumerate(manifest["kernels"]):
        kernel["spirvOffset"], kernel["spirvWords"] = 5 * index, 5
    write("plan", "llama-tiny.manifest", compact(manifest) + b"\0" + blob * len(manifest["kernels"]))

    # The smallest plan: one weight, one kernel, one dispatch per schedule.
    binding = {"kind": "arena", "weight": 0, "offset": 0, "size": 16}
    grid = [{"mulT": 1, "add": 0, "div": 1}, {"mulT": 0, "add": 1, "div": 1}, {"mulT": 0, "add": 1, "div": 1}]
    dispatch = {"kernel": 0, "label": "d", "grid": grid,
                "bindings": [{"kind": "weight", "weight": 0, "offset": 0, "size": 0}, binding,
                             {"kind": "state", "weight": 0, "offset": 0, "size": 24}]}
    small = {
        "model": {"architecture": "LlamaForCausalLM", "family": "llama", "vocabSize": 4, "hiddenSize": 4,
                  "numLayers": 1, "bosTokenIds": [1], "eosTokenIds": [2], "configJson": "{}", "configPath": "",
                  "ignoredSourceKeys": ["*.inv_freq"]},
        "limits": {"maxSequence": 4, "prefillChunk": 2},
        # Kernels by address (plan format 7) and a cooperative-matrix shape (format 8).
        "requires": {"shaderFloat16": False, "storageBuffer16BitAccess": False, "maxStorageBufferRange": 64,
                     "maxSharedMemoryBytes": 0, "vulkanMemoryModel": False, "subgroupSize": 0,
                     "deviceExtensions": [], "subgroupArithmetic": False, "minSubgroupSize": 0,
                     "bufferDeviceAddress": True, "pushConstantBytes": 32,
                     "cooperativeMatrixShapes": ["16x16x16 f16*f16+f32->f32"]},
        "target": "generic", "compilerVersion": "seed", "bufferAccess": "addresses",
        "weights": [{"name": "w", "sourceKeys": ["w.weight"], "shape": [4, 4], "deviceDType": "f16",
                     "layout": "row_major", "transpose": True, "sliceDim": 0, "sliceStart": 4, "sliceLength": 4,
                     "scaleColumnsBy": -1}],
        "kvCache": {"numLayers": 1, "numKVHeads": 1, "headDim": 4, "dtype": "f32", "layout": "LHSd", "bytes": 64},
        "arenaBytes": 64, "inputBytes": 8, "stateBytes": 24, "scratchBytes": 0, "gpuArgmax": True,
        "lastRowLogits": {"prefill": 0, "decode": 0, "prefillDispatches": 1},
        "inputIds": {"kind": "input", "weight": 0, "offset": 0, "size": 8},
        "logits": {"kind": "kv_cache", "weight": 0, "offset": 0, "size": 16},
        "kernels": [{"name": "k", "numBindings": 3, "workgroupSize": [64, 1, 1], "spirvOffset": 0,
                     "spirvWords": 5}],
        "prefill": [dispatch], "decode": [dispatch],
    }
    write("plan", "small.manifest", compact(small) + b"\0" + blob)


# ---- safetensors.

def safetensors(tensors, metadata=None, pad_to=8, truncate=None):
    """tensors: [(name, dtype, shape, bytes)] -> file bytes (offsets in order, as the writers lay them out)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = compact(header)
    text += b" " * (-len(text) % pad_to)
    out = struct.pack("<Q", len(text)) + text + data
    return out if truncate is None else out[:truncate]


SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def tensor(name, dtype, shape):
    count = 1
    for dim in shape:
        count *= dim
    return (name, dtype, shape, bytes((i * 37 + 11) % 256 for i in range(count * SIZES[dtype])))


def safetensors_seeds():
    fixture = (FIXTURES / "models" / "llama-tiny" / "model.safetensors").read_bytes()
    (header_bytes,) = struct.unpack_from("<Q", fixture)
    # The fixture's real header with only the first bytes of its data: every tensor but the first lies outside.
    write("safetensors", "llama-tiny-truncated.safetensors", fixture[:8 + header_bytes + 512])
    # The same names and dtypes, every shape shrunk to [2, 2] or [2]: a valid file of the fixture's structure.
    header = json.loads(fixture[8:8 + header_bytes])
    shrunk = [tensor(name, entry["dtype"], [2] * min(len(entry["shape"]), 2))
              for name, entry in header.items() if name != "__metadata__"]
    write("safetensors", "llama-tiny-shrunk.safetensors", safetensors(shrunk, header.get("__metadata__")))
    # One tensor of every dtype, a scalar and an empty tensor.
    every = [tensor("t." + dtype.lower(), dtype, [2, 3]) for dtype in SIZES]
    every += [tensor("scalar", "F32", []), tensor("empty", "F16", [0, 4])]
    write("safetensors", "dtypes.safetensors", safetensors(every, {"format": "pt", "note": "seed"}, pad_to=1))


# ---- config.json: the model fixtures and the real-model configs.

def config_seeds():
    for path in sorted((FIXTURES / "models").glob("*/config.json")):
        write("config", path.parent.name + ".json", path.read_bytes())
    for name in ["llama-3.2-1b.json", "phi-3-mini-4k.json", "mistral-7b-v0.1.json", "gpt2.json"]:
        write("config", name, (FIXTURES / "configs" / name).read_bytes())


# ---- tokenizer.json: a tiny byte-level BPE and a tiny SentencePiece-style BPE with byte fallback.

def tokenizer_seeds():
    byte_level_vocab = {c: i for i, c in enumerate(["h", "e", "l", "o", "Ġ", "w", "r", "d", "he", "ll", "hell",
                                                    "hello", "Ġw", "or", "Ġwor", "ld", "Ġworld", "!"])}
    byte_level = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 18, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "'s|'t| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": byte_level_vocab,
                  "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"]},
    }
    write("tokenizer", "byte-level.json", json.dumps(byte_level, indent=1, ensure_ascii=False))

    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["▁", "▁h", "el", "lo", "▁hel", "▁hello"]
    sentencepiece = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                          {"type": "Replace", "pattern": {"String": " "},
                                                           "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {p: i for i, p in enumerate(pieces)},
                  "merges": [["▁", "h"], ["e", "l"], ["l", "o"], ["▁h", "el"], ["▁hel", "lo"]]},
    }
    write("tokenizer", "sentencepiece.json", json.dumps(sentencepiece, indent=1, ensure_ascii=False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", help="a plan of llama-tiny (default: compile one with build/bin/gerbilc)")
    args = parser.parse_args()
    for target in ["plan", "safetensors", "config", "tokenizer"]:
        shutil.rmtree(CORPUS / target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as temp:
        plan = args.plan
        if plan is None:
            plan = str(pathlib.Path(temp) / "llama-tiny.plan")
            gerbilc = os.environ.get("GERBILC", str(ROOT / "build" / "bin" / "gerbilc"))
            subprocess.run([gerbilc,
                            str(FIXTURES / "models" / "llama-tiny" / "config.json"), "-o", plan,
                            "--max-seq", "16", "--prefill-chunk", "4"], check=True)
        plan_seeds(plan)
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()


if __name__ == "__main__":
    main()
