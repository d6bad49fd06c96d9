#!/usr/bin/env python3
"""Reads a GGUF file back for gguf-random.test, independently of the writer: prints its version, its
key-value pairs and its tensors (name, type, dims innermost first), and fails if a tensor's data is not
aligned or the file's size is not where the last tensor's data ends."""
import struct
import sys

TYPES = {0: "f32", 1: "f16"}
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def main(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal pos
        n = take("<Q")
        text = data[pos:pos + n].decode()
        pos += n
        return text

    def value(kind):
        if kind == 8:
            return string()
        if kind == 9:
            inner, n = take("<I"), take("<Q")
            return [value(inner) for _ in range(n)]
        return take(SCALARS[kind])

    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not GGUF")
    pos = 4
    version, tensors, pairs = take("<I"), take("<Q"), take("<Q")
    print(f"version {version}, {tensors} tensors, {pairs} keys")
    alignment = 32
    for _ in range(pairs):
        key = string()
        v = value(take("<I"))
        alignment = v if key == "general.alignment" else alignment
        print(f"{key} = {v}")
    infos = []
    for _ in range(tensors):
        name = string()
        dims = [take("<Q") for _ in range(take("<I"))]
        kind, offset = take("<I"), take("<Q")
        infos.append((name, dims, kind, offset))
    start = pos + (alignment - pos % alignment) % alignment
    end = start
    for name, dims, kind, offset in infos:
        count = 1
        for d in dims:
            count *= d
        size = count * (2 if kind == 1 else 4)
        if offset % alignment or start + offset + size > len(data):
            sys.exit(f"{path}: tensor {name} at {offset} ({size} bytes) is misaligned or past the end")
        end = max(end, start + offset + size)
        print(f"{name} {TYPES.get(kind, kind)} {tuple(dims)}")
    if len(data) - end >= alignment:
        sys.exit(f"{path}: {len(data) - end} bytes after the last tensor")
    print("data ends at the file's end")


main(sys.argv[1])
