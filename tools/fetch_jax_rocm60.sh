#!/usr/bin/env bash
# Downloads jax's ROCm 6.0 plugin wheel (jax-rocm60-plugin 0.4.35, 6.7 MB; nothing is installed),
# extracts its device code objects (gfx900..gfx942 incl. the retired gfx940/gfx941) and runs
# sqtt-patch on the gfx940/gfx941 ones: instrument (--functions 1 --barriers 1) and verify.
# Usage: tools/fetch_jax_rocm60.sh [OUT]   (default target/real/jax-rocm60; needs pip, unzip)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/real/jax-rocm60}
BIN=${SQTT_PATCH:-$ROOT/target/release/sqtt-patch}
mkdir -p "$OUT/out"
cd "$OUT"
[ -f jax_rocm60_plugin-0.4.35-*.whl ] 2>/dev/null ||
  pip download -q --no-deps --only-binary=:all: --python-version 3.11 jax-rocm60-plugin==0.4.35 -d .
[ -d x ] || unzip -q -o jax_rocm60_plugin-0.4.35-*.whl -d x
for s in _blas _linalg _solver; do
  [ -d "ex/$s" ] || "$BIN" extract -o "ex/$s" "x/jax_rocm60_plugin/$s.so"
done
objects=0 kernels=0 instrumented=0
for f in ex/*/*gfx94[01].co; do
  o=out/$(echo "$f" | tr / _)
  r=$("$BIN" "$f" -o "$o" --functions 1 --barriers 1 --report 2>&1 | head -1)
  "$BIN" verify "$f" "$o" > /dev/null
  objects=$((objects + 1))
  kernels=$((kernels + $("$BIN" info "$f" | grep -c '^  kernel')))
  case "$r" in *": instrumented;"*) instrumented=$((instrumented + 1)) ;; esac
  echo "$r"
done
echo "gfx940/gfx941: $objects objects, $kernels kernels, $instrumented objects instrumented, all verified"
