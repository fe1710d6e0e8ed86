#!/usr/bin/env bash
# build_corpus.sh - reproducibly build the "compiled-by-us" AMDGPU corpus for
# sqtt-patch with clang/lld 22 (no GPU, no ROCm install needed).
#
# Usage: build_corpus.sh [OUTDIR]        (default ./target/corpus-out)
# Env:   LLVM=/usr/lib/llvm-22/bin       clang, ld.lld, clang-offload-bundler, llvm-objcopy
#        DEBROOT=./target/corpus-out/deb-x       dpkg-deb -x tree of Debian bookworm HIP 5.2
#                                        packages (downloaded+extracted if missing,
#                                        only needs `apt-get download`, no install;
#                                        set DEBROOT=none to skip the parts that need it)
#        PY=python3                      python with `zstandard` for make_ccob zstd/scan
# Output (all under OUTDIR):
#   objects/<target>__<origin>__<variant>.co   bare code objects (ELF amdgcn-amd-amdhsa)
#   bundles/*.hipfb|*.ccob                      offload bundles (plain / CCOB v1-v3, zlib/zstd)
#   hosts/*                                     host ELF executables / .so with .hip_fatbin
#   MANIFEST.tsv                                file, bytes, sha256
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "$HERE/../../fixtures/corpus/src" && pwd)"
OUT="${1:-./target/corpus-out}"
LLVM="${LLVM:-/usr/lib/llvm-22/bin}"
DEBROOT="${DEBROOT:-./target/corpus-out/deb-x}"
PY="${PY:-python3}"
export PATH="$LLVM:$PATH"
mkdir -p "$OUT/objects" "$OUT/bundles" "$OUT/hosts" "$OUT/tmp"
O="$OUT/objects"; B="$OUT/bundles"; H="$OUT/hosts"; T="$OUT/tmp"

TARGETS="gfx900 gfx906 gfx908 gfx90a gfx942 gfx950 gfx1010 gfx1030 gfx1100 gfx1151 gfx1200 gfx1201 gfx1250"
W64_TARGETS="gfx1010 gfx1030 gfx1100 gfx1151 gfx1200 gfx1201"      # gfx1250 is wave32-only
PRELOAD_TARGETS="gfx90a gfx942 gfx950 gfx1250"                       # kernarg preload capable
GENERIC_TARGETS="gfx9-generic gfx9-4-generic gfx10-1-generic gfx10-3-generic gfx11-generic gfx12-generic"
DEB52_TARGETS="gfx906 gfx90a gfx1030"                                # have oclc_isa_version_*.bc in rocm-device-libs 5.2

# Reproducibility: clang's default -fuse-cuid=hash mixes the output path into the
# __hip_cuid_<hash> symbol, and -g records absolute paths; pin both so the
# bytes do not depend on where the repo or OUTDIR live.
REPRO=(-ffile-prefix-map="$SRC"=/corpus/src -fdebug-compilation-dir=/corpus)
# device-only HIP compile with the builtin-only mini header (no ROCm at all)
HIPDEV=(clang -x hip --cuda-device-only --no-gpu-bundle-output -nogpuinc -nogpulib -I"$SRC" "${REPRO[@]}")
hipdev() {  # hipdev OUTFILE SRCFILE FLAGS...   (cuid derived from the output name)
  local out="$1" src="$2"; shift 2
  "${HIPDEV[@]}" -cuid="$(basename "$out" .co)" "$@" "$src" -o "$out"
}
safe() { echo "$1" | tr ':' '_'; }
log() { printf '%s\n' "$*" >&2; }

log "== 1. HIP (mini header) device code objects"
K="$SRC/kernels.hip"
for t in $TARGETS; do
  hipdev "$O/${t}__hip-mini__O3.co"   "$K" --offload-arch=$t -O3
  hipdev "$O/${t}__hip-mini__O0.co"   "$K" --offload-arch=$t -O0
  hipdev "$O/${t}__hip-mini__O3-g.co" "$K" --offload-arch=$t -O3 -g
  hipdev "$O/${t}__hip-mini__O0-g.co" "$K" --offload-arch=$t -O0 -g
done
for t in $W64_TARGETS; do
  hipdev "$O/${t}__hip-mini__O3-wave64.co" "$K" --offload-arch=$t -mwavefrontsize64 -O3
