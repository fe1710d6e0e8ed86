//! Robustness: arbitrary bytes and every truncation of plausible instructions give a typed
//! `DecodeError` (with the right offset) or an instruction, never a panic. No LLVM needed.
use amdgpu_isa::{decode, decode_all, testing, DecodeErrorKind, Target};

#[test]
fn random_and_truncated_inputs_never_panic() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    for t in Target::all() {
        let space = testing::opcode_words(t);
        for _ in 0..3000 {
            let (w, m) = space[next() as usize % space.len()];
            let words = [w | (next() & !m), next(), next(), next(), next(), next()];
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            for n in 0..=bytes.len() {
                match decode(&bytes[..n], t) {
                    Ok(i) => {
                        assert!(i.len() <= n && i.len() % 4 == 0 && i.len() >= 4);
                        assert_eq!(i.bytes(), &bytes[..i.len()]);
                        let _ = (
                            i.to_string(),
                            i.reads(),
                            i.writes(),
                            i.memory(),
                            i.flow(),
                            i.literal(),
                            i.branch_target(0),
                        );
                    }
                    Err(e) => {
                        assert_eq!(e.offset, 0);
                        if let DecodeErrorKind::Truncated { needed, available } = e.kind {
                            assert!(needed > available && available == n);
                        }
                    }
                }
            }
            if let Err(e) = decode_all(&bytes, t) {
                assert!(e.offset < bytes.len());
            }
        }
    }
}
