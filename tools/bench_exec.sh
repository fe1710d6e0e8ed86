#!/usr/bin/env bash
# Per-object cost of the load-time tool (sqtt-patch exec / libsqtt_patch_tool.so): the driver
# that plays ROCr (crates/sqtt-patch-tool/tests/driver/rocr_driver.cpp) loads every given code
# object from memory, three times in three processes: without the tool (baseline), with the tool
# and an empty cache (first load: hash, rewrite, verify, cache write) and with the tool and that
# cache (cached load: hash and cache read). The time is the create call's, tool included.
#
# usage: tools/bench_exec.sh [FILES...]   (default: fixtures/objects/*.co)
# env: BENCH_FLAGS (default "SQTT_INSTRUMENT_FUNCTIONS=1 SQTT_INSTRUMENT_BARRIERS=1")
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p sqtt-patch-tool
tool="$(realpath "$target/release/libsqtt_patch_tool.so")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
c++ -std=c++17 -O1 -DAMD_INTERNAL_BUILD crates/sqtt-patch-tool/tests/driver/rocr_driver.cpp \
  -o "$work/driver" -ldl -pthread
if [ $# -eq 0 ]; then set -- fixtures/objects/*.co; fi
loads=()
bytes=0
for f in "$@"; do
  loads+=("mem:$(realpath "$f")")
  bytes=$((bytes + $(stat -Lc %s "$f")))
done
flags="${BENCH_FLAGS:-SQTT_INSTRUMENT_FUNCTIONS=1 SQTT_INSTRUMENT_BARRIERS=1}"
run() { # NAME EXTRA-DRIVER-FLAGS...
  local name=$1; shift
  mkdir -p "$work/$name"
  # shellcheck disable=SC2086
  env $flags SQTT_PATCH_CACHE="$work/cache" "$work/driver" "$tool" "$work/$name" "$@" "${loads[@]}" \
    > "$work/$name.out" 2> "$work/$name.err"
  grep -o 'sqtt-patch-tool: .*' "$work/$name.err" | sed "s/^/  $name: /" || true
  grep '^LOAD' "$work/$name.out" | sed 's/.*us=//' | sort -n > "$work/$name.us"
}
run baseline --no-tool
run first
run cached
echo "objects: $# ($((bytes / 1024)) KiB), flags: $flags"
printf '%-9s %10s %10s %10s %10s\n' run "total s" "mean ms" "median ms" "max ms"
for name in baseline first cached; do
  awk -v n="$name" '{ a[NR] = $1; s += $1 } END {
    printf "%-9s %10.3f %10.3f %10.3f %10.3f\n", n, s / 1e6, s / NR / 1e3, a[int((NR + 1) / 2)] / 1e3, a[NR] / 1e3 }' \
    "$work/$name.us"
done
