//! Calls of device functions that never return, stated independently of the rewriter: a
//! function whose last instruction is a call does not fall off its end when the callee never
//! returns (ggml's compiled-out kernels end in a call of `no_device_code`, which ends in
//! `s_trap 2`). Such a function is checked as an ordinary one, not as one that must be copied
//! verbatim with the bytes after it ([`crate::verbatim`]).
//!
//! A device function never returns when its original body has no instruction that can return
//! to its caller: no `s_rfe`-style return, no indirect jump except a tail call whose target an
//! address builder on a straight line proves to be the entry of another function that never
//! returns, and no fall-through off its end except after a last call of a function that never
//! returns. The greatest fixed point over the call graph is taken (functions that only call each
//! other never return). Kernels are entered by a dispatch, never called: not candidates.

use amdgpu_isa::{Flow, Instruction, Special};
use std::collections::HashMap;

use crate::program::Func;
use crate::FunctionKind;

/// How the original body of one function can end.
struct Ending {
    /// Some instruction can return to the caller, or execution can fall off the end other
    /// than after a last call.
    returns: bool,
    /// Tail calls: the function indices they jump to (`None`: an entry not proven).
    tails: Vec<Option<usize>>,
    /// Execution falls off the end after a last call: its callee (`None`: not proven).
    last_call: Option<Option<usize>>,
}

/// The callee of the call or jump at original instruction `k`: its direct target, or the
/// target of an address builder of the pair it reads ([`crate::program::builder_target`]), when
/// that is the entry of a function.
fn target(f: &Func, k: usize, starts: &HashMap<u64, usize>) -> Option<usize> {
    let o = f.orig.get(k)?;
    let i = f.inst(o);
    let t = match i.branch_target(o.addr) {
        Some(t) => Some(t),
        None => i
            .reads()
            .max_sgpr()
            .and_then(|r| crate::program::builder_target(f, k, r.saturating_sub(1))),
    };
    t.and_then(|t| starts.get(&t).copied())
}

fn ending(f: &Func, fi: usize, starts: &HashMap<u64, usize>) -> Ending {
    let mut e = Ending {
        returns: false,
        tails: Vec::new(),
        last_call: None,
    };
    let n = f.orig.len();
    for (k, o) in f.orig.iter().enumerate() {
        let i = f.inst(o);
        match i.flow() {
            Flow::Return => e.returns = true,
            Flow::IndirectJump if i.special() == Special::AddPcI64 => {}
            Flow::IndirectJump => match target(f, k, starts) {
                Some(g) if g != fi => e.tails.push(Some(g)),
                _ => e.returns = true,
            },
            _ => {}
        }
        if k + 1 == n && f.falls_off.is_some() {
            if i.flow() == Flow::Call {
                e.last_call = Some(target(f, k, starts));
            } else {
                e.returns = true;
            }
        }
    }
    e
}

/// Indices of the functions that fall off their end after a last call of a function that never
/// returns (see the module docs), ascending.
pub(crate) fn ending_in_noreturn_calls(funcs: &[Func]) -> Vec<usize> {
    let starts: HashMap<u64, usize> = funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.orig_start, i))
        .collect();
    let ends: Vec<Ending> = funcs
        .iter()
        .enumerate()
        .map(|(fi, f)| ending(f, fi, &starts))
        .collect();
    let mut never: Vec<bool> = funcs
        .iter()
        .zip(&ends)
        .map(|(f, e)| f.kind == FunctionKind::Function && !e.returns)
        .collect();
    loop {
        let mut changed = false;
        for (fi, e) in ends.iter().enumerate() {
            if !never[fi] {
                continue;
            }
            let tails = e.tails.iter().all(|g| g.is_some_and(|g| never[g]));
            let last = match e.last_call {
                None => true,
                Some(g) => g.is_some_and(|g| never[g]),
            };
            if !(tails && last) {
                never[fi] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    ends.iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.last_call, Some(Some(g)) if never[g]))
        .map(|(fi, _)| fi)
        .collect()
}

/// Whether `inst` is `s_trap 2`: trap ID 2 (`llvm.trap`) aborts the queue (AMDGPUUsage, "Trap
/// Handler ABI"), so execution does not fall off the end of a function whose last instruction
/// it is, as with `s_endpgm`. Other trap IDs resume at the next instruction. The trap ID is the
/// low 8 bits of simm16 (ISA manuals, "S_TRAP").
pub(crate) fn aborts(inst: &Instruction) -> bool {
    inst.flow() == Flow::Trap && inst.field("simm16").map(|v| v & 0xff) == Some(2)
}

/// Whether execution can continue past the last instruction of `body` (instruction flow as in
/// the ISA manuals: fall-through, calls and traps other than `s_trap 2` ([`aborts`]) return to
/// the next instruction; a conditional branch falls through when not taken); `s_code_end` is
/// padding, not code.
pub(crate) fn falls_off(body: &[(u64, Instruction)]) -> bool {
    body.last().is_some_and(|(_, i)| {
        i.special() != Special::CodeEnd
            && !aborts(i)
            && matches!(
                i.flow(),
                Flow::Fallthrough | Flow::Call | Flow::Trap | Flow::Branch { conditional: true }
            )
    })
}
