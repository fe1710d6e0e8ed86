#!/usr/bin/env bash
# Benchmark: sqtt-patch (decode, analyse, instrument, lay out, write AND verify) against
# llvm-objdump-22 -d (disassembly only) on the same code objects, in the same run.
# Usage: tools/bench.sh [OBJECT...]   (default: the biggest objects in /work/thirdparty/objects,
#        else the biggest fixtures). Needs /usr/bin/time and LLVM 22. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p sqtt-patch
BIN="$TARGET_DIR/release/sqtt-patch"
OBJDUMP=/usr/lib/llvm-22/bin/llvm-objdump
if [ $# -gt 0 ]; then
  FILES=("$@")
elif compgen -G "/work/thirdparty/objects/*.co" >/dev/null; then
  mapfile -t FILES < <(ls -S /work/thirdparty/objects/*.co)
else
  mapfile -t FILES < <(ls -S fixtures/objects/*.co | head -3)
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
measure() { # prints "seconds kilobytes"
  /usr/bin/time -f "%e %M" -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; }
  cat "$TMP/t"
}
echo "| object | bytes | instructions | sqtt-patch instrument+verify s | RSS MB | llvm-objdump -d s | RSS MB | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for f in "${FILES[@]}"; do
  n=$("$OBJDUMP" -d "$f" | grep -c '^\s' || true)
  read -r ts ms < <(measure "$BIN" "$f" -o "$TMP/out.co" --functions 1 --barriers 1)
  read -r tl ml < <(measure "$OBJDUMP" -d "$f")
  ratio=$(python3 -c "print(f'{$ts/$tl:.3f}' if $tl > 0 else 'n/a')")
  echo "| $(basename "$f") | $(stat -c %s "$f") | $n | $ts | $((ms / 1024)) | $tl | $((ml / 1024)) | $ratio |"
done
