#!/usr/bin/env bash
# Installs what sqtt-patch's tests need on a fresh Debian 12 machine (run as root, or with sudo
# available): LLVM 22 as the test oracle (llvm-objdump-22, llvm-mc-22, llvm-readelf-22,
# llvm-dwarfdump-22, clang-offload-bundler-22) and the reference `zstd` (oracle of the kpack
# tests), AMD's HSA runtime headers (libhsa-runtime-dev: hsa/hsa_api_trace.h, against which the
# tools library's tests compile a driver that plays ROCr) and a C++ compiler for that driver. The
# tool itself needs none of it at run time.
set -euo pipefail
if [ -x /usr/lib/llvm-22/bin/llvm-objdump ] && [ -x /usr/lib/llvm-22/bin/clang-offload-bundler ] \
  && command -v zstd >/dev/null && [ -f /usr/include/hsa/hsa_api_trace.h ] \
  && command -v c++ >/dev/null && command -v python3 >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq llvm-22 clang-22 lld-22 llvm-22-dev zstd \
  libhsa-runtime-dev g++ python3 >/dev/null
