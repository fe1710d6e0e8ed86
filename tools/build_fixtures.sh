#!/usr/bin/env bash
# build_fixtures.sh - rebuild sqtt-patch's self-contained test fixtures
# (fixtures/objects, fixtures/left-alone, fixtures/tensile, fixtures/rdc, fixtures/retired, fixtures/bundles,
# fixtures/hosts, fixtures/MANIFEST.tsv)
# from fixtures/src with LLVM 22 only: no ROCm, no GPU, no device libraries.
#
# Usage:  tools/build_fixtures.sh            (from anywhere; writes into fixtures/)
# Env:    LLVM=/usr/lib/llvm-22/bin          clang, ld.lld, clang-offload-bundler, llvm-readelf, llvm-objdump
#         JOBS=2                             parallel compiles
#         PYTHON=python3                     the zlib CCOB writer and tools/retarget_object.py (stdlib only)
#
# Reproducible: -cuid is derived from the output name (clang's default cuid
# hashes the output path), -ffile-prefix-map / -fdebug-compilation-dir pin the
# paths recorded in DWARF, and every compile runs with relative paths from
# fixtures/src.  Two runs in different checkouts give identical bytes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FX="$ROOT/fixtures"
SRC="$FX/src"
LLVM="${LLVM:-/usr/lib/llvm-22/bin}"
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-python3}"
CLANG="$LLVM/clang"
BUNDLER="$LLVM/clang-offload-bundler"
READELF="$LLVM/llvm-readelf"
OBJDUMP="$LLVM/llvm-objdump"
for tool in "$CLANG" "$LLVM/clang++" "$LLVM/ld.lld" "$BUNDLER" "$READELF" "$OBJDUMP"; do
  [ -x "$tool" ] || { echo "build_fixtures: missing $tool (install LLVM 22: clang-22 lld-22 llvm-22)" >&2; exit 1; }
done

OBJ="$FX/objects"
LEFT="$FX/left-alone"   # objects whose functions the rewriter must leave alone (not in objects/: some fail closed)
# objects of processors LLVM 22 no longer compiles for (gfx940, gfx941): a gfx942 object with
# e_flags' EF_AMDGPU_MACH and the metadata's processor name patched (tools/retarget_object.py);
# not in objects/: llvm-objdump-22 cannot disassemble them
RETIRED="$FX/retired"
# Tensile-shaped kernels (issue 37: long branches through an offset SGPR, size-0 kernel symbols
# with zero padding); not in objects/ so that the output-hash and baseline sets stay as they are
TENSILE_DIR="$FX/tensile"
# relocatable device code linked with LTO (issue 39 item 3): inlined functions whose abstract
# origins lie in another compile unit (DW_FORM_ref_addr); own directory for the same reason
RDC_DIR="$FX/rdc"
# device functions no kernel calls: exported, address in data, unreachable (issue 39 item 6);
# own directory for the same reason
CALLERS_DIR="$FX/callers"
# nested loops for loop scopes (issue 34); own directory for the same reason
LOOPS_DIR="$FX/loops"
BUN="$FX/bundles"
HOST="$FX/hosts"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
rm -rf "$OBJ" "$LEFT" "$TENSILE_DIR" "$RDC_DIR" "$CALLERS_DIR" "$LOOPS_DIR" "$RETIRED" "$BUN" "$HOST"
mkdir -p "$OBJ" "$LEFT" "$TENSILE_DIR" "$RDC_DIR" "$CALLERS_DIR" "$LOOPS_DIR" "$RETIRED" "$BUN" "$HOST"
cd "$SRC"   # every compile below names its sources relative to fixtures/src

log() { printf 'build_fixtures: %s\n' "$*" >&2; }

# ------------------------------------------------------------------ build matrix
TARGETS="gfx900 gfx906 gfx908 gfx90a gfx942 gfx950 gfx1010 gfx1030 gfx1100 gfx1151 gfx1200 gfx1201 gfx1250"
GENERICS="gfx9-generic gfx9-4-generic gfx10-1-generic gfx10-3-generic gfx11-generic gfx12-generic"
# gfx10/11/12 can run wave64 (gfx1250 is wave32-only)
WAVE64="gfx1010 gfx1030 gfx1100 gfx1151 gfx1200 gfx1201 gfx10-1-generic gfx10-3-generic gfx11-generic gfx12-generic"
PRELOAD="gfx90a gfx942 gfx950 gfx1250"          # kernarg preload capable
LONG_BRANCH="gfx942 gfx1100 gfx1200 gfx1250"
ASM_GFX9="gfx90a gfx942 gfx950"
ASM_GFX11="gfx1100 gfx1151"
PRESSURE="gfx942 gfx1100 gfx1201"               # every SGPR used: scratch only by liveness
RELAX="gfx942 gfx1100"                          # relax.S: a back edge relaxed only after instrumentation
                                                # relax_tail.S: the same for a function's last s_branch
