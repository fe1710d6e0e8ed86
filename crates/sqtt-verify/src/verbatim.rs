//! Functions that must be copied verbatim: execution can fall off the end of their original body
//! (the last instruction falls through: no `s_endpgm`, return, jump or unconditional branch), so
//! what runs after it is whatever bytes followed it in `.text`. Inserting code into such a
//! function, or changing what follows it, changes what runs. Real case: rocPRIM "trampoline"
//! kernels compiled out for other targets (one `s_setreg_imm32_b32`, then zero padding).
//!
//! Rule checked here (the rewriter's "left alone" policy, stated independently): the rewritten
//! copy of such a function, from its new entry, is byte-identical to the original from its entry
//! up to the next function (or the end of `.text`), except for the PC-relative fields of its own
//! instructions (the simm16 of a direct branch or call, the literal of an add of an `s_getpc`
//! address builder, the literal of `s_add_pc_i64`): a function that moves as one block keeps
//! the fields that stay inside it, and those that reach outside it (a `.rodata` message, another
//! function) are re-aimed; the branch check proves every such field reaches its mapped target.
//! Any other changed byte is a finding. The function that follows it in the rewritten `.text` is
//! the one that followed it in the original (only `s_nop 0` padding may be in between, which the
//! alignment check enforces).

use std::collections::BTreeSet;

use crate::program::{Func, Program};
use crate::{Check, Finding};

/// Checks every function whose execution can fall off its end (see the module docs).
pub(crate) fn check(p: &Program, findings: &mut Vec<Finding>) {
    let mut by_new: Vec<(u64, usize)> = p
        .funcs
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.new_start.map(|n| (n, i)))
        .collect();
    by_new.sort_unstable();
    for (fi, f) in p.funcs.iter().enumerate() {
        let (Some(gap), Some(new)) = (f.falls_off, f.new_start) else {
            continue;
        };
        // Kept in place: what follows it is the kept `.text`, the original itself.
        if f.kept_in_place {
            continue;
        }
        let finding = |n: Option<u64>, message: String| Finding {
            check: Check::Verbatim,
            function: Some(f.name.clone()),
            original_address: Some(f.orig_start),
            new_address: n,
            message,
        };
        let len = f.orig_end - f.orig_start + gap;
        let old = p.otext.slice(f.orig_start, f.orig_start + len);
        let cur = p.ntext.slice(new, new.saturating_add(len));
        if let Some(k) = first_change(f, old, cur) {
            findings.push(finding(
                Some(new + k as u64),
                format!(
                    "execution falls off the end of this function, so it must be copied verbatim with the {gap} bytes after it; byte {k:#x} of {len:#x} differs"
                ),
            ));
            continue;
        }
        let next_orig = p.funcs.get(fi + 1).map(|g| g.name.as_str());
        // `by_new` is sorted by (address, index): a binary search, not a scan per function.
        let pos = by_new.binary_search(&(new, fi)).ok();
        let next_new = pos
            .and_then(|k| by_new.get(k + 1))
            .map(|&(_, i)| p.funcs[i].name.as_str());
        if next_orig != next_new {
            findings.push(finding(
                Some(new),
                format!(
                    "execution falls off the end of this function into {}, but the rewritten code falls into {}",
                    next_orig.unwrap_or("the end of .text"),
                    next_new.unwrap_or("the end of .text")
                ),
            ));
        }
    }
}

/// The offset of the first byte of `cur` (the rewritten copy) that differs from `old` (the
/// original function and the bytes after it, from its entry) and is not explained by a
/// PC-relative field of an original instruction at the same offset; `None` when there is none.
/// An instruction may differ only where the alignment check's equality up to PC-relative fields
/// allows ([`crate::program::same`]): a direct branch or call in its simm16, an add of a recognised
/// `s_getpc` builder or `s_add_pc_i64` in its literal.
fn first_change(f: &Func, old: &[u8], cur: &[u8]) -> Option<usize> {
    let adds: BTreeSet<usize> = f
        .builders
        .iter()
        .flat_map(|b| b.parts.iter().copied())
        .collect();
    let mut from = 0usize;
    loop {
        let k = from + (from..old.len()).position(|k| cur.get(k) != old.get(k))?;
        let at = f.orig_start + k as u64;
        // The original instruction holding byte k (instructions are in address order).
        let idx = f.orig.partition_point(|o| o.addr <= at).checked_sub(1)?;
        let o = &f.orig[idx];
        let oi = f.inst(o);
        let (lo, hi) = (
            (o.addr - f.orig_start) as usize,
            (o.addr - f.orig_start) as usize + oi.len(),
        );
        if k >= hi {
            return Some(k); // past the last instruction: the bytes after the function
        }
        let explained = cur
            .get(lo..)
            .and_then(|b| amdgpu_isa::decode(b, oi.target()).ok())
            .is_some_and(|ni| crate::program::same(&oi, &ni, adds.contains(&idx)));
        if !explained {
            return Some(k);
        }
        from = hi;
    }
}
