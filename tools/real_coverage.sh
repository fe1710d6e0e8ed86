#!/usr/bin/env bash
# Coverage of sqtt-patch on real third-party code objects, per feature set (issue 12's table).
# Usage: tools/real_coverage.sh OUT_DIR OBJECT...
#   OBJECT: bare code objects (fetch and extract them with tools/fetch_real.sh).
# Writes OUT_DIR/<object>__<set>.json (the JSON report) and prints the table of
# tools/real_coverage.py. Env: SQTT_PATCH (default target/release/sqtt-patch), SETS (space-separated
# subset of: scopes memory trace scope clock), TIMES=1 (also time llvm-objdump-22 -d of each object
# and print time and peak memory per run beside it). Every run's "wall_s user_s sys_s peak_KiB" is
# in OUT_DIR/<object>__<set>.time, its exit status in OUT_DIR/<object>__<set>.exit.
# RESUME=1 keeps every run that finished before (its .exit file exists) and runs only the rest,
# so a long run (RCCL: nine objects of 97-196 MB under five sets) accumulates across sittings.
set -uo pipefail
out=$1; shift
bin=${SQTT_PATCH:-target/release/sqtt-patch}
sets=${SETS:-scopes memory trace scope clock}
mkdir -p "$out"
# shellcheck source=tools/feature_sets.sh
source "$(dirname "$0")/feature_sets.sh"
for obj in "$@"; do
  name=$(basename "$obj"); name=${name%.*}
  if [ "${TIMES:-0}" = 1 ] && ! { [ "${RESUME:-0}" = 1 ] && [ -s "$out/${name}__bytes" ]; }; then
    /usr/bin/time -o "$out/${name}__objdump.time" -f "%e %U %S %M" llvm-objdump-22 -d "$obj" >/dev/null
    stat -L -c %s "$obj" >"$out/${name}__bytes"
  fi
  for s in $sets; do
    if [ "${RESUME:-0}" = 1 ] && [ -s "$out/${name}__$s.exit" ]; then
      echo "$name $s (kept from an earlier run) exit=$(cat "$out/${name}__$s.exit")" >&2
      continue
    fi
    # clock packing exists on gfx12 only
    if [ "$s" = clock ] && ! "$bin" info "$obj" 2>/dev/null | grep -q 'gfx12'; then continue; fi
    # shellcheck disable=SC2046
    env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS -u SQTT_INSTRUMENT_MEMORY \
      -u SQTT_TRACE_ADDRESSES /usr/bin/time -o "$out/${name}__$s.time" -f "%e %U %S %M" "$bin" "$obj" -o "$out/$name.$s.out" $(flags_for "$s") \
      --report-json "$out/${name}__$s.json" 2>"$out/${name}__$s.err"
    rc=$?
    echo "$rc" >"$out/${name}__$s.exit"
    echo "$name $s exit=$rc" >&2
    rm -f "$out/$name.$s.out"
  done
done
python3 "$(dirname "$0")/real_coverage.py" "$out"
