#!/bin/sh
# Runs the sqtt-trace JSON-reader fuzz target for SECONDS (default 600), seeded with small
# UI-directory JSON files written by the tests' generator. Usage: crates/sqtt-trace/fuzz/run.sh [SECONDS]
# Needs cargo-fuzz (`cargo install cargo-fuzz`); nightly features come from RUSTC_BOOTSTRAP=1.
set -eu
secs=${1:-600}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/corpus/json_reader" "$here/seeds"
cd "$here"
RUSTC_BOOTSTRAP=1 exec cargo fuzz run json_reader corpus/json_reader seeds -- \
  -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
