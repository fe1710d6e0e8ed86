#!/bin/sh
# Runs one hsaco fuzz target for SECONDS (default 600) with seeds from fixtures/ and
# fixtures/corpus. Usage: crates/hsaco/fuzz/run.sh code_object|bundle|host [SECONDS]
# Needs cargo-fuzz (`cargo install cargo-fuzz`); nightly features come from RUSTC_BOOTSTRAP=1.
set -eu
target=$1
secs=${2:-600}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
shared="$root/fixtures/corpus"
case $target in
  code_object) seeds="$root/fixtures/objects $shared/compiled $shared/triton" ;;
  bundle) seeds="$root/fixtures/bundles $shared/bundles" ;;
  host) seeds="$root/fixtures/hosts $shared/hosts $root/fixtures/bundles" ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac
existing=""
for d in $seeds; do [ -d "$d" ] && existing="$existing $d"; done
mkdir -p "$here/corpus/$target"
cd "$here"
# shellcheck disable=SC2086
RUSTC_BOOTSTRAP=1 exec cargo fuzz run "$target" "corpus/$target" $existing -- \
  -max_total_time="$secs" -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1
