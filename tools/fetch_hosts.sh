#!/usr/bin/env bash
# Downloads the host libraries and test programs of issue 39 from Debian at pinned versions
# (SHA-256 checked; nothing is installed) and unpacks them into OUT/<package>/ (default
# <repository>/target/hostlibs, or $SQTT_HOSTLIBS_DIR). Then, for example:
#   sqtt-patch info OUT/librccl1/usr/lib/x86_64-linux-gnu/librccl.so.1.*
#   sqtt-patch extract OUT/librocfft0/usr/lib/x86_64-linux-gnu/librocfft.so.0.* -o OUT/rocfft-objects
# librccl1 (-fgpu-rdc): 38 wrappers whose bundle pointers are R_X86_64_64 relocations against
# aliases of one 376 MB compressed bundle (docs/fatbin.md, "Pointers set by relocations").
# Also the win_amd64 wheel of PyPI's hip-quant (Windows PE DLLs and a .pyd with .hipFatB /
# .hip_fat sections, issue 39 item 8), unpacked into OUT/hip-quant-win_amd64/.
# Needs curl, dpkg-deb, pip and ~2.5 GB.
# Usage: tools/fetch_hosts.sh [OUT [PACKAGE...]]: with PACKAGEs (names of the list below), only
# those are fetched, and not the wheel (tools/draw_pictures.sh takes libmagma-sparse2-rocm, 15 MB).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-${SQTT_HOSTLIBS_DIR:-$ROOT/target/hostlibs}}
ONLY=" ${*:2} "
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$OUT/debs"
# package  pool path  SHA-256 (Debian experimental, and sid for magma, Packages indexes, 2026-12-06)
while read -r pkg path sha; do
  [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $pkg "* ]] || continue
  GOT="${GOT:-} $pkg"
  deb="$OUT/debs/$(basename "$path")"
  if [ ! -f "$deb" ] || ! echo "$sha  $deb" | sha256sum -c --quiet 2>/dev/null; then
    curl -fsS -o "$deb.part" "$MIRROR/$path"
    echo "$sha  $deb.part" | sha256sum -c --quiet
    mv "$deb.part" "$deb"
  fi
  [ -d "$OUT/$pkg" ] || dpkg-deb -x "$deb" "$OUT/$pkg"
done <<'LIST'
librccl1 pool/main/r/rccl/librccl1_7.2.4-1~exp3_amd64.deb 505da86bed73fa221b97681410dcdb25a6a4b05be9bf40023a976ba9936f060f
librocfft0 pool/main/r/rocfft/librocfft0_7.2.4-1~exp1_amd64.deb 9c19c237198365ef45a21d22bf1691b10f92776f730c0146d16ff409ca15c3a4
librocrand1 pool/main/r/rocrand/librocrand1_7.2.4-1~exp1_amd64.deb 9926865e63fa2dcb4224a7f78774ab1dc5ace888372f1e87e7f0c3ab16135258
libhiprand1-tests pool/main/h/hiprand/libhiprand1-tests_7.2.4-1~exp1_amd64.deb bb78a2143c7b956c672680eb015793eed15e1dc8c4079ba7fb87ac55eee6aacb
libmagma-sparse2-rocm pool/main/m/magma-rocm/libmagma-sparse2-rocm_2.9.0+ds-3_amd64.deb 15f741264c07bf991362e63c6428206866d215560dd55b3cb8a8fc7fdfc96009
libhsa-runtime64-tests pool/main/r/rocr-runtime/libhsa-runtime64-tests_7.2.4+dfsg-1~exp1_amd64.deb cb9258623dac91aeacc6112756ac6837614e48493fa0242f9787a67203891802
LIST
for pkg in ${*:2}; do
  [[ " ${GOT:-} " == *" $pkg "* ]] || { echo "fetch_hosts.sh: no package $pkg in the list" >&2; exit 2; }
done
[ "$ONLY" = "  " ] || exit 0
# PyPI, 2026-12-06: hip-quant 2.2.4.post215, cp312 win_amd64 wheel.
WHEEL=hip_quant-2.2.4.post215-cp312-cp312-win_amd64.whl
WHEEL_SHA=d9d6a20a940e814b34d60cd35dce01de2dc2fc59033c047834a1f3ac2c5f29f9
if [ ! -f "$OUT/wheels/$WHEEL" ] || ! echo "$WHEEL_SHA  $OUT/wheels/$WHEEL" | sha256sum -c --quiet 2>/dev/null; then
  pip download --quiet --no-deps --only-binary=:all: --platform win_amd64 --python-version 3.12 \
    hip-quant==2.2.4.post215 -d "$OUT/wheels"
  echo "$WHEEL_SHA  $OUT/wheels/$WHEEL" | sha256sum -c --quiet
fi
[ -d "$OUT/hip-quant-win_amd64" ] || python3 -m zipfile -e "$OUT/wheels/$WHEEL" "$OUT/hip-quant-win_amd64"
find "$OUT" -maxdepth 1 -mindepth 1 -type d ! -name debs ! -name wheels -printf '%f\n'
