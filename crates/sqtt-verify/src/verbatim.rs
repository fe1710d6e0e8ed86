//! Functions that must be copied verbatim: execution can fall off the end of their original body
//! (the last instruction falls through: no `s_endpgm`, return, jump or unconditional branch), so
//! what runs after it is whatever bytes followed it in `.text`. Inserting code into such a
//! function, or changing what follows it, changes what runs. Real case: rocPRIM "trampoline"
//! kernels compiled out for other targets (one `s_setreg_imm32_b32`, then zero padding).
//!
//! Rule checked here (the rewriter's "left alone" policy, stated independently): the rewritten
//! copy of such a function, from its new entry, is byte-identical to the original from its entry
//! up to the next function (or the end of `.text`), and the function that follows it in the
//! rewritten `.text` is the one that followed it in the original (only `s_nop 0` padding may be
//! in between, which the alignment check enforces). Its PC-relative fields are therefore
//! unchanged: the branch check then proves that none of them leaves the function.

use amdgpu_isa::{Flow, Instruction, Special};

use crate::code::Program;
use crate::{Check, Finding};

/// Whether execution can continue past the last instruction of `body` (instruction flow as in
/// the ISA manuals: fall-through, calls and traps return to the next instruction; a conditional
/// branch falls through when not taken); `s_code_end` is padding, not code.
pub(crate) fn falls_off(body: &[(u64, Instruction)]) -> bool {
    body.last().is_some_and(|(_, i)| {
        i.special() != Special::CodeEnd
            && matches!(
                i.flow(),
                Flow::Fallthrough | Flow::Call | Flow::Trap | Flow::Branch { conditional: true }
            )
    })
}

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
        if let Some(k) = (0..old.len()).find(|&k| cur.get(k) != old.get(k)) {
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
