#!/usr/bin/env bash
# Installs gerbil's build and test dependencies from Debian 12 packages, then configures and builds.
# Usage: tools/bootstrap.sh [BUILD_DIR]   (default: build). Runs apt-get through sudo unless already root.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

packages=(
  build-essential cmake ninja-build pkg-config python3 git
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools      # MLIR 19, TableGen, FileCheck, lit
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers   # Vulkan loader and headers, lavapipe, validation
  libshaderc-dev glslc glslang-dev glslang-tools spirv-tools spirv-headers  # GLSL -> SPIR-V, validation
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libxxhash-dev            # arch specs, JSON, CLI, checksums
  libpcre2-dev libutf8proc-dev                                # tokenizer regexes and Unicode normalisation
  libgtest-dev                                                # unit tests
  clang-19 libclang-rt-19-dev                                 # fuzzers (tools/fuzz.sh: libFuzzer, sanitizers)
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${packages[@]}"

cmake -G Ninja -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$(nproc)"
