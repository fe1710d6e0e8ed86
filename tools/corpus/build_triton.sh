#!/usr/bin/env bash
# build_triton.sh - compile Triton kernels to AMDGPU hsaco with the PyPI
# `triton` wheel's AMD backend, no GPU needed (bundled LLVM + lld).
# Usage: build_triton.sh [OUTDIR] [VENV]   (defaults ./target/corpus-out/triton, ./target/corpus-out/venv-triton)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-./target/corpus-out/triton}"
VENV="${2:-./target/corpus-out/venv-triton}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -c 'import triton' 2>/dev/null || "$VENV/bin/pip" install -q --no-deps 'triton==3.9.0'
TRITON_CACHE_DIR="$OUT/.cache" TRITON_DEFAULT_FP_FUSION=1 \
  "$VENV/bin/python" "$HERE/../../fixtures/corpus/src/triton_kernels.py" "$OUT" gfx90a gfx942 gfx950 gfx1100 gfx1200 gfx1250
rm -rf "$OUT/.cache"
