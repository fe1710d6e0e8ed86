#!/usr/bin/env bash
# fetch_thirdparty.sh - download real third-party binaries with AMDGPU device
# code (Debian bookworm packages + PyPI wheels), scan them, and pick the small
# curated code objects kept in objects/.
#
# Usage: fetch_thirdparty.sh [WORKDIR] [PICKDIR]
#   WORKDIR default ./target/corpus-out/thirdparty (needs ~6 GB: librocsparse0 alone
#           unpacks to 1.3 GB, onnxruntime/jax-pjrt wheels to ~1 GB)
#   (PICKDIR is unused)
# Needs: apt-get (download only, nothing installed), pip, python3 + zstandard,
#        the scanner next to this script. Internet: Debian mirror + PyPI only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
W="${1:-./target/corpus-out/thirdparty}"
PICK="${2:-$W/picked}"
PY="${PY:-python3}"
SCAN=("$PY" "$HERE/scan_device_code.py")
mkdir -p "$W/debs" "$W/deb-x" "$W/wheels" "$PICK"

# ---------------------------------------------------------------- Debian 12 (bookworm, main)
( cd "$W/debs" && apt-get download \
    librocsparse0 librocrand1 libhsa-runtime64-1 libamdhip64-5 libamd-comgr2 \
    libhipsparse0 libhiprand1 libhiprtc-builtins5 rocm-device-libs )
for d in "$W"/debs/*.deb; do dpkg-deb -x "$d" "$W/deb-x"; done

# ---------------------------------------------------------------- PyPI (pip download, no install)
# versions observed when this was written; drop ==X to get the newest
# (amd-aiter only has pre-releases: pinning the version makes pip take it)
for spec in jax-rocm7-plugin==0.10.2 jax-rocm7-pjrt==0.12.0 cupy-rocm-7-0==14.2.0 \
            onnxruntime-rocm==1.22.2.post3 amd-aiter==0.1.7.post2.dev18; do
  name="${spec%%==*}"
  mkdir -p "$W/wheels/$name"
  pip download --no-deps -d "$W/wheels/$name" "$spec"
  ( cd "$W/wheels/$name" && unzip -q -o ./*.whl -d x )
done

# ---------------------------------------------------------------- scan everything
"${SCAN[@]}" --json "$W/scan.json" "$W/deb-x/usr/lib/x86_64-linux-gnu" "$W/wheels" > "$W/scan.txt"
echo "scan summary: $W/scan.txt"

# ---------------------------------------------------------------- extracting objects
# Extract code objects with the scanner, e.g. every gfx1100 object of the onnxruntime provider:
#   python3 scan_device_code.py --extract OUT --extract-filter ' gfx1100 ' \
#       "$W/wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so"
# amd-aiter ships hand-written assembly kernels as bare files under aiter_meta/hsa/gfx94*/.
