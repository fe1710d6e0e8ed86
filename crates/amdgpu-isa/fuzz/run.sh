#!/bin/sh
# Runs the amdgpu-isa fuzz target `decode` (every input decoded under every target, so one run
# covers all families) for SECONDS (default 600), seeded with words from the fixtures.
# Usage: crates/amdgpu-isa/fuzz/run.sh [SECONDS]
# Needs cargo-fuzz (`cargo install cargo-fuzz`); nightly features come from RUSTC_BOOTSTRAP=1.
set -eu
secs=${1:-600}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/corpus/decode"
cd "$here"
RUSTC_BOOTSTRAP=1 exec cargo fuzz run decode corpus/decode -- \
  -max_total_time="$secs" -rss_limit_mb=2048 -max_len=256 -print_final_stats=1
