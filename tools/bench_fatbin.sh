#!/usr/bin/env bash
# Benchmark of `sqtt-patch --fatbin` against the baseline issue #6 names, on the same library in
# the same run: `llvm-objdump-22 --offloading LIB` (extract every code object) plus
# `llvm-objdump-22 -d` of every extracted object (sequentially). Both sides are measured with
# /usr/bin/time (wall seconds, peak RSS of the largest single process).
#
# Usage: tools/bench_fatbin.sh [LIB...]
#   default LIBs: the onnxruntime-rocm and librocsparse libraries of $SQTT_THIRDPARTY
#   (default <workspace>/../thirdparty, see /work/thirdparty/INDEX.md).
# Options via environment: SQTT_FLAGS (default "--functions 1 --barriers 1").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=${SQTT_THIRDPARTY:-$root/../thirdparty}
if [ $# -eq 0 ]; then
  set -- "$tp/wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so" \
         "$tp/deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
fi
for f in "$@"; do
  [ -f "$f" ] || { echo "missing input $f (see /work/thirdparty/INDEX.md)" >&2; exit 1; }
done
(cd "$root" && cargo build --release -q -p sqtt-patch)
bin="${CARGO_TARGET_DIR:-$root/target}/release/sqtt-patch"
objdump=/usr/lib/llvm-22/bin/llvm-objdump
flags=${SQTT_FLAGS:---functions 1 --barriers 1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure OUT COMMAND...: runs COMMAND, writes "wall_seconds peak_kib" to OUT.
measure() {
  local out=$1; shift
  /usr/bin/time -f "%e %M" -o "$out" "$@" >/dev/null 2>"$work/err" || {
    echo "failed: $*" >&2; tail -n 5 "$work/err" >&2; exit 1; }
}

echo "| library | sqtt-patch --fatbin s | peak MiB | llvm-objdump --offloading s | + -d of N objects s | N | ratio |"
echo "|---|---|---|---|---|---|---|"
for f in "$@"; do
  name=$(basename "$f")
  # shellcheck disable=SC2086
  measure "$work/t1" "$bin" --fatbin "$f" -o "$work/out.so" $flags
  read -r t1 m1 < "$work/t1"
  rm -f "$work/out.so"
  # llvm-objdump --offloading writes its entries next to the input: use a symlink in $work.
  mkdir "$work/x"
  ln -s "$f" "$work/x/lib"
  (cd "$work/x" && measure "$work/t2" "$objdump" --offloading lib)
  read -r t2 _ < "$work/t2"
  start=$(date +%s.%N)
  n=0
  for o in "$work"/x/lib.*; do
    "$objdump" -d "$o" >/dev/null 2>&1 || true
    n=$((n + 1))
  done
  t3=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  rm -rf "$work/x"
  ratio=$(python3 -c "print(f'{$t1 / ($t2 + $t3):.3f}')")
  echo "| $name | $t1 | $((m1 / 1024)) | $t2 | $t3 | $n | $ratio |"
done
