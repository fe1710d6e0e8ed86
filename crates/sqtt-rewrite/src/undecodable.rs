//! Sites inside functions whose code does not all decode.
//!
//! Such a function is left alone and kept at its address ([`crate::verbatim`]), and the
//! analysis has no instructions for it, so its barriers, memory operations and scope sites
//! would be missing from the coverage counts altogether (found by the session-23 fresh tester:
//! coverage said 100 % with a kernel's barriers unseen). Here they are found in a copy of its
//! code in which every word that does not start a decodable instruction is replaced by
//! `s_nop 0`, decoding on from the next word as `llvm-objdump` does after a word it prints as
//! `.long`; the copy is analysed on its own, so its branches, exits and blocks are those of the
//! code that decodes. The sites found are skipped with the function's reason: they are counted,
//! never instrumented.

use crate::analysis::{analyse, Program};
use crate::config::Options;
use crate::plan::{collect_sites, Site, Skipped};
use amdgpu_isa::{build, decode_iter, Target};

/// `bytes` (code from an instruction boundary) with every word that does not start a
/// decodable instruction replaced by `filler`, decoding on from the next word; a trailing piece
/// shorter than a word is dropped. Returns the new bytes and how many words were replaced.
pub fn fill_undecodable(bytes: &[u8], target: Target, filler: [u8; 4]) -> (Vec<u8>, usize) {
    let mut out = bytes[..bytes.len() & !3].to_vec();
    let (mut off, mut replaced) = (0usize, 0usize);
    while off < out.len() {
        match decode_iter(&out[off..], target).next() {
            Some(Ok(i)) => off += i.len(),
            _ => {
                out[off..off + 4].copy_from_slice(&filler);
                replaced += 1;
                off += 4;
            }
        }
    }
    (out, replaced)
}

/// The sites `opts` asks for in function `fi` of `prog`, which does not decode
/// ([`crate::analysis::Func::does_not_decode`]), as [`collect_sites`] and
/// [`crate::trace::trace_sites`] find them in its code with the undecodable words replaced
/// (module documentation). `text` is `.text`'s contents from `prog.text_addr`; `wave` the
/// object's wave size for address tracing. Each site names function `fi`, for
/// [`crate::verbatim::skip_left_alone`] to skip with the function's reason; the instruction
/// indices of the sites are those of the copy, not of `prog`. Inlined functions (DWARF) inside
/// it are not counted. Nothing when the function's range is outside `text`.
pub fn sites_of(
    prog: &Program,
    fi: usize,
    text: &[u8],
    opts: &Options,
    wave: Option<u32>,
) -> (Vec<Site>, Vec<Skipped>) {
    let f = &prog.funcs[fi];
    let range = f.spec.start.checked_sub(prog.text_addr).and_then(|lo| {
        let hi = f.spec.end.checked_sub(prog.text_addr)?;
        text.get(usize::try_from(lo).ok()?..usize::try_from(hi).ok()?)
    });
    let (Some(bytes), Ok(nop)) = (range, build::s_nop(prog.target, 0)) else {
        return (Vec::new(), Vec::new());
    };
    let mut filler = [0u8; 4];
    filler.copy_from_slice(&nop.bytes()[..4]);
    let (code, _) = fill_undecodable(bytes, prog.target, filler);
    let copy = analyse(prog.target, &code, f.spec.start, vec![f.spec.clone()]);
    if copy.funcs.iter().any(|g| g.does_not_decode()) {
        return (Vec::new(), Vec::new());
    }
    let (mut sites, mut skipped) = collect_sites(&copy, &[true], opts);
    if let Some(want) = opts.trace_addresses {
        let (s, k, _) = crate::trace::trace_sites(&copy, want, wave);
        sites.extend(s);
        skipped.extend(k);
    }
    for s in &mut sites {
        s.func = fi;
    }
    (sites, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against llvm-objdump's rule: an undecodable word is skipped as one word and decoding
    /// goes on after it; a trailing half word is dropped.
    #[test]
    fn undecodable_words_are_replaced_one_at_a_time() {
        let t = Target::from_name("gfx1100").unwrap();
        // s_barrier on gfx1100 (llvm-mc-22 -show-encoding).
        let barrier = [0x00, 0x00, 0xbd, 0xbf];
        let nop = build::s_nop(t, 0).unwrap();
        let mut filler = [0u8; 4];
        filler.copy_from_slice(nop.bytes());
        let mut code = barrier.to_vec();
        code.extend_from_slice(&0xd7ff_ffffu32.to_le_bytes()); // unknown VOP3 opcode 1023
        code.extend_from_slice(&barrier);
        code.extend_from_slice(&[0xff, 0xff]);
        let (out, n) = fill_undecodable(&code, t, filler);
        assert_eq!(n, 1);
        assert_eq!(out.len(), 12);
        assert_eq!(&out[4..8], nop.bytes());
        assert_eq!(&out[8..12], &barrier);
        // Code that decodes is unchanged.
        let (same, none) = fill_undecodable(&out, t, filler);
        assert_eq!((same, none), (out.clone(), 0));
    }
}
