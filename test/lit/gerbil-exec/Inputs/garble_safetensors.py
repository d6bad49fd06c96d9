"""Writes a broken copy of a safetensors file, for error tests.
usage: garble_safetensors.py SOURCE TARGET MODE
  huge-header   the header length claims 2^40 bytes
  long-header   the header length claims more bytes than the file has
  past-end      the first tensor's data_offsets reach past the end of the data
  overlap       the second tensor's data_offsets are the first one's (same byte count, shared bytes)
"""
import json
import struct
import sys

source, target, mode = sys.argv[1:4]
with open(source, "rb") as f:
    header_size = struct.unpack("<Q", f.read(8))[0]
    header_bytes = f.read(header_size)
    data = f.read()
header = json.loads(header_bytes)
names = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
if mode == "huge-header":
    out = struct.pack("<Q", 1 << 40) + header_bytes + data
elif mode == "long-header":
    out = struct.pack("<Q", header_size + len(data) + 1) + header_bytes + data
else:
    first, second = header[names[0]], header[names[1]]
    if mode == "past-end":
        begin, end = first["data_offsets"]
        first["data_offsets"] = [len(data) - (end - begin) + 4, len(data) + 4]
    elif mode == "overlap":
        # Same dtype and element count, so the byte count is right; only the bytes are shared.
        second["dtype"], second["shape"] = first["dtype"], first["shape"]
        second["data_offsets"] = list(first["data_offsets"])
    else:
        sys.exit("unknown mode " + mode)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    out = struct.pack("<Q", len(text)) + text + data
with open(target, "wb") as f:
    f.write(out)
