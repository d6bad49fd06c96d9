#!/usr/bin/env bash
# Here (the build machine, which reaches the npm registry): puts llama.cpp's Vulkan build, as released, into
# .device/llama-cpp.tar.xz for bench/device.sh to time beside gerbil. The release is the one
# ../shared/docs/device-vulkan.md measured: node-llama-cpp's prebuilt linux-x64-vulkan binaries
# (NODE_LLAMA_CPP_VERSION, default 3.22.1: llama.cpp v0.5.0), whose shared libraries llama-cpp-bench links;
# its headers come from the same package's copy of llama.cpp's sources. Nothing of llama.cpp enters the
# repository: the packages are unpacked under LLAMA_CPP_WORK (default /tmp/gerbil-llama-cpp).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${NODE_LLAMA_CPP_VERSION:-3.22.1}
work=${LLAMA_CPP_WORK:-/tmp/gerbil-llama-cpp}/$version
repo=$PWD
# Packed already for this version and this llama_cpp_bench.cpp: nothing to do.
if [ -f .device/llama-cpp.tar.xz ] && [ "$(cat .device/llama-cpp.version 2>/dev/null)" = "$version" ] &&
  [ .device/llama-cpp.tar.xz -nt bench/llama-cpp/llama_cpp_bench.cpp ]; then
  echo "llama.cpp (node-llama-cpp $version): .device/llama-cpp.tar.xz is up to date"
  exit 0
fi
mkdir -p "$work"
(
  cd "$work"
  # Each unpacked under a temporary name first, so that a failed download is not taken for a done one.
  if [ ! -d bins ]; then
    npm pack --silent "@node-llama-cpp/linux-x64-vulkan@$version" > /dev/null
    rm -rf bins.part && mkdir bins.part
    tar xzf node-llama-cpp-linux-x64-vulkan-"$version".tgz -C bins.part --strip-components=3 \
      package/bins/linux-x64-vulkan
    mv bins.part bins
  fi
  if [ ! -d src ]; then
    npm pack --silent "node-llama-cpp@$version" > /dev/null
    tar xzf node-llama-cpp-"$version".tgz package/llama/gitRelease.bundle
    rm -rf src.part && git -c advice.detachedHead=false clone -q package/llama/gitRelease.bundle src.part
    mv src.part src
  fi
)
release=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["buildOptions"]["llamaCpp"]["release"])' \
  "$work/bins/_nlcBuildMetadata.json")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/llama-cpp"
cp "$work"/bins/*.so "$stage/llama-cpp/"
libs=$(cd "$work/bins" && ls libllama.vulkan.*.so libggml.vulkan.*.so libggml-base.so)
g++ -O2 -std=c++17 -Wall -Wextra -DLLAMA_CPP_RELEASE="\"$release (node-llama-cpp $version)\"" \
  -I "$work/src/include" -I "$work/src/ggml/include" "$repo/bench/llama-cpp/llama_cpp_bench.cpp" \
  -L "$work/bins" $(for l in $libs; do echo "-l:$l"; done) -Wl,-rpath,'$ORIGIN' \
  -o "$stage/llama-cpp/llama-cpp-bench"
mkdir -p .device
tar cJf .device/llama-cpp.tar.xz -C "$stage" llama-cpp
echo "$version" > .device/llama-cpp.version
echo "llama.cpp $release (node-llama-cpp $version): .device/llama-cpp.tar.xz, $(du -h .device/llama-cpp.tar.xz | cut -f1)"