SPILL="gfx942 gfx1100 gfx1201"                  # spill.S: no SGPR ever dead, saved in VGPR lanes
STUBS="gfx942 gfx1100 gfx1250"                  # stubs_gfx{9,11,1250}.S: functions to leave alone
TRAP="gfx942 gfx1100"                           # trap.hip: functions ending in s_trap 2 (llvm.trap)
TENSILE="gfx908 gfx90a gfx1100 gfx1201"          # tensile.S: Tensile long branches, size-0 kernels (issue 37)
HAZARDS="gfx1153 gfx1201"                      # hazards.S: original hazard producers right before inserted code
CLAUSE_HINT="gfx1100 gfx1201"                  # clause_hint.S: an s_clause inside an s_delay_alu window
HIP_SOURCES="calls barriers memory"
INLINED="gfx942 gfx1100"                       # inlined.hip: -g and -gline-tables-only (issue 16)
RDC="gfx1100"                                  # rdc_{main,lib}.hip: -fgpu-rdc + LTO, cross-unit origins
CALLERS="gfx942 gfx1100"                       # callers.S: device functions with no call site
LOOPS="gfx942 gfx1100"                         # loops.S: nested loops, a loop in a device function (issue 34)

REPRO=(-ffile-prefix-map="$SRC"=/fixtures/src -ffile-prefix-map="$FX"=/fixtures -fdebug-compilation-dir=/fixtures)
HIP_DEVICE=("$CLANG" -x hip --cuda-device-only --no-gpu-bundle-output -nogpuinc -nogpulib -I. "${REPRO[@]}")
OPENCL=("$CLANG" -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -nogpulib "${REPRO[@]}")
ASM=("$CLANG" -x assembler-with-cpp -target amdgcn-amd-amdhsa "${REPRO[@]}")

# variant name -> compiler flags
variant_flags() {
  case "$1" in
    O3) echo "-O3" ;;
    O0) echo "-O0" ;;
    O3-g) echo "-O3 -g" ;;
    O3-gline) echo "-O3 -gline-tables-only" ;;
    O3-wave64) echo "-O3 -mwavefrontsize64" ;;
    O3-preload8) echo "-O3 -mllvm -amdgpu-kernarg-preload-count=8" ;;
    g) echo "-g" ;;
    bad-word) echo "-g -DFX_BAD_WORD" ;;
    llvm | bad-cfa) echo "" ;;   # debug-frame: the source picks its flags
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}

# simple job pool: at most $JOBS compiles at a time; a failing job fails the build
pool_wait() { while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done; }
spawn() { pool_wait; "$@" & }
drain() { while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done; wait; }

