#!/usr/bin/env bash
# Downloads real third-party libraries (PyPI wheels and Debian packages; nothing is installed),
# extracts every embedded code object of the ones listed below into OUT/x/<library>/, and links
# the code objects of the coverage table of docs/registers.md into OUT/objects.
#
# Usage: tools/fetch_real.sh [OUT]
#   OUT: the first argument, else $SQTT_REAL_DIR, else <repository>/target/real (inside the
#   repository's build directory, never committed). Needs pip, apt-get, unzip and ~3 GB.
#   SQTT_PATCH: the sqtt-patch binary (default <repository>/target/release/sqtt-patch).
# Then, for example:
#   sqtt-patch batch --check --functions 1 --barriers 1 OUT/x
#   sqtt-patch batch --check --trace-addresses memory,lds OUT/x
#   tools/real_coverage.sh /tmp/cov OUT/objects/*.co
#
# Sources (issue 29 added the last five):
#   cupy-rocm-7-0, jax-rocm7-pjrt 0.12.0, onnxruntime-rocm, amd-aiter (PyPI), librocsparse0 (Debian);
#   torch-scatter-rocm (PyPI, ROCm build of torch-scatter), jax-rocm60-plugin 0.5.0 (gfx940/gfx941
#   objects), jax-rocm7-plugin 0.10.2 (gfx1153 objects; the newest for CPython 3.11), ftllm-rocm
#   (fastllm's ROCm build), cyllama-rocm (a ggml/llama.cpp ROCm build, libggml-hip).
#   vLLM is not fetched: PyPI has no ROCm wheel of it (`vllm-rocm` has no files, `vllm` is a CUDA
#   build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-${SQTT_REAL_DIR:-$ROOT/target/real}}
BIN=${SQTT_PATCH:-$ROOT/target/release/sqtt-patch}
mkdir -p "$OUT/wheels" "$OUT/debs" "$OUT/deb-x" "$OUT/x" "$OUT/objects"
cd "$OUT"
for spec in cupy-rocm-7-0==14.2.0 jax-rocm7-pjrt==0.12.0 onnxruntime-rocm==1.22.2.post3 \
            amd-aiter==0.1.7.post2.dev18 torch-scatter-rocm==2.1.2.post7 \
            jax-rocm60-plugin==0.5.0 jax-rocm7-plugin==0.10.2 ftllm-rocm==0.1.5.1 \
            cyllama-rocm==0.2.18; do
  name=${spec%%==*}
  mkdir -p "wheels/$name"
  [ -d "wheels/$name/x" ] && continue
  pip download -q --no-deps --only-binary=:all: -d "wheels/$name" "$spec"
  (cd "wheels/$name" && unzip -q -o ./*.whl -d x)
done
(cd debs && apt-get download librocsparse0)
for d in debs/*.deb; do dpkg-deb -x "$d" deb-x; done
# extract DIR LIBRARY: every code object of LIBRARY into x/DIR (once).
extract() {
  [ -d "x/$1" ] || "$BIN" extract -o "x/$1" "$2"
}
extract cub wheels/cupy-rocm-7-0/x/cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so
extract xla wheels/jax-rocm7-pjrt/x/jax_plugins/xla_rocm7/xla_rocm_plugin.so
extract ort wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so
extract rocsparse deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1
for m in scatter segment_coo segment_csr; do
  extract "torch-scatter-$m" "wheels/torch-scatter-rocm/x/torch_scatter/_${m}_cuda.so"
done
for m in blas linalg prng solver; do
  extract "jax60-$m" "wheels/jax-rocm60-plugin/x/jax_rocm60_plugin/_$m.so"
done
for m in linalg prng solver; do
  extract "jax7-$m" "wheels/jax-rocm7-plugin/x/jax_rocm7_plugin/_$m.so"
done
extract fastllm wheels/ftllm-rocm/x/ftllm/libfastllm_tools.so
extract ggml-hip "$(ls wheels/cyllama-rocm/x/cyllama_rocm.libs/libggml-hip-*.so)"
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
ls -l objects
