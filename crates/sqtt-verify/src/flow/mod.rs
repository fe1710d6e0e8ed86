//! Per-function analyses over the ORIGINAL control-flow graph with the inserted runs attached:
//! whitelist of inserted instructions, relocated jump targets, M0 liveness and reaching
//! constants, marker words and enter/exit balance.

mod balance;
mod cfg;
mod effect;
mod inserted;
mod liveness;
mod markers;
mod region;
mod runs;
mod scope;
mod sgprs;
mod sites;
mod spill;
mod subcalls;
mod subscopes;

use std::collections::{BTreeMap, BTreeSet};

use amdgpu_isa::Flow;

use crate::program::insn::Region;
use crate::program::{Func, FuncmapInfo, Layout, Program};
use crate::Finding;
use balance::check_balance;
use cfg::{build_cfg, entry_index, Cfg, FactSuccs};
use inserted::{check_inserted, check_windows, RunRegs};
use markers::check_f_entry;
use rayon::prelude::*;
use runs::{check_runs, Ran};
use scope::{scope_flags, sgpr_numbers};
use sgprs::CallGraph;

/// Marker counts of one function (instructions).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MarkerCounts {
    pub enter: usize,
    pub exit: usize,
    pub point: usize,
}

/// What the flow checks found beyond findings, for the report and the kernel checks.
pub(crate) struct Analysis {
    /// Every SGPR inserted code writes (M0 excluded), ascending.
    pub inserted_sgprs: Vec<u16>,
    /// The scope-filter flag SGPRs computed at kernel entries, ascending.
    pub scope_flags: Vec<u16>,
    /// Per kernel function index: the highest SGPR inserted code writes in it or anything it
    /// reaches (for the descriptor and note checks).
    pub inserted_top: BTreeMap<usize, u16>,
    /// Parallel to `Program::funcs`.
    pub markers: Vec<MarkerCounts>,
}

/// Whether every instruction of each inserted run is a simple marker-snippet instruction, by
/// original index of the function.
fn legacy_runs(f: &Func) -> Vec<bool> {
    (0..f.orig.len())
        .map(|k| all_legacy(f.inserted_class.get(f.run(k)).unwrap_or_default()))
        .collect()
}

/// Every class is a simple marker-snippet instruction's ([`Region::Legacy`]).
fn all_legacy(classes: &[Option<Region>]) -> bool {
    classes.iter().all(|c| matches!(c, Some(Region::Legacy(_))))
}