# one object: compile SOURCE for TARGET with VARIANT into objects/<target>__<source>__<variant>.co
object() {
  local target="$1" source="$2" variant="$3" out flags f
  out="$OBJ/${target}__${source}__${variant}.co"
  # shellcheck disable=SC2207
  flags=($(variant_flags "$variant"))
  case "$source" in
    ocl) "${OPENCL[@]}" -mcpu="$target" "${flags[@]}" kernels.cl -o "$out" ;;
    asm) if [[ "$target" == gfx9* ]]; then f=asm_gfx9.S; else f=asm_gfx11.S; fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "$f" -o "$out" ;;
    pressure) if [[ "$target" == gfx9* ]]; then f=pressure_gfx9.S; else f=pressure_gfx11.S; fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "$f" -o "$out" ;;
    relax) if [[ "$target" == gfx9* ]]; then f=(-DFX_GFX9 relax.S); else f=(relax.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" -o "$out" ;;
    relax-tail) if [[ "$target" == gfx9* ]]; then f=(-DFX_GFX9 relax_tail.S); else f=(relax_tail.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" -o "$out" ;;
    spill) if [[ "$target" == gfx9* ]]; then f=(-DFX_GFX9 spill.S); else f=(spill.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" -o "$out" ;;
    callers) if [[ "$target" == gfx9* ]]; then f=(-DFX_GFX9 callers.S); else f=(callers.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" -o "$CALLERS_DIR/${out##*/}" ;;
    stubs) case "$target" in gfx9*) f=stubs_gfx9.S ;; gfx1250) f=stubs_gfx1250.S ;; *) f=stubs_gfx11.S ;; esac
           "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${flags[@]}" "$f" -o "$LEFT/${out##*/}" ;;
    trap) "${HIP_DEVICE[@]}" --offload-arch="$target" -cuid="${target}__${source}__${variant}" \
            "${flags[@]}" trap.hip -o "$LEFT/${out##*/}" ;;
    hazards) "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" hazards.S -o "$out" ;;
    clause-hint) if [[ "$target" == gfx12* ]]; then f=(-DFX_GFX12 clause_hint.S); else f=(clause_hint.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" -o "$out" ;;
    tensile) case "$target" in gfx90a) f=(-DFX_GFX9 -DFX_ACCUM) ;; gfx9*) f=(-DFX_GFX9) ;; gfx12*) f=(-DFX_GFX12) ;; *) f=() ;; esac
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" "${f[@]}" tensile.S -o "$TENSILE_DIR/${out##*/}" ;;
    loops) if [[ "$target" == gfx9* ]]; then f=(-DFX_GFX9 loops.S); else f=(loops.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" -g "${f[@]}" -o "$LOOPS_DIR/${out##*/}" ;;
    debug-frame) if [ "$variant" = bad-cfa ]; then f=(-DFX_BAD_CFA debug_frame.S); else f=(debug_frame.S); fi
         "${ASM[@]}" -mcpu="$target" -DFX_TARGET="$target" -g "${f[@]}" -o "$out" ;;
    rdc) for f in rdc_main rdc_lib; do  # bitcode, then an LTO link that inlines across the files
           "${HIP_DEVICE[@]}" --offload-arch="$target" -cuid="${target}__${f}__${variant}" -fgpu-rdc -flto \
             "${flags[@]}" -c "$f.hip" -o "$TMP/${target}__${f}__${variant}.bc"
         done
         "$LLVM/ld.lld" -shared -plugin-opt=mcpu="$target" -plugin-opt=O3 "$TMP/${target}__rdc_main__${variant}.bc" \
           "$TMP/${target}__rdc_lib__${variant}.bc" -o "$RDC_DIR/${out##*/}" ;;
    long-branch) "${HIP_DEVICE[@]}" --offload-arch="$target" -cuid="${target}__${source}__${variant}" \
                   "${flags[@]}" long_branch.hip -o "$out" ;;
    *) "${HIP_DEVICE[@]}" --offload-arch="$target" -cuid="${target}__${source}__${variant}" \
         "${flags[@]}" "$source.hip" -o "$out" ;;
  esac
}

log "1/5 device code objects"
for t in $TARGETS $GENERICS; do
  for s in $HIP_SOURCES ocl; do
    for v in O3 O0 O3-g; do spawn object "$t" "$s" "$v"; done
  done
done
for t in $WAVE64; do for s in $HIP_SOURCES ocl; do spawn object "$t" "$s" O3-wave64; done; done
for t in $PRELOAD; do for s in $HIP_SOURCES ocl; do spawn object "$t" "$s" O3-preload8; done; done
for t in $LONG_BRANCH; do spawn object "$t" long-branch O3; done
for t in $INLINED; do for v in O3-g O3-gline; do spawn object "$t" inlined "$v"; done; done
for t in $RDC; do spawn object "$t" rdc O3-g; done
for t in $ASM_GFX9 $ASM_GFX11; do spawn object "$t" asm O3; done
for t in $PRESSURE; do spawn object "$t" pressure O3; done
for t in $RELAX; do spawn object "$t" relax O3; spawn object "$t" relax-tail O3; done
for t in $SPILL; do spawn object "$t" spill O3; done
for t in $CALLERS; do spawn object "$t" callers O3; done
for t in $HAZARDS; do spawn object "$t" hazards O3; done
for t in $CLAUSE_HINT; do spawn object "$t" clause-hint O3; done
for t in $TENSILE; do spawn object "$t" tensile O3; done
for t in $LOOPS; do spawn object "$t" loops g; done
for v in llvm bad-cfa; do spawn object gfx942 debug-frame "$v"; done
for t in $STUBS; do for v in g bad-word; do spawn object "$t" stubs "$v"; done; done
for t in $TRAP; do spawn object "$t" trap O3; done
drain

