//! `Instruction::shape` / `Instruction::with_bytes`: an instruction rebuilt from its shape and
//! the bytes of any instruction of that shape is that instruction (the verifier stores one
//! instruction per distinct shape and only offsets per instruction).
use std::collections::HashMap;

use amdgpu_isa::{decode, Instruction, Shape, Target};

/// Every field the crate exposes that depends on more than the bytes, and the bytes.
fn facts(i: &Instruction) -> (Shape, Vec<u8>, String, &'static str, usize, Option<u64>) {
    (
        i.shape(),
        i.bytes().to_vec(),
        i.to_string(),
        i.llvm_opcode_name(),
        i.len(),
        i.literal(),
    )
}

#[test]
fn rebuilt_instructions_equal_their_decode() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in [
        "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1201", "gfx1250",
    ] {
        let t = Target::from_name(name).unwrap();
        let mut by_shape: HashMap<Shape, Instruction> = HashMap::new();
        let mut decoded = 0;
        for _ in 0..20_000 {
            let mut b = [0u8; 24];
            for c in b.chunks_mut(8) {
                c.copy_from_slice(&next().to_le_bytes());
            }
            let Ok(i) = decode(&b, t) else { continue };
            decoded += 1;
            assert_eq!(facts(&i.with_bytes(&b)), facts(&i), "{name}: {i}");
            let first = *by_shape.entry(i.shape()).or_insert(i);
            assert_eq!(
                facts(&first.with_bytes(&b)),
                facts(&i),
                "{name}: {first} -> {i}"
            );
        }
        assert!(
            decoded > 1000 && by_shape.len() > 50,
            "{name}: {decoded} decoded"
        );
    }
}
