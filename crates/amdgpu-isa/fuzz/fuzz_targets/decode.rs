//! Fuzz target: `decode_all` and every accessor on arbitrary bytes, for every target.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, code)) = data.split_first() else { return };
    let targets: Vec<_> = amdgpu_isa::Target::all().collect();
    let t = targets[usize::from(sel) % targets.len()];
    if let Ok(v) = amdgpu_isa::decode_all(code, t) {
        for i in v {
            let _ = (i.to_string(), i.reads(), i.writes(), i.memory(), i.flow(), i.literal(), i.branch_target(0), i.special());
        }
    }
});
