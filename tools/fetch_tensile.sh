#!/usr/bin/env bash
# Downloads the Tensile GEMM libraries of issue 37 from Debian at pinned versions (SHA-256 checked;
# nothing is installed) and unpacks them into OUT/<package>/ (default <repository>/target/tensile,
# or $SQTT_TENSILE_DIR). Then, for example, one batch per library directory:
#   sqtt-patch batch OUT/librocblas4/usr/lib/x86_64-linux-gnu/rocblas/6.4.4/library \
#       -o /tmp/rocblas-instr --functions 1 --barriers 1 --kernel-scopes 1
#   tools/tensile_coverage.sh OUT     (every code object, every feature set, counted with llvm-objdump-22)
# Needs curl, dpkg-deb and ~3 GB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-${SQTT_TENSILE_DIR:-$ROOT/target/tensile}}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$OUT/debs"
# package  pool path  SHA-256 (Debian sid / experimental Packages indexes, 2026-12-06)
while read -r pkg path sha; do
  deb="$OUT/debs/$(basename "$path")"
  if [ ! -f "$deb" ] || ! echo "$sha  $deb" | sha256sum -c --quiet 2>/dev/null; then
    curl -fsS -o "$deb.part" "$MIRROR/$path"
    echo "$sha  $deb.part" | sha256sum -c --quiet
    mv "$deb.part" "$deb"
  fi
  [ -d "$OUT/$pkg" ] || dpkg-deb -x "$deb" "$OUT/$pkg"
done <<'LIST'
librocblas4 pool/main/r/rocblas/librocblas4_6.4.4-4_amd64.deb 05613a07d3fba2feaa8b81a86a22bc142dd4fb6630c44c416883a33bf22a1cdb
librocblas5 pool/main/r/rocblas/librocblas5_7.2.4-1~exp1_amd64.deb d7b0bdb3ca744edc42894c0774c0f4d2341acb42190808dc49251c0d1319b685
libhipblaslt1 pool/main/h/hipblaslt/libhipblaslt1_7.1.1+dfsg-4_amd64.deb 05159cd3ce6c5c3914c46a1cafd2be4d288b9ae5e7cda87de1beaff3c0c00542
LIST
find "$OUT" -maxdepth 1 -mindepth 1 -type d ! -name debs -printf '%f\n'