done
for t in $PRELOAD_TARGETS; do
  hipdev "$O/${t}__hip-mini__O3-kernarg-preload.co" "$K" --offload-arch=$t -mllvm -amdgpu-kernarg-preload-count=8 -O3
done
for t in $GENERIC_TARGETS; do   # generic targets require code object v6 (clang-22 default)
  hipdev "$O/${t}__hip-mini__O3.co" "$K" --offload-arch=$t -O3
done
for cov in 4 5; do
  for t in gfx90a gfx1100; do
    hipdev "$O/${t}__hip-mini__O3-cov$cov.co" "$K" --offload-arch=$t -mcode-object-version=$cov -O3
  done
done
for tid in gfx90a:xnack+ gfx90a:xnack- gfx942:sramecc+:xnack- gfx908:sramecc-; do
  hipdev "$O/$(safe $tid)__hip-mini__O3.co" "$K" --offload-arch=$tid -O3
done
for t in gfx90a gfx942 gfx1100 gfx1200 gfx1250; do
  hipdev "$O/${t}__hip-mini__O3-long-branch.co" "$SRC/long_branch.hip" --offload-arch=$t -O3
done

log "== 2. OpenCL C (builtins only, -nogpulib)"
for t in $TARGETS; do
  clang -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=$t -nogpulib -DNO_DEVICE_LIBS -O3 \
    -Wno-everything "$SRC/kernels.cl" -o "$O/${t}__ocl-nolib__O3.co"
done

log "== 3. offload bundles (device-only, several targets)"
clang -x hip --cuda-device-only -nogpuinc -nogpulib -I"$SRC" "${REPRO[@]}" -cuid=multi4 -O3 \
  --offload-arch=gfx90a --offload-arch=gfx942 --offload-arch=gfx1100 --offload-arch=gfx1201 \
  "$SRC/kernels.hip" -o "$B/multi4__hip-mini__O3.hipfb"
clang -x hip --cuda-device-only -nogpuinc -nogpulib -I"$SRC" "${REPRO[@]}" -cuid=multi4 -O3 --offload-compress \
  --offload-arch=gfx90a --offload-arch=gfx942 --offload-arch=gfx1100 --offload-arch=gfx1201 \
  "$SRC/kernels.hip" -o "$B/multi4__hip-mini__O3.clang-offload-compress.ccob"   # CCOB v3 zstd
COMPRESSED_BUNDLE_FORMAT_VERSION=2 clang -x hip --cuda-device-only -nogpuinc -nogpulib -I"$SRC" "${REPRO[@]}" -cuid=multi4 -O3 \
  --offload-compress --offload-arch=gfx90a --offload-arch=gfx942 --offload-arch=gfx1100 --offload-arch=gfx1201 \
  "$SRC/kernels.hip" -o "$B/multi4__hip-mini__O3.clang-offload-compress-v2.ccob"  # CCOB v2 zstd
# zlib and v1 cannot be produced by clang-offload-bundler-22: re-wrap with make_ccob.py
if "$PY" -c 'import zstandard' 2>/dev/null; then METHODS="zlib zstd"; else
  METHODS="zlib"; log "!! $PY has no 'zstandard' (pip install zstandard): skipping make_ccob zstd variants"; fi
for v in 1 2 3; do for m in $METHODS; do
  "$PY" "$HERE/make_ccob.py" "$B/multi4__hip-mini__O3.hipfb" "$B/multi4__hip-mini__O3.ccob-v$v-$m" \
    --version $v --method $m >/dev/null
done; done

