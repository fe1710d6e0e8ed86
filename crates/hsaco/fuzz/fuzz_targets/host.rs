//! Fuzz target: host ELF discovery (`hsaco::host::find_fatbins`) and the any-input entry point
//! `hsaco::container::open`, with a 64 MiB decompression limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Decompression cap for the fuzzer (bytes).
const LIMIT: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = hsaco::host::find_fatbins(data, LIMIT);
    let _ = hsaco::container::open(data, LIMIT);
});
