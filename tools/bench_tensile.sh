#!/usr/bin/env bash
# Benchmark of `sqtt-patch batch` over a Tensile library directory against `llvm-objdump-22 -d` of
# the same code objects, in the same run on the same machine (issue 37; docs/performance.md).
#
# Usage: tools/bench_tensile.sh [DIR [GLOB]]
#   DIR  default: rocBLAS 7.2's library directory from tools/fetch_tensile.sh
#        (<repository>/target/tensile/librocblas5/usr/lib/x86_64-linux-gnu/rocblas/5/library)
#   GLOB default: '*gfx1201*' (the files of one target; '*' for the whole directory)
# Measured with /usr/bin/time (wall seconds, user seconds, peak RSS):
#   - `sqtt-patch batch --check --functions 1 --barriers 1 --kernel-scopes` over the files
#     (decompression of CCOB bundles, rewrite and built-in verification included);
#   - `llvm-objdump-22 -d` of every code object in them (bundles unpacked first by
#     `sqtt-patch extract`, not timed), times summed, peak = largest.
# SQTT_PATCH: the binary (default <repository>/target/release/sqtt-patch). Output: Markdown.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "${1:-$root/target/tensile/librocblas5/usr/lib/x86_64-linux-gnu/rocblas/5/library}" && pwd)
glob=${2:-*gfx1201*}
bin=${SQTT_PATCH:-$root/target/release/sqtt-patch}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/in" "$work/x"
find "$dir" -maxdepth 1 -name "$glob" \( -name '*.co' -o -name '*.hsaco' \) -exec ln -s {} "$work/in/" \;
n=$(find "$work/in" -mindepth 1 | wc -l)
[ "$n" -gt 0 ] || { echo "no code objects matching $glob in $dir" >&2; exit 2; }
for f in "$work"/in/*; do
  if head -c 4 "$f" | grep -q $'\x7fELF'; then ln -s "$(readlink -f "$f")" "$work/x/"; else
    "$bin" extract -o "$work/x/$(basename "$f").d" "$f" >/dev/null; fi
done
measure() { /usr/bin/time -f '%e %U %M' "$@" >/dev/null 2>"$work/t" || true; tail -1 "$work/t"; }
read -r sw su sm < <(measure "$bin" batch --check --functions 1 --barriers 1 --kernel-scopes "$work/in")
lw=0; lu=0; lm=0
while IFS= read -r -d '' o; do
  read -r w u m < <(measure llvm-objdump-22 -d "$o")
  lw=$(echo "$lw + $w" | bc); lu=$(echo "$lu + $u" | bc); [ "$m" -gt "$lm" ] && lm=$m
done < <(find -L "$work/x" -type f -print0)
echo "| $n files of $(basename "$dir") ($glob) | wall s | user s | peak RSS MB |"
echo "|---|---|---|---|"
echo "| llvm-objdump-22 -d (summed) | $lw | $lu | $((lm / 1024)) |"
echo "| sqtt-patch batch (fb + kernel scopes, verified) | $sw | $su | $((sm / 1024)) |"
