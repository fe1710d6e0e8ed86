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

use amdgpu_isa::hazard::{Fix, Need, Scanner};
use amdgpu_isa::Flow;

use crate::code::{Func, Program};
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

fn check_func(p: &Program, f: &Func, findings: &mut Vec<Finding>) {
    let seq = f.in_address_order();
    let mut sc = Scanner::new(p.isa);
    let mut seen = std::collections::BTreeSet::new();
    let mut report = |k: usize, producer: Option<usize>, need: &Need, note: &str| {
        let c = &seq[k];
        let prod = producer.and_then(|q| seq.get(q));
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
    for (k, it) in seq.iter().enumerate() {
        for need in sc.check_push(&it.inst) {
            report(k, need.producer, &need, "");
        }
        // A loop inside an inserted run: walk its body once more after the back edge.
        if !it.inserted || !matches!(it.inst.flow(), Flow::Branch { .. }) {
            continue;
        }
        let Some(target) = it.inst.branch_target(it.addr).filter(|t| *t < it.addr) else {
            continue;
        };
        let Some(head) = seq.iter().position(|x| x.addr == target) else {
            continue;
        };
        if !seq[head..k].iter().all(|x| x.inserted) {
            continue;
        }
        let mut again = sc.clone();
        let base = again.position();
        // Positions after `base` are the second pass over `head..=k`.
        let map = |q: usize| if q >= base { head + (q - base) } else { q };
        for (j, body) in seq.iter().enumerate().take(k + 1).skip(head) {
            for need in again.check(&body.inst) {
                report(j, need.producer.map(map), &need, " (loop back edge)");
            }
            again.push(&body.inst);
        }
    }
}
