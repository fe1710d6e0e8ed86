#!/usr/bin/env bash
# Benchmark of sqtt-patch against LLVM 22 on the same inputs, in the same run, on the same machine
# (issue 15). Every command is measured with /usr/bin/time: wall seconds, user seconds, peak RSS.
#
# Usage: tools/bench.sh [objects|fatbin|threads|all] [FILE...]
#   objects (default FILEs: cupy's cub gfx1201 and gfx942 objects and rocsparse's gfx90a object with
#           DWARF, from $SQTT_REAL_DIR/objects): per code object
#           - `llvm-objdump-22 -d` (the reference: decode + print);
#           - `sqtt-patch IN -o OUT` with `--functions 1 --barriers 1` ("fb"), with every feature that
#             combines with memory markers ("allmem": + --kernel-scopes --memory 2:5 --scope) and,
#             with BENCH_TRACE=1, every feature that combines with address tracing ("alltrace":
#             + --kernel-scopes --trace-addresses memory,lds --scope); each run includes the
#             built-in verification;
#           - `sqtt-patch verify IN OUT` on each of those outputs (the verifier alone);
#           - `sqtt-patch dis IN` (our decode + print).
#   fatbin  (default FILEs: onnxruntime-rocm's ROCm provider and Debian's librocsparse):
#           `sqtt-patch --fatbin LIB -o OUT --functions 1 --barriers 1`, with and without
#           --compress-bundles (output size too), against `llvm-objdump-22 --offloading LIB` plus
#           `llvm-objdump-22 -d` of every extracted code object (times summed, peak = largest).
#   threads (default FILEs: as objects): the main job with the "allmem" flags and --timings at
#           each thread count of BENCH_THREADS (default 1,2 and the machine's core count), per
#           stage: wall and CPU ms, and the serial time the run implies (one thread at work
#           while the others wait: (threads x wall - CPU) / (threads - 1) for a stage, from a
#           run with more than one thread), its share of the job's CPU, and Amdahl's bound on
#           the speed-up at 16 threads. CPU per stage is /proc/self/stat (10 ms ticks).
#   all     objects and fatbin (the default), each with its default files.
# The ratio columns divide by the LLVM reference of the same input. Output: Markdown tables.
# Environment: SQTT_REAL_DIR (default <workspace>/target/real, filled by tools/fetch_real.sh), CARGO_TARGET_DIR,
# SQTT_PATCH_BIN (a prebuilt sqtt-patch to measure instead of building this checkout),
# BENCH_TRACE=1 (also the "alltrace" configuration: address tracing makes the job several times
# longer, about 15 minutes for the cub gfx1201 object on a loaded 2-core machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=${SQTT_REAL_DIR:-$root/target/real}
mode=${1:-all}
case "$mode" in
  objects | fatbin | threads | all) shift || true ;;
  *) echo "usage: tools/bench.sh [objects|fatbin|threads|all] [FILE...]" >&2; exit 2 ;;
esac
if [ "$mode" = all ] && [ $# -gt 0 ]; then
  echo "tools/bench.sh: give FILEs with 'objects' or 'fatbin', not 'all'" >&2; exit 2
fi
if [ -n "${SQTT_PATCH_BIN:-}" ]; then
  bin=$SQTT_PATCH_BIN
else
  (cd "$root" && cargo build --release -q -p sqtt-patch)
  bin="${CARGO_TARGET_DIR:-$root/target}/release/sqtt-patch"
fi
objdump=/usr/lib/llvm-22/bin/llvm-objdump
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure COMMAND...: runs COMMAND (stdout discarded) and sets $wall, $user (seconds) and $rss
# (MiB, peak of the process). A failing command (exit status other than 0) stops the benchmark.
measure() {
  /usr/bin/time -f "%e %U %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || {
    echo "failed: $*" >&2; tail -n 5 "$work/err" >&2; exit 1; }
  read -r wall user kib < "$work/t"
  rss=$((kib / 1024))
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}' if $2 > 0 else 'n/a')"; }
row() { # name what wall user rss ref_wall ref_rss
  echo "| $1 | $2 | $3 | $4 | $5 | $(ratio "$3" "$6") | $(ratio "$5" "$7") |"
}

