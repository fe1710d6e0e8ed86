//! `Instruction::shape` / `Instruction::with_bytes`: an instruction rebuilt from its shape and
//! the bytes of any instruction of that shape is that instruction (the verifier stores one
//! instruction per distinct shape and only offsets per instruction).
mod common;

use std::collections::HashMap;

use amdgpu_isa::{decode, testing, Instruction, Shape, Target};

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

/// Every opcode of every target with random operand bits: the rebuilt instruction equals the
/// decode, from its own shape and from the first decoded instruction of the same shape.
#[test]
fn rebuilt_instructions_equal_their_decode() {
    let mut next = common::xorshift(0x9e37_79b9_7f4a_7c15);
    for t in Target::all() {
        let mut by_shape: HashMap<Shape, Instruction> = HashMap::new();
        let space = testing::opcode_words(t);
        for _ in 0..4000 {
            let (w, m) = space[next() as usize % space.len()];
            let words = [w | (next() & !m), next(), next(), next(), next(), next()];
            let b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let Ok(i) = decode(&b, t) else { continue };
            assert_eq!(facts(&i.with_bytes(&b)), facts(&i), "{t:?}: {i}");
            let first = *by_shape.entry(i.shape()).or_insert(i);
            assert_eq!(
                facts(&first.with_bytes(&b)),
                facts(&i),
                "{t:?}: {first} -> {i}"
            );
        }
        assert!(by_shape.len() > 100, "{t:?}: {} shapes", by_shape.len());
    }
}
