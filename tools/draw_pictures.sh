#!/usr/bin/env bash
# Draws the README's pictures, docs/flamegraph.png and docs/timeline.png, from a fresh clone:
# builds sqtt-patch, instruments fixtures/objects/gfx942__calls__O3-g.co (device functions
# called in chains of depth 3 and the fx.h helpers inlined, seen as DWARF inlined scopes) with
# --functions 1 --kernel-scopes, writes a synthetic capture of it (tools/trace_demo.py), draws the
# flame graph and the per-wave timeline as SVG and takes the PNGs with headless Chromium at
# 900 pixels, each as tall as its SVG. Needs cargo, python3, llvm-objcopy-22 and chromium on PATH.
# Everything but the two PNGs is written to a temporary directory, removed at the end.
# Usage: tools/draw_pictures.sh [OUT_DIR]   (default: docs/ of this repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet -p sqtt-patch --manifest-path "$root/Cargo.toml"
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export SQTT_PATCH=$target/release/sqtt-patch
cd "$work"
"$SQTT_PATCH" "$root/fixtures/objects/gfx942__calls__O3-g.co" -o calls.co --functions 1 --kernel-scopes
python3 "$root/tools/trace_demo.py" calls.co calls_capture
"$SQTT_PATCH" flamegraph calls_capture -o flamegraph.svg --demangle
"$SQTT_PATCH" timeline calls_capture -o timeline.svg --demangle --cu 0 --wave 0 --max-waves 12 --width 900
for pic in flamegraph timeline; do
    height=$(grep -o -m1 ' height="[0-9]*"' "$pic.svg" | tr -dc 0-9)
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="900,$height" \
        --screenshot="$work/$pic.png" "file://$work/$pic.svg" 2>/dev/null
    cp "$work/$pic.png" "$out/$pic.png"
    echo "$out/$pic.png: 900 x $height"
done