/// `wave_sizes`: lanes of each function of `p` (parallel to `p.funcs`); `outside`: device
/// functions code outside the object may enter (same order, [`crate::program::outside`]).
pub(crate) fn analyse(
    p: &Program,
    fm: &FuncmapInfo,
    wave_sizes: &[u32],
    outside: &[bool],
    findings: &mut Vec<Finding>,
) -> Analysis {
    // Per-function work runs in parallel; findings keep the function order.
    let (cfgs, found): (Vec<Cfg>, Vec<Vec<Finding>>) = (0..p.funcs.len())
        .into_par_iter()
        .map(|fi| {
            let mut found = Vec::new();
            (build_cfg(p, fi, &mut found), found)
        })
        .unzip();
    findings.extend(found.into_iter().flatten());
    let exits: Vec<Vec<usize>> = cfgs.iter().map(|c| c.exits.clone()).collect();
    let intra: Vec<Vec<usize>> = cfgs.iter().map(|c| c.intra_calls.clone()).collect();
    let cg = CallGraph::new(p, &exits, &intra);
    // Successors for register facts: the CFG's, plus the fall-through of `s_trap` (the trap
    // handler resumes at the next instruction).
    let succ: Vec<FactSuccs> = cfgs
        .par_iter()
        .zip(&p.funcs)
        .map(|(c, f)| FactSuccs {
            cfg: &c.succs,
            traps: (0..c.len())
                .filter(|&k| f.inst(&f.orig[k]).flow() == Flow::Trap && k + 1 < f.orig.len())
                .map(|k| k as u32)
                .collect(),
        })
        .collect();
    let mut changeable = sgprs::changeable(p, &cg, &succ, outside);
    drop(succ);
    let reach: Vec<Option<Vec<usize>>> = p
        .funcs
        .iter()
        .enumerate()
        .map(|(fi, f)| (f.kind == crate::FunctionKind::Kernel).then(|| cg.reachable(fi)))
        .collect();
    let (flags, entry_flags) = scope_flags(p, &reach, findings);
    let vgprs_used = spill::used_in_call_graphs(p, &reach);
    // A kernel's entry run computes scope flags. `scope_flags` proved that no original
    // instruction the kernel reaches touches them, so writing them there changes nothing the
    // original program reads, even where liveness is conservative (an unresolved call reads
    // every SGPR).
    for (ki, set) in entry_flags.iter().enumerate() {
        let tested = set.iter().fold(0u128, |a, f| a | 1u128 << f);
        changeable[ki].add(entry_index(&p.funcs[ki]), tested);
    }
    let all_flags: BTreeSet<u16> = flags.iter().flatten().copied().collect();
    let packing = fm.layout != Layout::Legacy;
    let free: Vec<u16> = sgpr_numbers(&p.free_sgprs).collect();
    let (markers, found): (Vec<MarkerCounts>, Vec<Vec<Finding>>) = p
        .funcs
        .par_iter()
        .enumerate()
        .map(|(fi, f)| {
            let mut found = Vec::new();
            let regs = RunRegs {
                changeable: &changeable[fi],
                vgprs_used: vgprs_used[fi],
                wave: wave_sizes.get(fi).copied().unwrap_or(64),
            };
            check_inserted(p, f, &cfgs[fi], &all_flags, &regs, packing, &mut found);
            check_windows(f, &mut found);
            let env = region::Env {
                target: p.isa,
                wave_size: wave_sizes.get(fi).copied().unwrap_or(64),
                free: &free,
                scope_flag: flags[fi],
                layout: fm.layout,
                payload: &fm.payload,
                names: &fm.names,
                runs: Default::default(),
            };
            let cfg = &cfgs[fi];
            let (counts, ran) = check_runs(
                p,
                f,
                &legacy_runs(f),
                cfg,
                &changeable[fi],
                fm,
                &env,
                &mut found,
            );
            match ran {
                Ran::Empty => {}
                // Nothing inserted: every run is empty, so no run changes M0, SCC or the scope
                // depth and no marker is emitted; only an F row added for this function can be
                // wrong.
                Ran::NothingInserted => check_f_entry(f, fm, None, &mut found),
                Ran::Runs {
                    effects,
                    landed,
                    loops,
                } => {
                    let succ = |k: usize| cfg.succ(k).map(|s| s.0).collect();
                    sites::check_loop_enters(f, succ, &fm.names, &loops, &mut found);
                    check_f_entry(f, fm, effects.get(&(0, None)), &mut found);
                    let regions = subscopes::regions(cfg);
                    subscopes::check_sub_enters(f, &regions, &effects, fm, &mut found);
                    check_balance(f, cfg, &regions, &effects, &landed, fm, &mut found);
                }
            }
            (counts, found)
        })
        .unzip();
    findings.extend(found.into_iter().flatten());
    let written: Vec<u128> = p
        .funcs
        .iter()
        .map(|f| {
            f.inserted_regs(0..f.inserted.len())
                .fold(0, |a, r| a | r.sgpr_writes)
        })
        .collect();
    let inserted_top = reach
        .iter()
        .enumerate()
        .filter_map(|(fi, r)| {
            let w = r.as_ref()?.iter().fold(0u128, |a, &g| a | written[g]);
            (w != 0).then(|| (fi, 127 - w.leading_zeros() as u16))
        })
        .collect();
    let all_written = written.iter().fold(0u128, |a, w| a | w);
    Analysis {
        inserted_sgprs: (0..106u16).filter(|r| all_written >> r & 1 == 1).collect(),
        scope_flags: all_flags.into_iter().collect(),
        inserted_top,
        markers,
    }
}
