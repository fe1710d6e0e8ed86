#!/usr/bin/env bash
# Runs the large-data test that `cargo test` skips (it is #[ignore]d, never silently passed):
# crates/hsaco/tests/real_libraries.rs compares our bundle listing of two real libraries
# (PyPI onnxruntime-rocm, Debian librocsparse0; about 1.8 GB) with llvm-objdump-22 --offloading.
# Needs the libraries under $SQTT_REAL_DIR (default: <repository>/target/real, filled by
# tools/fetch_real.sh) and LLVM 22; fails, naming what is missing, when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export SQTT_REAL_DIR=${SQTT_REAL_DIR:-$PWD/target/real}
exec nice cargo test --release -p hsaco --test real_libraries -- --ignored --nocapture "$@"