# gfx940 = EF_AMDGPU_MACH 0x40, gfx941 = 0x4b (LLVM 19 ELF.h; RESERVED_0X40/0X4B in LLVM 22)
for tm in gfx940:0x40 gfx941:0x4b; do
  "$PYTHON" "$ROOT/tools/retarget_object.py" "$OBJ/gfx942__barriers__O3.co" \
    "$RETIRED/${tm%%:*}__barriers__O3.co" "${tm%%:*}" "${tm##*:}"
done

log "2/5 offload bundles"
BUNDLE_TARGETS="gfx90a gfx942 gfx1100 gfx1201"
bundle_args=(-type=o -targets="host-x86_64-unknown-linux-gnu-$(for t in $BUNDLE_TARGETS; do printf ',hipv4-amdgcn-amd-amdhsa--%s' "$t"; done)"
             -input=/dev/null)
for t in $BUNDLE_TARGETS; do bundle_args+=(-input="$OBJ/${t}__calls__O3.co"); done
PLAIN="$BUN/calls-4arch__plain.hipfb"
"$BUNDLER" "${bundle_args[@]}" -output="$PLAIN"
# clang-offload-bundler 22 compresses with zstd only; header v3 by default, v2 via env
env -u COMPRESSED_BUNDLE_FORMAT_VERSION "$BUNDLER" -compress "${bundle_args[@]}" -output="$BUN/calls-4arch__ccob-v3-zstd.hipfb"
COMPRESSED_BUNDLE_FORMAT_VERSION=2 "$BUNDLER" -compress "${bundle_args[@]}" -output="$BUN/calls-4arch__ccob-v2-zstd.hipfb"
# zlib (what older toolchains wrote) and header v1 cannot be produced by the 22 bundler:
# write them here from the plain bundle (layout: AMDGPUUsage / OffloadBundler.cpp facts,
# see docs/background/code-objects.md; method 0 = zlib; hash = MD5 of the plain bundle, 8 bytes LE)
ccob_zlib() {  # ccob_zlib VERSION IN OUT
  "$PYTHON" - "$@" <<'PY'
import hashlib, struct, sys, zlib
version, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
plain = open(src, "rb").read()
body = zlib.compress(plain, 9)
digest = struct.unpack("<Q", hashlib.md5(plain).digest()[:8])[0]
if version == 1:
    head = b"CCOB" + struct.pack("<HHIQ", 1, 0, len(plain), digest)
elif version == 2:
    head = b"CCOB" + struct.pack("<HHIIQ", 2, 0, 24 + len(body), len(plain), digest)
else:
    head = b"CCOB" + struct.pack("<HHQQQ", 3, 0, 32 + len(body), len(plain), digest)
open(dst, "wb").write(head + body)
PY
}
for v in 1 2 3; do ccob_zlib "$v" "$PLAIN" "$BUN/calls-4arch__ccob-v$v-zlib.hipfb"; done

log "3/5 host programs"
HIP_HOST=("$LLVM/clang++" -x hip -nogpuinc -nogpulib -I. -O2 "${REPRO[@]}")
EXE_ARCHS=(--offload-arch=gfx942 --offload-arch=gfx1100)
LIB_ARCHS=(--offload-arch=gfx90a --offload-arch=gfx1030 --offload-arch=gfx1201)
LINK=("$LLVM/clang++" -fuse-ld=lld -Wl,--build-id=sha1)
"$CLANG" -O2 -fPIC -c hip_stubs.c -o "$TMP/hip_stubs.o"
# shared library: two TUs, lib_a's bundle plain, lib_b's compressed (CCOB v3 zstd)
"${HIP_HOST[@]}" -fPIC "${LIB_ARCHS[@]}" -cuid=lib_a -c lib_a.hip -o "$TMP/lib_a.o"
"${HIP_HOST[@]}" -fPIC "${LIB_ARCHS[@]}" -cuid=lib_b --offload-compress -c lib_b.hip -o "$TMP/lib_b.o"
"${LINK[@]}" -shared -Wl,-soname,libfx_hip.so "$TMP/lib_a.o" "$TMP/lib_b.o" -o "$HOST/libfx_hip.so"
# PIE executable: two TUs + the stubs, linked against the library (4 fat binaries at run time)
"${HIP_HOST[@]}" -fPIE "${EXE_ARCHS[@]}" -cuid=host_main -DFX_WITH_LIB -c host_main.hip -o "$TMP/main_pie.o"
"${HIP_HOST[@]}" -fPIE "${EXE_ARCHS[@]}" -cuid=host_tu2 -c host_tu2.hip -o "$TMP/tu2_pie.o"
"${LINK[@]}" -pie "$TMP/main_pie.o" "$TMP/tu2_pie.o" "$TMP/hip_stubs.o" -L"$HOST" -lfx_hip \
  -Wl,-rpath,'$ORIGIN' -o "$HOST/x86_64__fx-app__pie.elf"