bench_objects() {
  echo "| object | run | wall s | user s | peak MiB | wall / objdump | peak / objdump |"
  echo "|---|---|---|---|---|---|---|"
  local f name fb allmem alltrace cfg
  fb="--functions 1 --barriers 1"
  allmem="$fb --kernel-scopes --memory 2:5 --scope"
  alltrace="$fb --kernel-scopes --trace-addresses memory,lds --scope"
  for f in "$@"; do
    name="$(basename "$f") ($(($(stat -L -c %s "$f") / 1048576)) MiB)"
    measure "$objdump" -d "$f"
    local rw=$wall ru=$rss
    row "$name" "llvm-objdump-22 -d" "$wall" "$user" "$rss" "$rw" "$ru"
    measure "$bin" dis "$f"
    row "$name" "sqtt-patch dis" "$wall" "$user" "$rss" "$rw" "$ru"
    local cfgs=(fb allmem)
    [ "${BENCH_TRACE:-0}" = 1 ] && cfgs+=(alltrace)
    for cfg in "${cfgs[@]}"; do
      # shellcheck disable=SC2086
      measure env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS \
        -u SQTT_INSTRUMENT_MEMORY -u SQTT_TRACE_ADDRESSES "$bin" "$f" -o "$work/out.co" ${!cfg}
      row "$name" "main job, $cfg" "$wall" "$user" "$rss" "$rw" "$ru"
      measure "$bin" verify "$f" "$work/out.co"
      row "$name" "verify alone, $cfg" "$wall" "$user" "$rss" "$rw" "$ru"
      rm -f "$work/out.co"
    done
  done
}

bench_fatbin() {
  echo "| library | run | wall s | user s | peak MiB | output MiB | wall / LLVM | peak / LLVM |"
  echo "|---|---|---|---|---|---|---|---|"
  local f name o tw tu tr n
  for f in "$@"; do
    name="$(basename "$f") ($(($(stat -L -c %s "$f") / 1048576)) MiB)"
    # llvm-objdump --offloading writes its entries next to the input: use a symlink in $work.
    mkdir "$work/x"
    ln -s "$(readlink -f "$f")" "$work/x/lib"
    # (not in a subshell: measure sets $wall/$user/$rss for the lines below)
    cd "$work/x"
    measure "$objdump" --offloading lib
    cd "$root"
    tw=$wall tu=$user tr=$rss
    n=0
    for o in "$work"/x/lib.*amdgcn*; do
      measure "$objdump" -d "$o"
      tw=$(python3 -c "print(f'{$tw + $wall:.2f}')")
      tu=$(python3 -c "print(f'{$tu + $user:.2f}')")
      [ "$rss" -gt "$tr" ] && tr=$rss
      n=$((n + 1))
    done
    rm -rf "$work/x"
    echo "| $name | llvm-objdump-22 --offloading + -d of $n objects | $tw | $tu | $tr | - | 1.00 | 1.00 |"
    for extra in "" "--compress-bundles"; do
      # shellcheck disable=SC2086
      measure "$bin" --fatbin "$f" -o "$work/out.so" --functions 1 --barriers 1 $extra
      echo "| $name | sqtt-patch --fatbin ${extra:-(bundles as in the input)} | $wall | $user | $rss | $(($(stat -c %s "$work/out.so") / 1048576)) | $(ratio "$wall" "$tw") | $(ratio "$rss" "$tr") |"
      rm -f "$work/out.so"
    done
  done
}