# ---------------------------------------------------------------- Debian HIP 5.2
HAVE_DEB=0
if [ "$DEBROOT" != none ]; then
  if [ ! -e "$DEBROOT/usr/include/hip/hip_runtime.h" ]; then
    log "== fetching Debian bookworm HIP 5.2 packages into $DEBROOT (apt-get download, no install)"
    mkdir -p "$DEBROOT.debs" && ( cd "$DEBROOT.debs" && apt-get download \
      libamdhip64-5 libamdhip64-dev hipcc rocm-device-libs libhsa-runtime64-1 libamd-comgr2 )
    for d in "$DEBROOT.debs"/*.deb; do dpkg-deb -x "$d" "$DEBROOT"; done
  fi
  if [ -e "$DEBROOT/usr/include/hip/hip_runtime.h" ]; then HAVE_DEB=1; fi
fi
if [ $HAVE_DEB = 1 ]; then
  R="$OUT/tmp/rocm52"       # fake ROCm root that clang's ROCm detection accepts
  mkdir -p "$R/share/hip" "$R/amdgcn"
  ln -sfn "$DEBROOT/usr/include" "$R/include"
  ln -sfn "$DEBROOT/usr/lib/x86_64-linux-gnu" "$R/lib"
  ln -sfn "$DEBROOT/usr/lib/x86_64-linux-gnu/amdgcn/bitcode" "$R/amdgcn/bitcode"
  cp "$DEBROOT/usr/share/hip/version" "$R/share/hip/version"
  HIP52=(clang -x hip --rocm-path="$R" -include "$SRC/hip52_compat.h" -mcode-object-version=5 -Wno-unused-result \
         "${REPRO[@]}" -ffile-prefix-map="$DEBROOT"=/debroot -ffile-prefix-map="$R"=/rocm52)
  log "== 4. HIP with Debian HIP 5.2 headers + rocm-device-libs 5.2"
  for t in $DEB52_TARGETS; do
    "${HIP52[@]}" --cuda-device-only --no-gpu-bundle-output --offload-arch=$t -O3 -cuid=deb52-$t \
      "$SRC/deb52_kernels.hip" -o "$O/${t}__hip-deb52__O3-cov5.co"
    "${HIP52[@]}" --cuda-device-only --no-gpu-bundle-output --offload-arch=$t -O3 -g -cuid=deb52-g-$t \
      "$SRC/deb52_kernels.hip" -o "$O/${t}__hip-deb52__O3-g-cov5.co"
    clang -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=$t --rocm-path="$R" -mcode-object-version=5 \
      -O3 -Wno-everything "$SRC/kernels.cl" -o "$O/${t}__ocl-deb52-devlibs__O3-cov5.co"
  done
  LIBHIP=(-L"$R/lib" -lamdhip64 -Wl,--allow-shlib-undefined)
else
  log "!! no Debian HIP tree: skipping HIP-5.2-header builds; host programs link with unresolved HIP symbols"
  LIBHIP=(-Wl,--unresolved-symbols=ignore-all)
fi

log "== 5. host programs with embedded .hip_fatbin"
A4=(--offload-arch=gfx90a --offload-arch=gfx942 --offload-arch=gfx1100 --offload-arch=gfx1201)
HIPHOST=(clang++ -x hip -nogpuinc -nogpulib -I"$SRC" -O2 "${REPRO[@]}")
LINK=(clang++ -fuse-ld=lld)
tu() {  # tu OUT.o SRC CUID FLAGS...   one translation unit -> host object with .hip_fatbin
  local out="$1" src="$2" cuid="$3"; shift 3
  "${HIPHOST[@]}" -cuid="$cuid" "$@" -c "$src" -o "$out"
}
# 5a classic (non-RDC) driver: one bundle per TU, each padded to 4096, 2 TUs
tu "$T/main.o" "$SRC/app_main.hip" main "${A4[@]}"
tu "$T/tu2.o"  "$SRC/app_tu2.hip"  tu2  "${A4[@]}"
"${LINK[@]}" "$T/main.o" "$T/tu2.o" -o "$H/x86_64__app-mini__4arch-2tu.elf" "${LIBHIP[@]}"
# 5b compressed (CCOB v3 zstd by default) and v2 via env var
tu "$T/main_z3.o" "$SRC/app_main.hip" main "${A4[@]}" --offload-compress
tu "$T/tu2_z3.o"  "$SRC/app_tu2.hip"  tu2  "${A4[@]}" --offload-compress
"${LINK[@]}" "$T/main_z3.o" "$T/tu2_z3.o" -o "$H/x86_64__app-mini__4arch-2tu-ccob3-zstd.elf" "${LIBHIP[@]}"
COMPRESSED_BUNDLE_FORMAT_VERSION=2 tu "$T/main_z2.o" "$SRC/app_main.hip" main "${A4[@]}" --offload-compress
COMPRESSED_BUNDLE_FORMAT_VERSION=2 tu "$T/tu2_z2.o"  "$SRC/app_tu2.hip"  tu2  "${A4[@]}" --offload-compress
"${LINK[@]}" "$T/main_z2.o" "$T/tu2_z2.o" -o "$H/x86_64__app-mini__4arch-2tu-ccob2-zstd.elf" "${LIBHIP[@]}"
# 5c new offload driver + RDC: .llvm.offloading in .o, clang-linker-wrapper makes .fatbin_image
tu "$T/main_rdc.o" "$SRC/app_main.hip" main "${A4[@]}" -fgpu-rdc --offload-new-driver
tu "$T/tu2_rdc.o"  "$SRC/app_tu2.hip"  tu2  "${A4[@]}" -fgpu-rdc --offload-new-driver
cp "$T/main_rdc.o" "$H/x86_64__app-mini__4arch-newdriver-rdc.o"
"${LINK[@]}" -fgpu-rdc --offload-new-driver --hip-link "${A4[@]}" -nogpulib "$T/main_rdc.o" "$T/tu2_rdc.o" \
  -o "$H/x86_64__app-mini__4arch-newdriver-rdc.elf" "${LIBHIP[@]}"
# 5d shared library and -g build
tu "$T/tu2_pic.o" "$SRC/app_tu2.hip" tu2 "${A4[@]}" -fPIC
"${LINK[@]}" -shared "$T/tu2_pic.o" -o "$H/x86_64__libtu2-mini__4arch.so" "${LIBHIP[@]}"
tu "$T/main_g.o" "$SRC/app_main.hip" main --offload-arch=gfx942 --offload-arch=gfx1100 -g
tu "$T/tu2_g.o"  "$SRC/app_tu2.hip"  tu2  --offload-arch=gfx942 --offload-arch=gfx1100 -g
"${LINK[@]}" "$T/main_g.o" "$T/tu2_g.o" -o "$H/x86_64__app-mini__2arch-g.elf" "${LIBHIP[@]}"
# 5e zlib CCOB v2 spliced into one object file (zlib/v1 = what older toolchains could emit)
llvm-objcopy --dump-section .hip_fatbin="$T/tu2.bundle" "$T/tu2.o"
"$PY" "$HERE/make_ccob.py" "$T/tu2.bundle" "$T/tu2.ccob" --version 2 --method zlib >/dev/null
llvm-objcopy --update-section .hip_fatbin="$T/tu2.ccob" "$T/tu2.o" "$T/tu2_zlib.o"
"${LINK[@]}" "$T/main.o" "$T/tu2_zlib.o" -o "$H/x86_64__app-mini__4arch-2tu-mixed-plain+ccob2-zlib.elf" "${LIBHIP[@]}"
# 5f hand-crafted host: .incbin of a bundle + __hip_fatbin_wrapper, no HIP compile at all
( cd "$B" && clang -O2 -c -DFATBIN_PATH='"multi4__hip-mini__O3.hipfb"' "$SRC/craft_fatbin_host.c" -o "$T/craft.o" )
"${LINK[@]}" "$T/craft.o" -o "$H/x86_64__crafted-incbin__4arch.elf" "${LIBHIP[@]}"
if [ $HAVE_DEB = 1 ]; then
  A3=(--offload-arch=gfx906 --offload-arch=gfx90a --offload-arch=gfx1030)
  "${HIP52[@]}" "${A3[@]}" -DUSE_DEBIAN_HIP -O2 -cuid=main -c "$SRC/app_main.hip" -o "$T/d52_main.o"
  "${HIP52[@]}" "${A3[@]}" -DUSE_DEBIAN_HIP -O2 -cuid=tu2 -c "$SRC/app_tu2.hip" -o "$T/d52_tu2.o"
  "${LINK[@]}" "$T/d52_main.o" "$T/d52_tu2.o" -o "$H/x86_64__app-deb52__3arch-2tu.elf" "${LIBHIP[@]}"
fi

rm -rf "$T"
( cd "$OUT" && find objects bundles hosts -type f | sort | while read -r f; do
    printf '%s\t%s\t%s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)"; done ) > "$OUT/MANIFEST.tsv"
log "done: $(wc -l < "$OUT/MANIFEST.tsv") files, $(du -sh "$OUT" | cut -f1) in $OUT"
