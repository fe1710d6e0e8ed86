//! The scope-filter flag SGPRs (spec "Scope filtering"): which SGPR each function's guards
//! test, and that every kernel entry computes it from the hardware-ID registers.

use std::collections::BTreeSet;

use amdgpu_isa::{Instruction, RegSet};
use rayon::prelude::*;

use super::cfg::entry_index;
use crate::program::insn::{region_class, scalar_const, Region};
use crate::program::{NInst, Program, Regs};
use crate::{Check, Finding};

/// SGPR numbers in a register set.
pub(super) fn sgpr_numbers(set: &RegSet) -> impl Iterator<Item = u16> + '_ {
    (0..sqtt_interp::NUM_SGPRS as u16).filter(|r| set.contains_sgpr(*r))
}

/// The SGPRs the scope guards of `run` test: `s_cmp_lg_u32 sF, 0` directly followed by
/// `s_cbranch_scc0` (spec "Scope filtering": the flag computed once at kernel entry), on an
/// SGPR the run has not written before unless `entry` (a kernel's entry run computes the flag and
/// may guard a marker right after).
pub(super) fn guard_reads<'r>(
    run: &[NInst],
    regs: impl Iterator<Item = &'r Regs>,
    entry: bool,
) -> BTreeSet<u16> {
    let mut written: u128 = 0;
    let mut out = BTreeSet::new();
    for (i, (n, r)) in run.iter().zip(regs).enumerate() {
        let guard = n.inst.mnemonic() == "s_cmp_lg_u32"
            && scalar_const(&n.inst, "ssrc1") == Some(0)
            && run
                .get(i + 1)
                .is_some_and(|b| matches!(b.inst.mnemonic(), "s_cbranch_scc0" | "s_cbranch_scc1"));
        if guard {
            // The lowest SGPR s0..s105 it reads.
            let reads = r.sgpr_reads & crate::program::regs::EVERY;
            if reads != 0 {
                let g = reads.trailing_zeros() as u16;
                if entry || written >> g & 1 == 0 {
                    out.insert(g);
                }
            }
        }
        written |= r.sgpr_writes;
    }
    out
}

pub(super) fn is_hw_id_read(i: &Instruction) -> bool {
    matches!(region_class(i), Some(Region::Getreg(id)) if matches!(id, 4 | 23 | 24))
}

/// The scope-filter flag of each function: the SGPR its runs' guards test ([`guard_reads`]), one
/// per function. For every kernel that reaches a function with flag sF: the kernel's entry run
/// reads a hardware-ID register and writes sF, and no original instruction of any function the
/// kernel reaches reads or writes sF (its value must survive from the entry to every marker).
/// The same "untouched" rule holds for a flag of the object that a kernel's entry run computes
/// although nothing the kernel reaches tests it (a call graph whose guarded sites were all
/// skipped).
/// `reach[k]`: functions kernel `k` reaches, ascending (`None` for device functions).
/// Returns the flags, and per function the flags its entry run may write (empty for device
/// functions).
pub(super) fn scope_flags(
    p: &Program,
    reach: &[Option<Vec<usize>>],
    findings: &mut Vec<Finding>,
) -> (Vec<Option<u16>>, Vec<BTreeSet<u16>>) {
    // Per function in parallel; findings keep the function order.
    let per: Vec<(Option<u16>, Option<Finding>)> = p
        .funcs
        .par_iter()
        .map(|f| {
            let entry = entry_index(f);
            let mut tested = BTreeSet::new();
            for k in 0..f.orig.len() {
                let run = f.run(k);
                if run.is_empty() {
                    continue;
                }
                let kernel_entry = k == entry && f.kind == crate::FunctionKind::Kernel;
                tested.extend(guard_reads(
                    f.inserted.get(run.clone()).unwrap_or_default(),
                    f.inserted_regs(run),
                    kernel_entry,
                ));
            }
            let more = (tested.len() > 1).then(|| {
                f.finding(
                    Check::Markers,
                    Some(f.orig_start),
                    f.new_start,
                    format!("scope guards test more than one flag: {tested:?}"),
                )
            });
            (tested.first().copied(), more)
        })
        .collect();
    let flags: Vec<Option<u16>> = per
        .into_iter()
        .map(|(flag, more)| {
            findings.extend(more);
            flag
        })
        .collect();
    // Only needed when some kernel's call graph tests a flag (decoded lazily: most objects have
    // no scope filtering).
    let touched: Vec<u128> = if flags.iter().any(Option::is_some) {
        p.funcs.iter().map(super::sgprs::touched).collect()
    } else {
        Vec::new()
    };
    let all_flags: BTreeSet<u16> = flags.iter().flatten().copied().collect();
    let mut entry_flags = vec![BTreeSet::new(); p.funcs.len()];
    for (ki, r) in reach.iter().enumerate() {
        let Some(r) = r else { continue };
        let kf = &p.funcs[ki];
        let needed: BTreeSet<u16> = r.iter().filter_map(|&g| flags[g]).collect();
        let run = kf.inserted.get(kf.run(entry_index(kf))).unwrap_or_default();
        let computes = run.iter().any(|n| is_hw_id_read(&n.inst));
        // The object's flags this entry run computes (it reads a hardware-ID register and
        // writes them), tested in the kernel's call graph or not.
        let computed: BTreeSet<u16> = all_flags
            .iter()
            .copied()
            .filter(|&f| computes && run.iter().any(|n| n.inst.writes().contains_sgpr(f)))
            .collect();
        for &flag in needed.union(&computed) {
            entry_flags[ki].insert(flag);
            if !computed.contains(&flag) {
                findings.push(kf.finding(
                    Check::Markers,
                    Some(kf.orig_start),
                    kf.new_start,
                    format!(
                        "kernel entry does not compute the scope flag s{flag} its call graph tests"
                    ),
                ));
            }
            for &g in r.iter().filter(|&&g| touched[g] >> flag & 1 == 1) {
                let gf = &p.funcs[g];
                let at = gf.orig.iter().find(|o| {
                    let (r, w) = gf.inst(o).reads_writes();
                    r.contains_sgpr(flag) || w.contains_sgpr(flag)
                });
                findings.push(gf.finding(
                    Check::Inserted,
                    at.map(|o| o.addr),
                    at.and_then(|o| gf.new_address(o)),
                    format!(
                        "scope flag s{flag} of kernel {} is used by original code of {}",
                        kf.name, gf.name
                    ),
                ));
            }
        }
    }
    (flags, entry_flags)
}
