//! [`Check::Inserted`]: every inserted instruction is whitelisted and writes only registers
//! that are dead where it runs (SGPRs by the liveness of [`super::sgprs`], VGPR lanes saved
//! and restored by [`super::spill`]); hazard windows in front of original instructions.

use std::collections::{BTreeMap, BTreeSet};

use super::cfg::{entry_index, Cfg};
use super::sgprs;
use crate::program::insn::{getreg_allowed, Allowed, Region};
use crate::program::{Func, NInst, Program, Regs};
use crate::{Check, Finding};

/// What inserted code of one function may do with registers.
pub(super) struct RunRegs<'a> {
    /// `changeable.get(k)`: SGPRs inserted code in front of original `k` may change.
    pub(super) changeable: &'a sgprs::Masks,
    /// VGPRs original code of the function's call graphs uses (no lane save may go there).
    pub(super) vgprs_used: super::spill::Vgprs,
    /// Lanes of the waves running the function.
    pub(super) wave: u32,
}

/// Static whitelist of every inserted instruction (class, memory, registers written, branch
/// targets, hardware registers read), and the SGPRs each run writes: changeable there, or saved
/// and restored around the run ([`super::spill`]).
/// `flags`: every scope-filter flag of the object (only kernel entry runs may write one).
pub(super) fn check_inserted(
    p: &Program,
    f: &Func,
    cfg: &Cfg,
    flags: &BTreeSet<u16>,
    regs: &RunRegs,
    packing: bool,
    findings: &mut Vec<Finding>,
) {
    let changeable = regs.changeable;
    let has_imm = p.isa.has_ttracedata_imm();
    let family = p.isa.family();
    let entry = entry_index(f);
    // Landing block start -> the original instruction its branch edge leads to.
    let landed_at: BTreeMap<u64, usize> = cfg.via.iter().map(|(&(_, s), &b)| (b, s)).collect();
    // Jump landings by target instruction, in edge order (one pass over the edges, not one per
    // run).
    let mut landings_of: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (s, l) in cfg.edges() {
        if let Some(l) = l {
            landings_of.entry(s).or_default().push(l);
        }
    }
    for (k, o) in f.orig.iter().enumerate() {
        let run = f.inserted.get(f.run(k)).unwrap_or_default();
        let (Some(first), Some(end)) = (run.first(), f.new_address(o)) else {
            continue;
        };
        // Parallel to `run`: registers decoded once.
        let rregs = f.inserted_regs(f.run(k));
        let (run_start, run_end) = (first.addr, end);
        // Parallel to `run`: the landing block and the island each instruction lies in (looked
        // up once, not once per question below).
        let trailers: Vec<_> = run
            .iter()
            .map(|n| (p.landing_containing(n.addr), p.island_containing(n.addr)))
            .collect();
        // A landing block sits in front of `k` but runs on its branch edge only, right before
        // the branch target: what it writes must be changeable there (its tail island is checked
        // below like every island).
        for ((n, r), trailer) in run.iter().zip(rregs.clone()).zip(&trailers) {
            let (Some((start, _)), None) = *trailer else {
                continue;
            };
            let may = landed_at
                .get(&start)
                .and_then(|&s| changeable.get(s))
                .unwrap_or(0);
            let w = r.sgpr_writes & !may;
            if w != 0 {
                findings.push(f.finding(Check::Inserted,
                    Some(o.addr),
                    Some(n.addr),
                    format!(
                        "inserted {} in a landing block writes s{}, which is live or awaiting an SMEM result at the branch target",
                        n.inst.mnemonic(),
                        w.trailing_zeros()
                    ),
                ));
            }
        }
        let kernel_entry = k == entry && f.kind == crate::FunctionKind::Kernel;
        let landings: &[u64] = landings_of.get(&k).map(Vec::as_slice).unwrap_or_default();
        let (body, body_regs): (Vec<NInst>, Vec<Regs>) = run
            .iter()
            .zip(rregs.clone())
            .zip(&trailers)
            .filter(|(_, t)| matches!(t, (None, None)))
            .map(|((n, r), _)| (*n, *r))
            .unzip();
        let saves = super::spill::saves(
            &body,
            &body_regs,
            run_end,
            landings,
            regs.wave,
            regs.vgprs_used,
        );
        for (a, msg) in saves.problems {
            findings.push(f.finding(Check::Inserted, Some(o.addr), Some(a), msg));
        }
        let may_write = changeable.get(k).unwrap_or(0) | saves.restored;
        if let Some((n, r)) = body
            .iter()
            .zip(&body_regs)
            .find(|(_, r)| r.sgpr_writes & !may_write != 0)
        {
            let w = r.sgpr_writes & !may_write;
            findings.push(f.finding(Check::Inserted,
                Some(o.addr),
                Some(n.addr),
                format!(
                    "inserted {} writes s{}, which is live or awaiting an SMEM result there and not saved and restored around the run",
                    n.inst.mnemonic(),
                    w.trailing_zeros()
                ),
            ));
        }
        let rclasses = &f.inserted_class[f.run(k)];
        for (((n, r), &class), &(landing, island)) in
            run.iter().zip(rregs).zip(rclasses).zip(&trailers)
        {
            let m = n.inst.mnemonic();
            let mut bad = |msg: String| {
                findings.push(f.finding(Check::Inserted, None, Some(n.addr), msg));
            };
            if let Some(isl) = island {
                // Validated through the branch that uses it (check_target); the SGPRs it writes
                // must be changeable where it lands.
                let lands = f.orig.iter().enumerate().position(|(m, x)| {
                    let start = f
                        .inserted
                        .get(f.run(m))
                        .and_then(|r| r.first())
                        .map_or(f.new_address(x), |y| Some(y.addr));
                    start.is_some_and(|s| s <= isl.dest)
                        && f.new_address(x).is_some_and(|y| isl.dest <= y)
                });
                let ok = lands
                    .and_then(|k| changeable.get(k))
                    .is_some_and(|c| isl.writes.sgpr_bits() & !c == 0);
                if !ok {
                    bad(format!(
                        "long-branch island at {:#x} writes SGPRs that are live or awaiting an SMEM result where it lands",
                        n.addr
                    ));
                }
                continue;
            }
            if landing.is_some_and(|(_, b)| n.addr >= b.body_end) {
                // A landing block's jump: its destination is checked through the branch that
                // uses the block (check_target).
                continue;
            }
            match class {
                None => bad(format!("inserted instruction {m} is not allowed")),
                Some(Region::Legacy(Allowed::TtraceImm(_))) if !has_imm => {
                    bad("s_ttracedata_imm before gfx10".into())
                }
                Some(Region::Legacy(Allowed::TtraceImm(_))) if packing => {
                    bad("s_ttracedata_imm while shader-clock packing is active".into())
                }
                Some(Region::Getreg(id)) if !getreg_allowed(family, id) => {
                    bad(format!("s_getreg_b32 of hwreg {id} is not allowed"))
                }
                Some(Region::Branch) => {
                    let t = n.inst.branch_target(n.addr);
                    if !t.is_some_and(|t| t >= run_start && t <= run_end) {
                        bad(format!(
                            "inserted {m} leaves its run: target {}, run {run_start:#x}..{run_end:#x}",
                            t.map_or("unknown".into(), |t| format!("{t:#x}"))
                        ));
                    }
                }
                _ => {}
            }
            if n.inst.memory().is_some() {
                bad(format!("inserted instruction {m} accesses memory"));
            }
            let m0_save = matches!(class, Some(Region::Legacy(Allowed::SaveM0(_))));
            // Lane saves write a VGPR; `spill::saves` checked them above.
            let lane_save = matches!(class, Some(Region::Writelane));
            if !m0_save && !lane_save && !r.has(Regs::SCALAR_WRITES) {
                bad(format!(
                    "inserted instruction {m} writes registers other than M0, SCC and SGPRs"
                ));
            }
            if r.has(Regs::TTMP_READ) {
                bad(format!("inserted instruction {m} reads a TTMP"));
            }
            let writes_sgpr =
                |s: u16| r.sgpr_writes.checked_shr(u32::from(s)).unwrap_or(0) & 1 == 1;
            if let Some(r) = flags.iter().find(|r| !kernel_entry && writes_sgpr(**r)) {
                bad(format!(
                    "inserted instruction {m} overwrites the scope flag s{r}"
                ));
            }
        }
    }
}

/// No insertion inside an `s_clause` window (the clause would be split).
pub(super) fn check_windows(f: &Func, findings: &mut Vec<Finding>) {
    for (k, o) in f.orig.iter().enumerate() {
        // `s_delay_alu` windows are not checked: the instruction is a scheduling hint (code
        // without it is correct, only slower), so inserted code may sit inside one.
        let m = f.mnemonic(o);
        if m != "s_clause" {
            continue;
        }
        // simm16[5:0] = clause length - 1 (instructions following the s_clause).
        let imm = f.inst(o).field("simm16").unwrap_or(0);
        let last = k + 1 + (imm & 0x3f) as usize;
        for m in (k + 1)..=last.min(f.orig.len().saturating_sub(1)) {
            if let Some(x) = f.orig.get(m).filter(|_| !f.run(m).is_empty()) {
                findings.push(f.finding(
                    Check::Inserted,
                    Some(x.addr),
                    f.new_address(x),
                    format!(
                        "instrumentation inside the {} window of orig {:#x}",
                        m, o.addr
                    ),
                ));
            }
        }
    }
}
