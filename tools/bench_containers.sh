#!/bin/sh
# Side-by-side listing cost of real host libraries: hsaco (release `list_containers` bench binary:
# find every bundle and code object, parse each one), optionally `sqtt-patch info --json`
# (set SQTT_PATCH=/path/to/release/sqtt-patch), and `llvm-objdump-22 --offloading` (which also
# writes every entry to disk) plus `llvm-readelf-22 --offloading` (list only), each under
# /usr/bin/time -v on the same file in the same run. Prints wall seconds, peak RSS (MiB) and the
# number of code objects each reports.
#
# Usage: tools/bench_containers.sh [FILE...]
#   default FILEs: the onnxruntime-rocm and librocsparse libraries of $SQTT_REAL_DIR
#   (default <repository>/target/real, filled by tools/fetch_real.sh).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tp=${SQTT_REAL_DIR:-$root/target/real}
if [ $# -eq 0 ]; then
  set -- "$tp/wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so" \
         "$tp/deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
fi
for f in "$@"; do
  [ -f "$f" ] || { echo "missing input $f (run tools/fetch_real.sh)" >&2; exit 1; }
done
llvm=/usr/lib/llvm-22/bin
bench=$(cd "$root" && cargo bench -p hsaco --bench list_containers --no-run --message-format=json 2>/dev/null \
  | jq -r 'select(.executable != null and .target.name == "list_containers") | .executable' | tail -n 1)
[ -x "$bench" ] || { echo "could not build the list_containers bench" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run LABEL COUNT-COMMAND -- COMMAND...: times COMMAND in $work, prints one table row.
run() {
  label=$1; file=$2; shift 2
  ( cd "$work" && /usr/bin/time -v "$@" > "$work/out" 2> "$work/time" ) || {
    echo "$label failed:" >&2; tail -n 5 "$work/time" >&2; exit 1; }
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time" \
    | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
  case $label in
    hsaco*) n=$(sed -n 's/.*, \([0-9]*\) code objects.*/\1/p' "$work/out") ;;
    sqtt-patch*) n=$(jq '.code_objects | length' "$work/out") ;;
    *) n=$(grep -c 'amdgcn-amd-amdhsa' "$work/out" || true) ;;
  esac
  printf '%-44s %-34s %8.2f %10.0f %8s\n' "$(basename "$file")" "$label" "$wall" "$((rss / 1024))" "$n"
  rm -rf "${work:?}"/*
}

printf '%-44s %-34s %8s %10s %8s\n' file tool wall_s peak_MiB objects
for f in "$@"; do
  name=$(basename "$f")
  run "hsaco list+parse (release)" "$f" "$bench" "$f"
  if [ -n "${SQTT_PATCH:-}" ]; then
    run "sqtt-patch info --json" "$f" "$SQTT_PATCH" info --json "$f"
  fi
  # llvm-objdump extracts next to the path it is given: run it on a link inside $work.
  run "llvm-objdump-22 --offloading" "$f" sh -c "ln -s '$f' '$name' && $llvm/llvm-objdump --offloading '$name'"
  run "llvm-readelf-22 --offloading" "$f" "$llvm/llvm-readelf" --offloading "$f"
done
