#!/usr/bin/env bash
# Downloads the real third-party libraries of docs/registers.md (PyPI wheels and Debian packages;
# nothing is installed) and extracts the 17 code objects of the coverage table into OUT/objects.
# Usage: tools/fetch_real.sh [OUT]   (default /work/thirdparty; needs ~5 GB, pip, apt-get, unzip)
# Then: tools/real_coverage.sh /tmp/cov OUT/objects/*.co
set -euo pipefail
OUT=${1:-/work/thirdparty}
BIN=${SQTT_PATCH:-$(cd "$(dirname "$0")/.." && pwd)/target/release/sqtt-patch}
SHARED=$(cd "$(dirname "$0")/../.." && pwd)/shared
mkdir -p "$OUT/wheels" "$OUT/debs" "$OUT/deb-x" "$OUT/x" "$OUT/objects"
cd "$OUT"
for spec in cupy-rocm-7-0==14.2.0 jax-rocm7-pjrt==0.12.0 onnxruntime-rocm==1.22.2.post3 \
            amd-aiter==0.1.7.post2.dev18; do
  name=${spec%%==*}
  mkdir -p "wheels/$name"
  [ -d "wheels/$name/x" ] && continue
  pip download -q --no-deps -d "wheels/$name" "$spec"
  (cd "wheels/$name" && unzip -q -o ./*.whl -d x)
done
(cd debs && apt-get download librocsparse0)
for d in debs/*.deb; do dpkg-deb -x "$d" deb-x; done
"$BIN" extract -o x/cub wheels/cupy-rocm-7-0/x/cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so
"$BIN" extract -o x/xla wheels/jax-rocm7-pjrt/x/jax_plugins/xla_rocm7/xla_rocm_plugin.so
"$BIN" extract -o x/ort wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so
"$BIN" extract -o x/rocsparse deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1
A=wheels/amd-aiter/x/aiter_meta/hsa
link() { ln -sf "$OUT/$1" "objects/$2.co"; }
link x/cub/0-hipv4-amdgcn-amd-amdhsa--gfx942.co cub-gfx942
link x/cub/0-hipv4-amdgcn-amd-amdhsa--gfx1201.co cub-gfx1201
for n in 5 23; do
  link "x/xla/$n-hipv4-amdgcn-amd-amdhsa--gfx1250.co" "xla$n-gfx1250"
  link "x/xla/$n-hipv4-amdgcn-amd-amdhsa--gfx942.co" "xla$n-gfx942"
done
for t in gfx908 gfx1100 gfx1201; do link "x/ort/8-hipv4-amdgcn-amd-amdhsa--$t.co" "ort8-$t"; done
link x/ort/93-hipv4-amdgcn-amd-amdhsa--gfx1100.co ort93-gfx1100
link "x/rocsparse/44-hipv4-amdgcn-amd-amdhsa--gfx90a_xnack-.co" rocsparse44-gfx90a
link "$A/gfx942/pa/pa_bf16_pertokenInt8_gqa16_1tg_4w_mtp_msk1.co" aiter-pa-gfx942
link "$A/gfx950/pa/pa_bf16_pertokenInt8_gqa16_1tg_4w_mtp_msk1.co" aiter-pa-gfx950
link "$A/gfx942/fmha_v3_fwd/MI308/fwd_hd128_bf16_causal_rtz_group.co" aiter-fmha-gfx942
link "$A/gfx942/i8gemm/I8gemm_bf16_perTokenI8_BpreShuffle_192x128.co" aiter-gemm-gfx942
ln -sf "$SHARED/corpus/triton/gfx942__triton-3.9.0__matmul.hsaco" objects/triton-matmul-gfx942.co
ln -sf "$SHARED/corpus/triton/gfx1200__triton-3.9.0__matmul.hsaco" objects/triton-matmul-gfx1200.co
ls -l objects
