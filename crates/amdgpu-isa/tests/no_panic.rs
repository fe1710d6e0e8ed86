//! Robustness: arbitrary bytes and every truncation of plausible instructions give a typed
//! `DecodeError` (with the right offset) or an instruction, never a panic; `decode_iter` agrees
//! with `decode_all` on every input. No LLVM needed.
mod common;

use amdgpu_isa::{
    decode, decode_all, decode_iter, testing, DecodeError, DecodeErrorKind, Instruction, Target,
};

/// `decode_iter` yields exactly `decode_all`'s instructions, then its error (if any) at the
/// same offset, then nothing; `offset()` tracks the consumed bytes and `size_hint` holds.
fn check_iter_matches_all(bytes: &[u8], t: Target, all: &Result<Vec<Instruction>, DecodeError>) {
    let mut it = decode_iter(bytes, t);
    let mut ok = Vec::new();
    let mut err = None;
    loop {
        let (lo, hi) = it.size_hint();
        let before = it.offset();
        let Some(r) = it.next() else {
            assert_eq!(lo, 0);
            break;
        };
        assert!(lo >= 1 && hi.is_some_and(|h| h >= 1));
        match r {
            Ok(i) => {
                assert_eq!(i.bytes(), &bytes[before..before + i.len()]);
                assert_eq!(it.offset(), before + i.len());
                ok.push(i);
            }
            Err(e) => {
                assert_eq!(e.offset, before);
                assert_eq!(it.offset(), bytes.len());
                err = Some(e);
            }
        }
    }
    assert!(it.next().is_none(), "fused after the end");
    match all {
        Ok(v) => assert!(err.is_none() && ok == *v),
        Err(e) => {
            assert_eq!(err.as_ref(), Some(e));
            assert_eq!(ok.iter().map(Instruction::len).sum::<usize>(), e.offset);
        }
    }
}

#[test]
fn random_and_truncated_inputs_never_panic() {
    let mut next = common::xorshift(0x2545_f491_4f6c_dd1d);
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
            let all = decode_all(&bytes, t);
            if let Err(e) = &all {
                assert!(e.offset < bytes.len());
            }
            check_iter_matches_all(&bytes, t, &all);
        }
    }
}
