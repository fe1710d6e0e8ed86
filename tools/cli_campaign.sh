#!/usr/bin/env bash
# Bad-input campaign of the command line (issue 17): runs about 120 misuses and unusual
# invocations of target/release/sqtt-patch, each in a fresh directory holding the same inputs,
# and prints a Markdown table: case, exit code, first line of the message (stderr, else stdout),
# files added (+) or removed (-) in the directory, panic. Also checks after every case that
# /dev/null is still a character device. Usage: tools/cli_campaign.sh [BIN] > docs/cli-campaign.md
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/sqtt-patch}
fx=$root/fixtures
seed=$(mktemp -d)
trap 'rm -rf "$seed"' EXIT
cp "$fx/objects/gfx1100__barriers__O3.co" "$seed/in.co"
cp "$fx/objects/gfx1100__calls__O3.co" "$seed/calls.co"
cp "$fx/bundles/calls-4arch__plain.hipfb" "$seed/b.hipfb"
cp "$fx/bundles/calls-4arch__ccob-v3-zstd.hipfb" "$seed/c.hipfb"
cp "$fx/hosts/libfx_hip.so" "$seed/host.so"
printf '\177ELF' > "$seed/stub"
printf 'hello, world\n%.0s' 1 2 3 4 > "$seed/text.txt"
: > "$seed/empty"
mkdir "$seed/d"
head -c 3000 "$seed/in.co" > "$seed/trunc.co"
head -c 5000 "$seed/b.hipfb" > "$seed/trunc.hipfb"
head -c 200 "$seed/c.hipfb" > "$seed/trunc.ccob"
python3 - "$seed" <<'EOF'
import struct, sys
d = sys.argv[1]
b = bytearray(open(d + "/calls.co", "rb").read())
off = 0x1900 + (0x2B70 - 0x2900)  # padding word after _Z9chain_topPKffij (llvm-objdump-22)
for name, w in [("pad-mov.co", 0xBE800080), ("pad-undec.co", 0xFFFFFFFF)]:
    c = bytearray(b); c[off:off + 4] = struct.pack("<I", w); open(d + "/" + name, "wb").write(c)
c = bytearray(b); c[4] = 1; open(d + "/elf32.co", "wb").write(c)
c = bytearray(b); c[0x12] = 40; open(d + "/arm.co", "wb").write(c)
EOF
env -u SQTT_INSTRUMENT_FUNCTIONS -u SQTT_INSTRUMENT_BARRIERS "$bin" "$seed/in.co" \
  -o "$seed/new.co" --functions 1 --barriers 1 >/dev/null 2>&1
before=$(cd "$seed" && find . -mindepth 1 | sort)

