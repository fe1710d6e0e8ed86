//! Hazard check of every output: each rewritten function is walked in address order through
//! [`amdgpu_isa::hazard::Scanner`] (rules per generation from LLVM 22's hazard recognizer and
//! gfx12 SGPR-hazard pass), and every violated rule whose producer or consumer is an inserted
//! instruction is a [`Check::Hazard`] finding naming both instructions and the rule. Pairs of two
//! original instructions are the compiler's business (inserted code only adds distance between
//! them and writes no register they use, `insn.rs`).
//!
//! Control flow is approximated by fall-through (a branch target is checked after the instruction
//! before it), plus one extra pass over every loop inside an inserted run (its back edge), so a
//! hazard from the end of a loop body to its head is seen.
//!
//! Only instructions near inserted code get every rule checked ([`near_inserted`]); elsewhere
//! the scanner follows the rules without a window from the registers decoded once per original
//! instruction ([`Scanner::check_push_state`]). The findings are the same as from a full scan.

use amdgpu_isa::hazard::{Fix, Need, Scanner, SgprUse, LOOKBACK};
use amdgpu_isa::Flow;

use crate::program::{Func, Program, Slot};
use crate::{Check, Finding, LaidOut as Item};
use rayon::prelude::*;

fn fix_text(fix: Fix) -> String {
    match fix {
        Fix::WaitStates(n) => format!("{n} wait state(s)"),
        Fix::DepCtr(d) => format!("a dependency-counter wait with {d:?} = 0"),
        Fix::Valus(n) => format!("{n} VALU instruction(s) or s_waitcnt_depctr va_vdst(0)"),
        Fix::VsCntZero => "s_waitcnt_vscnt null, 0".into(),
    }
}

/// Checks every function of `p`; appends findings.
/// Functions are scanned in parallel; findings keep the function order. A function without
/// inserted instructions cannot have a finding (every pair is original) and is not scanned.
pub(crate) fn check(p: &Program, findings: &mut Vec<Finding>) {
    let found: Vec<Vec<Finding>> = p
        .funcs
        .par_iter()
        .map(|f| {
            let mut found = Vec::new();
            if !f.inserted.is_empty() {
                check_func(p, f, &mut found);
            }
            found
        })
        .collect();
    findings.extend(found.into_iter().flatten());
}

/// Per position of `seq`: whether an inserted instruction lies within [`LOOKBACK`] positions
/// before or after it (prefix counts of inserted instructions).
///
/// Why checking every rule only there finds the same as checking everywhere: a finding needs an
/// inserted consumer or an inserted producer. The producer of a wait-state or VALU-count rule is
/// one of the [`LOOKBACK`] instructions pushed before its consumer (the scanner's history; it
/// covers the widest such rule, `MFMA_RESULT`'s 19 wait states from LLVM 22
/// `GCNHazardRecognizer::checkMAIVALUHazards`, `MaxLookAhead` 19, and the gfx11 rule's 6 VALUs;
/// `amdgpu_isa::hazard::LOOKBACK`). So an original consumer with no inserted instruction among the
/// [`LOOKBACK`] before it can only pair with original producers for those rules: nothing to
/// report, no need to check them (an original stretch far from inserted code was already
/// hazard-free, or not, in the input). Such a consumer `k` is "not needed"; a needed consumer `k`
/// has an inserted instruction in `[k - LOOKBACK, k]`, and every position in `[k - LOOKBACK, k]`
/// then has one within [`LOOKBACK`] before or after it, so the scanner's history at `k` holds the
/// same [`LOOKBACK`] fully pushed instructions as in a full scan. The rules without a window
/// (gfx10.1, gfx12) are followed and checked at every position either way.
///
/// Of those positions, one with no inserted instruction in `[k - LOOKBACK, k]` (inserted code
/// only after it) is pushed with its registers but its wait-state and VALU-count rules are not
/// checked ([`Near::Before`]): every producer in its history is original and it is original
/// itself, so whatever those rules find there is a pair of originals, which is never reported,
/// and their needs never change the scanner's state.
fn near_inserted(seq: &[Slot]) -> Vec<Near> {
    let mut before = Vec::with_capacity(seq.len() + 1);
    before.push(0usize);
    for s in seq {
        let inserted = matches!(s, Slot::Inserted(_));
        before.push(before.last().copied().unwrap_or(0) + usize::from(inserted));
    }
    (0..seq.len())
        .map(|j| {
            let lo = j.saturating_sub(LOOKBACK);
            let hi = (j + LOOKBACK + 1).min(seq.len());
            if before[j + 1] > before[lo] {
                Near::Checked
            } else if before[hi] > before[lo] {
                Near::Before
            } else {
                Near::Far
            }
        })
        .collect()
}

