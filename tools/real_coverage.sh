#!/usr/bin/env bash
# Coverage of sqtt-patch on real third-party code objects, per feature set (issue 12's table).
# Usage: tools/real_coverage.sh OUT_DIR OBJECT...
#   OBJECT: bare code objects (fetch and extract them with tools/fetch_real.sh).
# Writes OUT_DIR/<object>__<set>.json (the JSON report) and prints the table of
# tools/real_coverage.py. Env: SQTT_PATCH (default target/release/sqtt-patch), SETS (space-separated
# subset of: scopes memory trace scope clock).
set -uo pipefail
out=$1; shift
bin=${SQTT_PATCH:-target/release/sqtt-patch}
sets=${SETS:-scopes memory trace scope clock}
mkdir -p "$out"
flags_for() {
  case $1 in
    scopes) echo "--functions 1 --barriers 1 --kernel-scopes" ;;
    memory) echo "--memory 2:5" ;;
    trace) echo "--trace-addresses memory,lds" ;;
    scope) echo "--functions 1 --barriers 1 --kernel-scopes --scope" ;;
    clock) echo "--functions 1 --barriers 1 --kernel-scopes --shader-clock-bits 12" ;;
  esac
}
for obj in "$@"; do
  name=$(basename "$obj"); name=${name%.*}
  for s in $sets; do
    # clock packing exists on gfx12 only
    if [ "$s" = clock ] && ! "$bin" info "$obj" 2>/dev/null | grep -q 'gfx12'; then continue; fi
    # shellcheck disable=SC2046
    env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS -u SQTT_INSTRUMENT_MEMORY \
      -u SQTT_TRACE_ADDRESSES "$bin" "$obj" -o "$out/$name.$s.out" $(flags_for "$s") \
      --report-json "$out/${name}__$s.json" 2>"$out/${name}__$s.err"
    echo "$name $s exit=$?" >&2
    rm -f "$out/$name.$s.out"
  done
done
python3 "$(dirname "$0")/real_coverage.py" "$out"
