//! Fuzz target: `decode_all` and every accessor on arbitrary bytes, under EVERY target (all
//! families: gfx9, gfx10, gfx11, gfx12, gfx1250, and the real-true16 mode where it exists).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for base in amdgpu_isa::Target::all() {
        for t in [base, base.with_true16(!base.true16())] {
            match amdgpu_isa::decode_all(data, t) {
                Ok(v) => {
                    for i in v {
                        let _ = (
                            i.to_string(),
                            i.reads(),
                            i.writes(),
                            i.memory(),
                            i.flow(),
                            i.literal(),
                            i.branch_target(0),
                            i.special(),
                        );
                    }
                }
                Err(e) => assert!(e.offset < data.len()),
            }
        }
    }
});