/// How [`check_func`] treats one position ([`near_inserted`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Near {
    /// An inserted instruction within [`LOOKBACK`] positions before it or at it: every rule.
    Checked,
    /// Inserted code within [`LOOKBACK`] positions after it only: pushed with its registers,
    /// the rules without a window checked.
    Before,
    /// No inserted instruction within [`LOOKBACK`] positions: the rules without a window only.
    Far,
}

fn check_func(p: &Program, f: &Func, findings: &mut Vec<Finding>) {
    // Positions as slots (the instructions stay where they are).
    let order = f.address_order();
    let full = near_inserted(&order);
    let item = |k: usize| f.laid_out(order[k]);
    let is_inserted = |k: usize| matches!(order[k], Slot::Inserted(_));
    let mut sc = Scanner::new(p.isa);
    let mut seen = std::collections::BTreeSet::new();
    let mut report = |k: usize, producer: Option<usize>, need: &Need, note: &str| {
        let c = &item(k);
        let prod = producer.filter(|&q| q < order.len()).map(item);
        let prod = prod.as_ref();
        if !c.inserted && !prod.is_some_and(|p| p.inserted) {
            return;
        }
        if !seen.insert((c.addr, need.rule.id)) {
            return;
        }
        let who = |i: &Item| {
            format!(
                "{} `{}` at {:#x}",
                if i.inserted { "inserted" } else { "original" },
                i.inst,
                i.addr
            )
        };
        let from = prod.map_or_else(|| "unknown earlier code".to_string(), who);
        findings.push(Finding {
            check: Check::Hazard,
            function: Some(f.name.clone()),
            original_address: c.original_address,
            new_address: Some(c.addr),
            message: format!(
                "hazard {}: {} → {} needs {}{} ({}; {})",
                need.rule.id,
                from,
                who(c),
                fix_text(need.rule.fix),
                note,
                need.rule.what,
                need.rule.source
            ),
        });
    };
    for k in 0..order.len() {
        let it = &item(k);
        let needs = if full[k] == Near::Checked {
            sc.check_push(&it.inst)
        } else if full[k] == Near::Before {
            sc.check_state_push(&it.inst)
        } else {
            let u = f.known_regs(order[k]).map_or_else(
                || {
                    let (r, w) = it.inst.reads_writes();
                    SgprUse::of(&r, &w)
                },
                |r| r.sgpr_use(),
            );
            sc.check_push_state(&it.inst, u)
        };
        for need in needs {
            report(k, need.producer, &need, "");
        }
        // A loop inside an inserted run: walk its body once more after the back edge.
        if !it.inserted || !matches!(it.inst.flow(), Flow::Branch { .. }) {
            continue;
        }
        let Some(target) = it.inst.branch_target(it.addr).filter(|t| *t < it.addr) else {
            continue;
        };
        // `order` is sorted by address: the first instruction at `target`.
        let head = order.partition_point(|&x| f.laid_out(x).addr < target);
        if head >= order.len() || item(head).addr != target {
            continue;
        }
        if !(head..k).all(is_inserted) {
            continue;
        }
        let mut again = sc.clone();
        let base = again.position();
        // Positions after `base` are the second pass over `head..=k`.
        let map = |q: usize| if q >= base { head + (q - base) } else { q };
        for j in head..=k {
            let body = item(j);
            for need in again.check(&body.inst) {
                report(j, need.producer.map(map), &need, " (loop back edge)");
            }
            again.push(&body.inst);
        }
    }
}
