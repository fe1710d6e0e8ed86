//! Fuzz target: offload bundle parsing (plain, CCOB v1/v2/v3 with zlib and zstd) through
//! `hsaco::bundle::parse_all`, `parse_one` and `decompress_ccob`, with a 64 MiB decompression
//! limit so a lying size cannot exhaust memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Decompression cap for the fuzzer (bytes).
const LIMIT: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = hsaco::bundle::parse_all(data, 0, LIMIT);
    let _ = hsaco::bundle::parse_one(data, 0, LIMIT);
    let _ = hsaco::bundle::parse_plain(data, 0);
    if data.starts_with(hsaco::bundle::CCOB_MAGIC) {
        let _ = hsaco::bundle::decompress_ccob(data, 0, LIMIT);
    }
});
