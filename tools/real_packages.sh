#!/usr/bin/env bash
# Issue 39's package run, end to end: fetches Debian's ROCm 7 packages at pinned versions
# (tools/fetch_hosts.sh, SHA-256 checked), collects every gfx9+ code object in them (bare
# `.co`/`.hsaco` files as shipped; the objects embedded in host libraries and programs through
# `sqtt-patch extract`), and runs each object through the five feature sets with
# tools/real_coverage.sh: one coverage table per package, with skips counted per named reason.
#
# Usage: tools/real_packages.sh [OUT [PACKAGE...]]
#   OUT      default <repository>/target/packages (inputs in OUT/hostlibs, objects in
#            OUT/objects/<package>, reports in OUT/reports/<package>, tables OUT/<package>.md)
#   PACKAGE  default: librocfft0 librocrand1 libhiprand1-tests libmagma-sparse2-rocm
#            libhsa-runtime64-tests (librccl1, 376 MB compressed, only when named)
# Env: SQTT_PATCH (default <repository>/target/release/sqtt-patch), SETS, TIMES (see
# real_coverage.sh), RESUME=1 (keep the objects extracted and the runs finished before: only the
# missing runs are made).
# Exit 1 when an object was lost (a feature set exited non-zero on a gfx9+ object).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/target/packages}" && cd "${1:-$root/target/packages}" && pwd)
shift || true
pkgs=${*:-librocfft0 librocrand1 libhiprand1-tests libmagma-sparse2-rocm libhsa-runtime64-tests}
bin=${SQTT_PATCH:-$root/target/release/sqtt-patch}
[ -x "$bin" ] || { echo "real_packages.sh: no $bin (cargo build --release -p sqtt-patch)" >&2; exit 2; }
# shellcheck disable=SC2086
bash "$root/tools/fetch_hosts.sh" "$out/hostlibs" $pkgs >/dev/null
lost=0
for pkg in $pkgs; do
  objs="$out/objects/$pkg"
  rep="$out/reports/$pkg"
  if [ "${RESUME:-0}" = 1 ] && [ -f "$objs.done" ]; then
    echo "== $pkg: objects kept from an earlier run" >&2
  else
    rm -rf "$objs" "$objs.done" "$rep" && mkdir -p "$objs"
    # Host ELF files with offload bundles, and bare code objects, anywhere in the package.
    while IFS= read -r -d '' f; do
      if [[ "$f" == *.co || "$f" == *.hsaco ]]; then
        cp "$f" "$objs/$(basename "$(dirname "$f")")+$(basename "$f")"
      elif head -c 4 "$f" | grep -q $'\x7fELF' && "$bin" info "$f" >/dev/null 2>&1; then
        "$bin" extract -o "$objs/$(basename "$f").d" "$f" >/dev/null 2>&1 || true
      fi
    done < <(find "$out/hostlibs/$pkg" -type f -print0)
    # gfx9 and later only (gfx8 is outside the tool's targets); one flat directory.
    find "$objs" -mindepth 2 -type f -name '*.co' -print0 | while IFS= read -r -d '' o; do
      mv "$o" "$objs/$(basename "$(dirname "$o")" .d)+$(basename "$o")"
    done
    find "$objs" -mindepth 1 -type d -exec rm -rf {} +
    for o in "$objs"/*; do
      t=$("$bin" info "$o" 2>/dev/null | grep -o 'gfx[0-9a-f]*' | head -1 || true)
      case $t in gfx9* | gfx1[0-9]*) ;; *) rm -f "$o" ;; esac
    done
    touch "$objs.done"
  fi
  n=$(find "$objs" -type f | wc -l)
  echo "== $pkg: $n gfx9+ code objects" >&2
  [ "$n" -gt 0 ] || continue
  SQTT_PATCH=$bin bash "$root/tools/real_coverage.sh" "$rep" "$objs"/* >"$out/$pkg.md" 2>"$out/$pkg.log"
  if grep -v 'exit=0$' "$out/$pkg.log" | grep -q 'exit='; then
    echo "== $pkg: objects lost:" >&2
    grep -v 'exit=0$' "$out/$pkg.log" | grep 'exit=' >&2
    lost=1
  fi
  grep '^| \*\*all' "$out/$pkg.md" >&2 || true
done
exit $lost
