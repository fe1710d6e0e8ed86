#!/usr/bin/env bash
# Issue 37's run: every code object of Debian's rocBLAS 6.4, rocBLAS 7.2 and hipBLASLt 7.1 Tensile
# library directories (fetched at pinned SHA-256s by tools/fetch_tensile.sh) through
# `sqtt-patch batch --check` per feature set, then counted independently with LLVM's tools
# (tools/tensile_coverage.py: kernels from `.kd` symbols, barriers and VMEM operations from
# llvm-objdump-22 -d of the input).
# Usage: tools/real_tensile.sh [OUT [SET...]]
#   OUT  default <repository>/target/tensile-run; writes OUT/<package>__<set>.{json,log,md}
#   SET  scopes memory scope clock trace (default: scopes memory scope clock; trace takes hours)
# Env: SQTT_PATCH (binary, default target/release/sqtt-patch), SQTT_TENSILE_DIR (inputs),
# PACKAGES (default: librocblas4 librocblas5 libhipblaslt1).
# Exits 1 if any code object was not instrumented. Resumes: a set whose batch finished is only
# counted again (the per-object counts are cached in OUT/counts).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/tensile-run}
shift || true
SETS=${*:-scopes memory scope clock}
IN=${SQTT_TENSILE_DIR:-$ROOT/target/tensile}
BIN=${SQTT_PATCH:-$ROOT/target/release/sqtt-patch}
export SQTT_PATCH=$BIN
bash "$ROOT/tools/fetch_tensile.sh" "$IN" >/dev/null || exit 1
mkdir -p "$OUT/counts"
# shellcheck source=tools/feature_sets.sh
source "$(dirname "$0")/feature_sets.sh"
run_batch() { # run_batch LIBDIR SET BASE: the batch of one set, report BASE.json, log BASE.log
  # shellcheck disable=SC2046
  env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS -u SQTT_INSTRUMENT_MEMORY \
    -u SQTT_TRACE_ADDRESSES /usr/bin/time -f "time: %e s wall, %U s user, %S s sys, %M KiB peak" \
    "$BIN" batch "$1" --check $(flags_for "$2") --report-json "$3.json" >"$3.log" 2>&1
}
for s in $SETS; do flags_for "$s" >/dev/null || exit 2; done
status=0
for pkg in ${PACKAGES:-librocblas4 librocblas5 libhipblaslt1}; do
  lib=$(find "$IN/$pkg" -type d -name library | head -1)
  [ -n "$lib" ] || { echo "$pkg: no library directory under $IN/$pkg" >&2; exit 1; }
  for s in $SETS; do
    base="$OUT/${pkg}__$s"
    # A finished batch (its log ends with the time line) is not run again: delete it to redo.
    tail -1 "$base.log" 2>/dev/null | grep -q '^time: ' || run_batch "$lib" "$s" "$base"
    echo "$pkg $s: batch ($(tail -1 "$base.log"))"
    python3 "$ROOT/tools/tensile_coverage.py" --cache "$OUT/counts" "$base.json" "$lib" >"$base.md"
    rc=$?
    [ $rc -eq 0 ] || status=1
    echo "$pkg $s: coverage exit $rc"
    grep '^| all ' "$base.md"
  done
done
exit $status
