"""Writes a copy of a safetensors file with one tensor dropped or given a wrong shape (for error tests), or
with a prefix stripped from every name plus extra tensors (strip-prefix PREFIX: the spelling of hub GPT-2
checkpoints, with their attn.bias mask buffers and one tensor no plan uses)."""
import json
import struct
import sys

source, target, action, name = sys.argv[1:5]
with open(source, "rb") as f:
    header_size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(header_size))
    data = f.read()
tensors = {k: v for k, v in header.items() if k != "__metadata__"}
if action != "strip-prefix" and name not in tensors:
    sys.exit(f"{source} has no tensor {name}")
if action == "drop":
    del tensors[name]
elif action == "strip-prefix":
    tensors = {k[len(name):] if k.startswith(name) else k: v for k, v in tensors.items()}
    extra = data + bytes(16)
    for key in ("h.0.attn.bias", "h.1.attn.bias", "h.0.attn.masked_bias", "unused.extra"):
        tensors[key] = {"dtype": "F32", "shape": [2, 2], "data_offsets": [len(data), len(data) + 16]}
    data = extra
elif action == "reshape":
    shape = tensors[name]["shape"]
    tensors[name]["shape"] = [shape[0] // 2, shape[1] * 2] if len(shape) == 2 else [shape[0]]
else:
    sys.exit(f"unknown action {action}")
out_header, out_data = {}, b""
for key, entry in tensors.items():
    begin, end = entry["data_offsets"]
    chunk = data[begin:end]
    out_header[key] = {"dtype": entry["dtype"], "shape": entry["shape"],
                       "data_offsets": [len(out_data), len(out_data) + len(chunk)]}
    out_data += chunk
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
with open(target, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + out_data)