n=0
echo "| # | case | exit | first line | files left | panic |"
echo "|---|---|---|---|---|---|"
# c "ENV=..." ARGS... : one case; the first argument is an environment assignment or "-".
c() {
  local envset=$1; shift
  n=$((n + 1))
  local w; w=$(mktemp -d)
  cp -a "$seed/." "$w/"
  local out err code
  out=$(mktemp); err=$(mktemp)
  (
    cd "$w" || exit 99
    for v in $(env | grep -o '^SQTT_[A-Z_]*'); do unset "$v"; done
    [ "$envset" != "-" ] && export "${envset?}"
    timeout 60 "$bin" "$@" </dev/null >"$out" 2>"$err"
  )
  code=$?
  local first
  first=$(head -n1 "$err")
  [ -z "$first" ] && first="(stdout) $(head -n1 "$out")"
  first=$(printf '%s' "$first" | sed "s#$w/##g; s#$root/##g" | cut -c1-170 | sed 's/|/\\|/g')
  local after left
  after=$(cd "$w" && find . -mindepth 1 | sort)
  left=$(diff <(echo "$before") <(echo "$after") | sed -n 's#^> \./#+#p; s#^< \./#-#p' | tr '\n' ' ')
  [ -z "$left" ] && left="-"
  local panic=no
  grep -q panicked "$err" && panic=YES
  [ -c /dev/null ] || panic="/dev/null REPLACED"
  local shown="$*"
  [ "$envset" != "-" ] && shown="$envset $shown"
  shown=$(printf '%s' "$shown" | sed "s#$root/##g" | sed 's/|/\\|/g')
  echo "| $n | \`$shown\` | $code | $first | $left | $panic |"
  rm -rf "$w" "$out" "$err"
}
F="--functions 1"
# --- main job: arguments and inputs
c - 
c - in.co
c - -o o.co --functions 1
c - in.co -o o.co
c - missing.co -o o.co $F
c - d -o o.co $F
c - empty -o o.co $F
c - stub -o o.co $F
c - text.txt -o o.co $F
c - /bin/ls -o o.co $F
c - b.hipfb -o o.co $F
c - host.so -o o.co $F
c - trunc.co -o o.co $F
c - elf32.co -o o.co $F
c - arm.co -o o.co $F
c - pad-mov.co -o o.co $F
c - pad-undec.co -o o.co $F
c - new.co -o o.co $F
c - new.co -o o.co $F --force
# --- main job: outputs
c - in.co -o in.co $F
c - in.co -o ./in.co $F
c - in.co -o - $F
c - in.co -o d $F
c - in.co -o d/ $F
c - in.co -o nodir/o.co $F
c - in.co -o /dev/null $F
c - in.co -o /dev/full $F
c - in.co -o /proc/version $F
c - in.co -o o.co $F --report-json o.co
c - in.co -o o.co $F --report-json ./o.co
c - in.co -o o.co $F --report-json in.co
c - in.co -o o.co $F --report-json d
c - in.co -o o.co $F --report-json nodir/r.json
c - in.co -o o.co $F --report-json -
c - in.co -o /dev/null $F --report-json /dev/null
c - in.co -o o.co $F --report
# --- main job: flags
c - in.co -o o.co --functions 0
c - in.co -o o.co --functions abc
c - in.co -o o.co --functions cost:abc
c - in.co -o o.co --functions cost:5
c - in.co -o o.co --functions -1
c - in.co -o o.co --functions 99999999999
c - in.co -o o.co --barriers yes
c - in.co -o o.co --barriers true
c - in.co -o o.co --barriers 2
c - in.co -o o.co --barriers ""
c - in.co -o o.co --barriers 0
c - in.co -o o.co --memory 2:0
c - in.co -o o.co --memory 0:5
c - in.co -o o.co --memory 2
c - in.co -o o.co --memory a:b
c - in.co -o o.co --memory 2:5 --trace-addresses memory
c - in.co -o o.co --trace-addresses bogus
c - in.co -o o.co --trace-addresses lds
c - in.co -o o.co $F --mem-barrier bogus
c - in.co -o o.co $F --shader-clock-bits 30
c - in.co -o o.co $F --shader-clock-bits 8 --shader-clock-shift 30
c - in.co -o o.co $F --shader-clock-shift 3
c - in.co -o o.co $F --shader-clock-bits -1
c - in.co -o o.co $F --shader-clock-bits 8
c - in.co -o o.co $F --scope-cu 0
c - in.co -o o.co $F --scope-wave 0x
c - in.co -o o.co $F --scope-simd -1
c - in.co -o o.co $F --scope-wg 0x1FFFFFFFF
c - in.co -o o.co $F --offload-arch gfx1100
c - in.co -o o.co $F --strict
c - pad-mov.co -o o.co $F --strict
c - calls.co -o o.co --trace-addresses memory,lds --strict
c - in.co -o o.co --kernel-scopes
c - in.co -o o.co $F --bogus
c SQTT_INSTRUMENT_FUNCTIONS=abc in.co -o o.co
c SQTT_INSTRUMENT_FUNCTIONS=abc in.co -o o.co --functions 1
c SQTT_INSTRUMENT_BARRIERS=yes in.co -o o.co
c SQTT_SCOPE_CU=0 in.co -o o.co $F
# --- --fatbin
c - --fatbin
c - --fatbin b.hipfb
c - --fatbin stub -o o $F
c - --fatbin /bin/ls -o o $F
c - --fatbin text.txt -o o $F
c - --fatbin empty -o o $F
c - --fatbin b.hipfb -o d $F
c - --fatbin b.hipfb -o /dev/null $F
c - --fatbin b.hipfb -o b.hipfb $F
c - --fatbin b.hipfb -o o $F --report-json o
c - --fatbin trunc.hipfb -o o $F
c - --fatbin trunc.ccob -o o $F
c - --fatbin b.hipfb -o o $F --offload-arch gfx9999
c - --fatbin b.hipfb -o o $F --offload-arch bogus
c - --fatbin b.hipfb -o o $F --offload-arch gfx1201
c - --fatbin b.hipfb -o o $F --offload-arch gfx1100
c - --fatbin b.hipfb -o o $F --strict
c - --fatbin pad-mov.co -o o $F --strict
c - --fatbin pad-mov.co -o o $F
c - --fatbin c.hipfb -o o $F --report
c - --fatbin host.so -o o $F
c - --fatbin in.co -o o $F
# --- batch
c - batch
c - batch in.co
c - batch in.co -o in.co $F
c - batch in.co --check -o out $F
c - batch missing.co --check $F
c - batch d --check $F
c - batch text.txt --check $F
c - batch in.co trunc.co calls.co --check $F
c - batch in.co --check $F --baseline missing.json
c - batch in.co --check $F --baseline text.txt
c - batch in.co --check $F --update-baseline
c - batch in.co --check $F --max-overhead-growth -1
c - batch in.co --check $F --max-overhead-growth nan
c - batch "nomatch*.co" --check $F
c - batch in.co --check $F --report-json d
c - batch in.co pad-mov.co -o out $F --strict
c - batch in.co in.co --check $F
c - batch in.co --check $F --offload-arch bogus
c - batch in.co b.hipfb --check $F
# --- verify
c - verify in.co
c - verify missing.co new.co
c - verify in.co in.co
c - verify new.co in.co
c - verify in.co new.co
c - verify text.txt new.co
c - verify b.hipfb new.co
c - verify calls.co new.co
c - verify pad-mov.co pad-mov.co
# --- dis, funcmap, info, extract
c - dis b.hipfb
c - dis /bin/ls
c - dis in.co --symbol nope
c - dis in.co --mcpu gfx9999
c - dis trunc.co
c - funcmap in.co
c - funcmap b.hipfb
c - funcmap new.co
c - info stub
c - info /bin/ls
c - info b.hipfb
c - extract b.hipfb -o in.co
c - extract /bin/ls -o x
c - extract text.txt -o x
c - --version
c - frobnicate
