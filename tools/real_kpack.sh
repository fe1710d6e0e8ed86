#!/usr/bin/env bash
# ROCm 7 kpack on a real library (not CI; needs pip and network access to PyPI, ~90 MB):
# the rocFFT inside the PyPI wheel vapoursynth-dfttest2-hip 11.1.0 is kpack-split (HIPK wrapper,
# SHT_NOBITS .hip_fatbin) and the wheel ships no .kpack archive. Checks that `info` describes its
# wrapper and search path, and that `--fatbin` names the archive it looked for, exits 2 and
# writes nothing. With ARCHIVES=DIR (a directory of fft_lib_gfx*.kpack from a ROCm 7 multi-arch
# install) it also instruments them through `--fatbin` and prints the timings.
# Usage: tools/real_kpack.sh [DIR]   (default: target/real/kpack inside the repository)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/target/real/kpack}
BIN=${SQTT_PATCH:-$ROOT/target/release/sqtt-patch}
mkdir -p "$DIR"
cd "$DIR"
if ! ls vapoursynth_dfttest2_hip-11.1.0-*.whl >/dev/null 2>&1; then
  pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    vapoursynth-dfttest2-hip==11.1.0 -d .
fi
[ -d x ] || unzip -q -o vapoursynth_dfttest2_hip-11.1.0-*.whl -d x
LIB=$(ls x/vapoursynth_dfttest2_hip.libs/librocfft-*.so.0.1)
fail() { echo "FAIL: $*" >&2; exit 1; }

info=$("$BIN" info "$LIB")
echo "$info"
grep -q "kpack-split (HIPK)" <<<"$info" || fail "info does not see the HIPK wrapper"
grep -q "key math-libs/rocFFT/stage/lib/librocfft.so.0.1#0" <<<"$info" || fail "lookup key"
grep -q 'search paths \["../.kpack/fft_lib_@GFXARCH@.kpack"\]' <<<"$info" || fail "search path"

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/libs"
set +e
err=$("$BIN" --fatbin "$LIB" -o "$OUT/libs/librocfft.so" --functions 1 --offload-arch gfx942 2>&1)
rc=$?
set -e
echo "$err"
[ "$rc" = 2 ] || fail "--fatbin exit $rc, expected 2"
grep -q "x/.kpack/fft_lib_gfx942.kpack (search path ../.kpack/fft_lib_@GFXARCH@.kpack, target gfx942)" <<<"$err" \
  || fail "--fatbin does not name the archive it looked for"
[ -z "$(ls -A "$OUT/libs")" ] || fail "--fatbin wrote output"

if [ -n "${ARCHIVES:-}" ]; then
  ROCM_KPACK_PATH=$(ls "$ARCHIVES"/fft_lib_gfx*.kpack | paste -sd:) \
    "$BIN" --fatbin "$LIB" -o "$OUT/libs/librocfft.so" --functions 1 --timings
  ls -l "$OUT/libs"
fi
echo "real_kpack: OK"