# non-PIE executable: absolute bundle addresses in the wrappers, no relocations for them
"${HIP_HOST[@]}" -fno-pic "${EXE_ARCHS[@]}" -cuid=host_main -c host_main.hip -o "$TMP/main_nopie.o"
"${HIP_HOST[@]}" -fno-pic "${EXE_ARCHS[@]}" -cuid=host_tu2 -c host_tu2.hip -o "$TMP/tu2_nopie.o"
"$CLANG" -O2 -fno-pic -c hip_stubs.c -o "$TMP/hip_stubs_nopie.o"
"${LINK[@]}" -no-pie "$TMP/main_nopie.o" "$TMP/tu2_nopie.o" "$TMP/hip_stubs_nopie.o" -o "$HOST/x86_64__fx-app__nopie.elf"

log "4/5 checks"
fail() { echo "build_fixtures: CHECK FAILED: $*" >&2; exit 1; }
for f in "$OBJ"/*.co "$LEFT"/*.co "$TENSILE_DIR"/*.co; do
  "$READELF" -h "$f" > "$TMP/hdr.txt" || fail "$f: llvm-readelf -h failed"
  grep -q 'Machine: *EM_AMDGPU' "$TMP/hdr.txt" || fail "$f: not an AMDGPU ELF"
  t="$(basename "$f" | sed 's/__.*//')"
  grep -Eq "Flags: .*, $t(,|\$)" "$TMP/hdr.txt" || fail "$f: e_flags do not name $t"
  "$OBJDUMP" -d "$f" > "$TMP/dis.txt" || fail "$f: llvm-objdump -d failed"
  # the bad-word stub fixtures hold one word that does not decode, on purpose
  case "$f" in
    *__stubs__bad-word.co) grep -Eq '<unknown>|\.long 0xffffffff' "$TMP/dis.txt" || fail "$f: the undecodable word decodes" ;;
    *) if grep -q '<unknown>' "$TMP/dis.txt"; then fail "$f: llvm-objdump printed <unknown>"; fi ;;
  esac
