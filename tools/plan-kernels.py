#!/usr/bin/env python3
"""Writes the SPIR-V of every kernel of a gerbil plan to DIR/NAME.spv, for tools the build does not use:
spirv-val or spirv-dis of a newer SPIRV-Tools (Debian 12's cannot read the KHR cooperative matrices of
`gerbilc --target khr`), spirv-cross, a driver's offline compiler.

Usage: tools/plan-kernels.py PLAN DIR [--only SUBSTRING]
Reads the plan format of docs/plan-format.md (header, manifest, blob); gerbil-exec checks the rest.
"""
import argparse
import json
import pathlib
import struct
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("dir")
    parser.add_argument("--only", default="", help="only kernels whose name contains this")
    args = parser.parse_args()
    data = pathlib.Path(args.plan).read_bytes()
    if len(data) < 32 or data[:8] != b"GERBPLAN":
        sys.exit(f"plan-kernels: {args.plan}: not a gerbil plan")
    manifest_bytes, blob_bytes = struct.unpack_from("<QQ", data, 16)
    if 32 + manifest_bytes + blob_bytes > len(data):
        sys.exit(f"plan-kernels: {args.plan}: truncated")
    manifest = json.loads(data[32:32 + manifest_bytes])
    blob = data[32 + manifest_bytes:32 + manifest_bytes + blob_bytes]
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    for kernel in manifest["kernels"]:
        if args.only not in kernel["name"]:
            continue
        first, words = kernel["spirvOffset"] * 4, kernel["spirvWords"] * 4
        if first + words > len(blob):
            sys.exit(f"plan-kernels: {args.plan}: kernel {kernel['name']} lies past the blob")
        (out / (kernel["name"] + ".spv")).write_bytes(blob[first:first + words])
        print(out / (kernel["name"] + ".spv"))


if __name__ == "__main__":
    main()
