"""Reads the f32, f16 and bf16 checkpoints gerbil-random-weights made with one seed and checks that they hold
the same values: bf16 is the top half of each f32, f16 its nearest half. Prints one line per check."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


f32, f16, bf16 = (tensors(p) for p in sys.argv[1:4])
assert f32.keys() == f16.keys() == bf16.keys(), "the three files name different tensors"
count = 0
for name, (dtype, shape, raw) in f32.items():
    floats = struct.unpack(f"<{len(raw) // 4}f", raw)
    halfs = struct.unpack(f"<{len(raw) // 4}e", f16[name][2])
    tops = struct.unpack(f"<{len(raw) // 4}H", bf16[name][2])
    bits = struct.unpack(f"<{len(raw) // 4}I", raw)
    assert all(t == b >> 16 for t, b in zip(tops, bits)), f"{name}: bf16 is not the top half of f32"
    assert all(abs(h - v) <= abs(v) * 2 ** -11 + 2 ** -25 for h, v in zip(halfs, floats)), f"{name}: f16 off"
    assert len(set(floats)) > len(floats) // 2, f"{name}: values repeat"
    count += len(floats)
print(f"{len(f32)} tensors, {count} values: f16 and bf16 agree with f32")