# bench_threads FILE...: the "allmem" main job with --timings per thread count (see the header).
bench_threads() {
  local f n counts
  counts=${BENCH_THREADS:-1,2,$(nproc)}
  for f in "$@"; do
    for n in $(echo "$counts" | tr ',' '\n' | sort -nu); do
      # shellcheck disable=SC2086
      RAYON_NUM_THREADS=$n env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS \
        -u SQTT_INSTRUMENT_MEMORY -u SQTT_TRACE_ADDRESSES "$bin" "$f" -o "$work/out.co" \
        --functions 1 --barriers 1 --kernel-scopes --memory 2:5 --scope --timings \
        >/dev/null 2>"$work/timings.$n" || { echo "failed: $f at $n threads" >&2;
        tail -n 5 "$work/timings.$n" >&2; exit 1; }
      rm -f "$work/out.co"
    done
    python3 - "$f" "$work" "$counts" <<'PY'
import os, sys
f, work, counts = sys.argv[1], sys.argv[2], sorted({int(c) for c in sys.argv[3].split(",")})
runs = {}
for n in counts:
    rows = {}
    for line in open(os.path.join(work, f"timings.{n}")):
        p = line.split()
        # "  lay out  780.3  2.8  640  815.0": the stage name may hold a blank.
        if len(p) >= 5 and p[0] != "stage" and p[-2] != "n/a":
            try:
                rows[" ".join(p[:-4])] = (float(p[-4]), float(p[-2]))
            except ValueError:
                pass
    runs[n] = rows
stages = [s for s in runs[counts[0]] if s != "total"]
name = f"{os.path.basename(f)} ({os.path.getsize(f) >> 20} MiB)"
print(f"\n{name}, allmem flags\n")
head = " | ".join(f"wall ms @{n} | CPU ms @{n}" for n in counts)
multi = [n for n in counts if n > 1]
extra = " | ".join(f"serial ms @{n} | serial share @{n}" for n in multi)
print(f"| stage | {head} | {extra} |")
print("|---" * (1 + 2 * len(counts) + 2 * len(multi)) + "|")
job_cpu = {n: runs[n].get("total", (0, 0))[1] for n in counts}
serial_total = {n: 0.0 for n in multi}
for s in stages + ["total"]:
    cells = []
    for n in counts:
        w, c = runs[n].get(s, (0.0, 0.0))
        cells += [f"{w:.0f}", f"{c:.0f}"]
    for n in multi:
        w, c = runs[n].get(s, (0.0, 0.0))
        if s == "total":
            sigma = serial_total[n]
        else:
            sigma = min(max((n * w - c) / (n - 1), 0.0), w)
            serial_total[n] += sigma
        share = sigma / job_cpu[n] if job_cpu[n] else 0.0
        cells += [f"{sigma:.0f}", f"{100 * share:.1f} %"]
    print(f"| {s} | " + " | ".join(cells) + " |")
for n in multi:
    cpu = job_cpu[n]
    if cpu:
        s = serial_total[n] / cpu
        print(f"\nAt {n} threads: serial share {100 * s:.1f} % of {cpu:.0f} ms CPU; "
              f"Amdahl's bound at 16 threads: {1 / (s + (1 - s) / 16):.1f}x")
PY
  done
}

if [ "$mode" = threads ]; then
  if [ $# -gt 0 ]; then
    bench_threads "$@"
  else
    bench_threads "$tp/objects/cub-gfx1201.co" "$tp/objects/cub-gfx942.co" \
      "$tp/objects/rocsparse44-gfx90a.co"
  fi
  exit 0
fi
if [ "$mode" != fatbin ]; then
  if [ "$mode" = objects ] && [ $# -gt 0 ]; then
    bench_objects "$@"
  else
    bench_objects "$tp/objects/cub-gfx1201.co" "$tp/objects/cub-gfx942.co" \
      "$tp/objects/rocsparse44-gfx90a.co"
  fi
fi
if [ "$mode" != objects ]; then
  [ "$mode" = all ] && echo
  if [ "$mode" = fatbin ] && [ $# -gt 0 ]; then
    bench_fatbin "$@"
  else
    bench_fatbin "$tp/wheels/onnxruntime-rocm/x/onnxruntime/capi/libonnxruntime_providers_rocm.so" \
      "$tp/deb-x/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
  fi
fi
