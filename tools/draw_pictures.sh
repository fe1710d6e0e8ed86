#!/usr/bin/env bash
# Draws the README's pictures, docs/flamegraph.png and docs/timeline.png: builds sqtt-patch,
# instruments one code object with --functions 1 --kernel-scopes, writes a synthetic capture of
# one kernel (tools/trace_demo.py: one control-flow path through the instrumented code, calls
# followed; not a GPU run), draws the flame graph and the per-wave timeline as SVG and takes the
# PNGs with headless Chromium at 900 pixels, each as tall as its SVG.
#
# Default (the README's pictures): MAGMA's sparse library from Debian (libmagma-sparse2-rocm
# 2.9.0+ds-3, fetched by tools/fetch_hosts.sh into target/hostlibs at its pinned SHA-256, 15 MB,
# or $SQTT_HOSTLIBS_DIR), code object 202 of libmagma_sparse.so.2.9 for gfx90a (sampleselect,
# built with -g; SHA-256 checked below), kernel magma_sampleselect::build_searchtree: it calls
# the device function bitonic_sort, and both hold DWARF inlined scopes nested 3 deep.
# --fixture: fixtures/objects/gfx942__calls__O3-g.co, kernel k_call_chain (device functions
# called in chains of depth 3, the fx.h helpers inlined), nothing downloaded.
#
# Needs cargo, python3, llvm-objcopy-22 and chromium on PATH (and curl, dpkg-deb without
# --fixture). Everything but the two PNGs (and the fetched package) is written to a temporary
# directory, removed at the end.
# Usage: tools/draw_pictures.sh [--fixture] [OUT_DIR]   (default OUT_DIR: docs/ of this repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=magma
if [ "${1:-}" = --fixture ]; then
    mode=fixture
    shift
fi
out=${1:-$root/docs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet -p sqtt-patch --manifest-path "$root/Cargo.toml"
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export SQTT_PATCH=$target/release/sqtt-patch
cd "$work"
if [ "$mode" = fixture ]; then
    in=$root/fixtures/objects/gfx942__calls__O3-g.co
    kernel=k_call_chain
    title="calls fixture, gfx942: k_call_chain (synthetic capture)"
else
    hostlibs=${SQTT_HOSTLIBS_DIR:-$root/target/hostlibs}
    bash "$root/tools/fetch_hosts.sh" "$hostlibs" libmagma-sparse2-rocm
    "$SQTT_PATCH" extract -o objects \
        "$hostlibs/libmagma-sparse2-rocm/usr/lib/x86_64-linux-gnu/libmagma_sparse.so.2.9" >/dev/null
    in=objects/202-hipv4-amdgcn-amd-amdhsa--gfx90a.co
    echo "8812f9038a6c18575977af45ccb170ba46818f7336dd7b00ad2feb9be0c484b6  $in" | sha256sum -c --quiet
    kernel=_ZN18magma_sampleselect16build_searchtreeEPKdPdi
    title="MAGMA 2.9.0 sparse, gfx90a: build_searchtree (synthetic capture)"
fi
"$SQTT_PATCH" "$in" -o instr.co --functions 1 --kernel-scopes
python3 "$root/tools/trace_demo.py" instr.co capture "$kernel"
"$SQTT_PATCH" flamegraph capture -o flamegraph.svg --demangle --title "$title, cycles"
"$SQTT_PATCH" timeline capture -o timeline.svg --demangle --cu 0 --wave 0 --max-waves 12 \
    --width 900 --title "$title"
for pic in flamegraph timeline; do
    height=$(grep -o -m1 ' height="[0-9]*"' "$pic.svg" | tr -dc 0-9)
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="900,$height" \
        --screenshot="$work/$pic.png" "file://$work/$pic.svg" 2>/dev/null
    cp "$work/$pic.png" "$out/$pic.png"
    echo "$out/$pic.png: 900 x $height"
done
