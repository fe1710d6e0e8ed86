//! The UI-directory JSON readers on arbitrary bytes: shaderdata (slice and streaming paths must
//! agree), occupancy, code.json (with its funcmap tables) and realtime.json. Property: no panic,
//! no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqtt_trace::json;

fuzz_target!(|data: &[u8]| {
    let mut a = Vec::new();
    let fa = json::read_shaderdata_slice(data, |r| a.push(r));
    let mut b = Vec::new();
    let fb = json::read_shaderdata(data, |r| b.push(r));
    assert_eq!(a, b);
    assert_eq!((fa.records, fa.malformed), (fb.records, fb.malformed));
    let _ = json::read_occupancy(data);
    if let Ok(cj) = json::read_code_json(data) {
        let _ = sqtt_trace::markers::rows_from_code_json(
            cj.sqtt_funcmap.as_ref(),
            cj.sqtt_funcmap_layout.as_ref(),
            cj.sqtt_funcmap_payloads.as_ref(),
        );
    }
    if let Ok(v) = json::read_value(data) {
        let _ = json::shader_clock_hz(&v);
    }
});
