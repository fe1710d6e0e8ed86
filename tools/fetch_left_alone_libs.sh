#!/usr/bin/env bash
# Downloads the real libraries of docs/left-alone.md's measurements (PyPI wheels; nothing is
# installed) and extracts their code objects into OUT/x/NAME (one directory per library).
# Usage: tools/fetch_left_alone_libs.sh [OUT]   (default target/real in this checkout; ~1.5 GB)
# Then:  target/release/sqtt-patch batch OUT/x/NAME --functions 1 --barriers 1 --report-json R
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/real}
BIN=${SQTT_PATCH:-$ROOT/target/release/sqtt-patch}
mkdir -p "$OUT/wheels" "$OUT/x"
cd "$OUT"
# name==version  path of the host library inside the wheel
while read -r spec lib; do
  name=${spec%%==*}
  if [ ! -d "wheels/$name/x" ]; then
    mkdir -p "wheels/$name"
    pip download -q --no-deps --only-binary=:all: -d "wheels/$name" "$spec"
    (cd "wheels/$name" && unzip -q -o ./*.whl -d x)
  fi
  [ -d "x/$name" ] || "$BIN" extract -o "x/$name" "wheels/$name/x/$lib"
done <<'LIST'
jax-rocm7-pjrt==0.12.0 jax_plugins/xla_rocm7/xla_rocm_plugin.so
cyllama-rocm==0.2.18 cyllama_rocm.libs/libggml-hip-f822f971.so
LIST
ls "$OUT/x"
