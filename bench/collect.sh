#!/usr/bin/env bash
# Here (the build machine), after bash bench/device.sh ran on the GPU machine: puts its results.tgz in place.
# The raw results go to bench/results/DATE-COMMIT/, and the BENCHMARKS.md that the GPU machine wrote (with the
# new dated section first) replaces this one. usage: bench/collect.sh RESULTS.tgz
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: bench/collect.sh RESULTS.tgz" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$1" -C "$tmp"
date=$(head -c 10 "$tmp/machine.txt")
dest=bench/results/$date-$(cat .device/commit 2>/dev/null || git rev-parse --short HEAD)
mkdir -p "$dest"
for f in "$tmp"/*.json "$tmp"/*.txt "$tmp"/*.err; do [ -f "$f" ] && cp "$f" "$dest/"; done
[ -f "$tmp/BENCHMARKS.md" ] && cp "$tmp/BENCHMARKS.md" BENCHMARKS.md
echo "bench/collect.sh: results in $dest; BENCHMARKS.md updated"