done
for f in "$RETIRED"/*.co; do
  # exactly two bytes differ from the gfx942 object: the mach byte and one digit of the name
  [ "$(cmp -l "$OBJ/gfx942__barriers__O3.co" "$f" | wc -l)" = 2 ] || fail "$f: not a two-byte retarget"
done
for f in "$BUN"/*.hipfb; do
  "$BUNDLER" -list -type=o -input="$f" > "$TMP/list.txt" || fail "$f: bundler -list"
  for t in $BUNDLE_TARGETS; do
    grep -qx "hipv4-amdgcn-amd-amdhsa--$t" "$TMP/list.txt" || fail "$f: no $t entry"
    "$BUNDLER" -unbundle -type=o -input="$f" -targets="hipv4-amdgcn-amd-amdhsa--$t" -output="$TMP/u.co" \
      || fail "$f: unbundle $t"
    cmp -s "$TMP/u.co" "$OBJ/${t}__calls__O3.co" || fail "$f: $t entry differs from its input object"
  done
done
for f in "$HOST"/*.elf "$HOST"/*.so; do
  "$READELF" -S "$f" > "$TMP/sections.txt"   # (no `| grep -q`: SIGPIPE + pipefail)
  grep -q ' \.hip_fatbin ' "$TMP/sections.txt" || fail "$f: no .hip_fatbin"
  grep -q ' \.hipFatBinSegment ' "$TMP/sections.txt" || fail "$f: no .hipFatBinSegment"
done
"$HOST/x86_64__fx-app__pie.elf" > "$TMP/pie.out" || fail "PIE host did not run"
grep -q '^fatbins registered: 4,' "$TMP/pie.out" || fail "PIE host: expected 4 fat binaries: $(cat "$TMP/pie.out")"
"$HOST/x86_64__fx-app__nopie.elf" > "$TMP/nopie.out" || fail "non-PIE host did not run"
grep -q '^fatbins registered: 2,' "$TMP/nopie.out" || fail "non-PIE host: expected 2 fat binaries"
cp "$TMP/pie.out" "$HOST/x86_64__fx-app__pie.expected-stdout"
cp "$TMP/nopie.out" "$HOST/x86_64__fx-app__nopie.expected-stdout"

log "5/5 MANIFEST.tsv"
# columns: file bytes sha256-16 target kernels device_functions dwarf wave preload
#   kernels          = .symtab STT_OBJECT symbols named *.kd (kernel descriptors)
#   device_functions = .symtab STT_FUNC symbols that are not kernels (incl. OpenCL
#                      __clang_ocl_kern_imp_* clones); SHN_ABS resource symbols are not FUNC
#   dwarf            = yes when a .debug_info section is present
#   wave             = from the descriptors (llvm-objdump: .amdhsa_wavefront_size32): wave32, wave64, mixed
#   preload          = largest .amdhsa_user_sgpr_kernarg_preload_length (SGPRs) over the kernels
object_row() {
  local f="$1" rel target syms kernels funcs dwarf wave preload w32
  rel="${f#"$FX"/}"
  target="$(basename "$f" | sed 's/__.*//')"
  syms="$("$READELF" --syms "$f" | awk '/^Symbol table .\.symtab/{on=1; next} /^Symbol table/{on=0} on')"
  kernels="$(printf '%s\n' "$syms" | awk '$4=="OBJECT" && $8 ~ /\.kd$/' | wc -l)"
  funcs="$(printf '%s\n' "$syms" | awk '$4=="FUNC"' | wc -l)"
  funcs=$((funcs - kernels))
  "$READELF" -S "$f" > "$TMP/sections.txt"
  if grep -q ' \.debug_info ' "$TMP/sections.txt"; then dwarf=yes; else dwarf=no; fi
  "$OBJDUMP" -d --section=.rodata "$f" > "$TMP/kd.txt"
  w32="$(awk '$1==".amdhsa_wavefront_size32"{print $2}' "$TMP/kd.txt" | sort -u | tr '\n' ' ')"
  case "$w32" in "1 ") wave=wave32 ;; "0 " | "") wave=wave64 ;; *) wave=mixed ;; esac
  preload="$(awk '$1==".amdhsa_user_sgpr_kernarg_preload_length"{print $2}' "$TMP/kd.txt" | sort -n | tail -1)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rel" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" \
    "$target" "$kernels" "$funcs" "$dwarf" "$wave" "${preload:-0}"
}
retired_row() {  # retired_row FILE SOURCE: SOURCE's row (kernels, wave, ... are unchanged)
  local f="$1" rel="${1#"$FX"/}"
  object_row "$2" | awk -F'\t' -v OFS='\t' -v r="$rel" -v n="$(stat -c %s "$f")" \
    -v h="$(sha256sum "$f" | cut -c1-16)" -v t="$(basename "$f" | sed 's/__.*//')" '{$1=r; $2=n; $3=h; $4=t; print}'
}
other_row() {  # other_row FILE TARGETS
  local f="$1" rel="${1#"$FX"/}"
  printf '%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\n' "$rel" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$2"
}
{
  printf 'file\tbytes\tsha256_16\ttarget\tkernels\tdevice_functions\tdwarf\twave\tpreload\n'
  for f in "$OBJ"/*.co "$LEFT"/*.co "$TENSILE_DIR"/*.co "$RDC_DIR"/*.co "$CALLERS_DIR"/*.co "$LOOPS_DIR"/*.co; do object_row "$f"; done
  for f in "$RETIRED"/*.co; do retired_row "$f" "$OBJ/gfx942__barriers__O3.co"; done
  for f in "$BUN"/*.hipfb; do other_row "$f" "$(echo $BUNDLE_TARGETS | tr ' ' ',')"; done
  other_row "$HOST/libfx_hip.so" "gfx90a,gfx1030,gfx1201"
  for f in "$HOST"/*.elf; do other_row "$f" "gfx942,gfx1100"; done
} > "$FX/MANIFEST.tsv"
log "done: $(find "$OBJ" "$LEFT" "$TENSILE_DIR" "$RDC_DIR" "$CALLERS_DIR" "$LOOPS_DIR" "$RETIRED" "$BUN" "$HOST" -type f | wc -l) files, $(du -cb "$OBJ" "$LEFT" "$TENSILE_DIR" "$RDC_DIR" "$CALLERS_DIR" "$LOOPS_DIR" "$RETIRED" "$BUN" "$HOST" | tail -1 | cut -f1) bytes"
