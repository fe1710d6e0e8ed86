//! Facts of the original program over its CFG: M0 and SCC liveness and the constant M0 holds
//! before each original instruction.

use std::collections::VecDeque;

use super::cfg::Cfg;
use crate::program::insn::{allowed, reads_m0, Allowed};
use crate::program::{Func, Regs};

/// Abstract value of M0 inside an inserted run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Val {
    /// The value the original program has there.
    Orig,
    Const(u32),
    Unknown,
}

/// Backward liveness of one register over the original CFG to a fixed point: `facts[k]` is
/// (instruction `k` reads it, instruction `k` kills it); returns whether it is live before each
/// instruction.
pub(super) fn backward_liveness(cfg: &Cfg, facts: &[(bool, bool)]) -> Vec<bool> {
    let n = facts.len();
    let mut live_in = vec![false; n];
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..n).rev() {
            let out = cfg
                .succs
                .of(k)
                .iter()
                .any(|&s| live_in.get(s as usize).copied().unwrap_or(false));
            let (reads, kills) = facts[k];
            let v = reads || (out && !kills);
            if v != live_in[k] {
                live_in[k] = v;
                changed = true;
            }
        }
    }
    live_in
}

/// Backward M0 liveness over the original CFG: calls clobber M0, exits end liveness.
pub(super) fn m0_liveness(f: &Func, cfg: &Cfg) -> Vec<bool> {
    // (reads, kills) per instruction, from the registers decoded once (`Func::regs`).
    let facts: Vec<(bool, bool)> = f
        .orig
        .iter()
        .map(|o| {
            let kills = f.regs(o).has(Regs::M0_WRITE) || f.regs(o).has(Regs::CALL);
            // `reads_m0` is false without M0 among the decoder's reads.
            (f.regs(o).has(Regs::M0_READ) && reads_m0(&f.inst(o)), kills)
        })
        .collect();
    backward_liveness(cfg, &facts)
}

/// Backward SCC liveness over the original CFG (reads and writes from the decoder's implicit
/// uses/defs, e.g. `s_cbranch_scc*`, `s_cselect`, `s_addc`); calls clobber SCC, exits end
/// liveness.
pub(super) fn scc_liveness(f: &Func, cfg: &Cfg) -> Vec<bool> {
    // (reads, kills) per instruction, from the registers decoded once (`Func::regs`).
    let facts: Vec<(bool, bool)> = f
        .orig
        .iter()
        .map(|o| {
            let kills = f.regs(o).has(Regs::SCC_WRITE) || f.regs(o).has(Regs::CALL);
            (f.regs(o).has(Regs::SCC_READ), kills)
        })
        .collect();
    backward_liveness(cfg, &facts)
}

/// Forward reaching constant of M0 before each original instruction (`None`: unreached).
pub(super) fn m0_constants(f: &Func, cfg: &Cfg) -> Vec<Option<Val>> {
    let n = f.orig.len();
    let mut val_in: Vec<Option<Val>> = vec![None; n];
    if n == 0 {
        return val_in;
    }
    val_in[0] = Some(Val::Unknown);
    let mut work: VecDeque<usize> = VecDeque::from([0]);
    while let Some(k) = work.pop_front() {
        let o = &f.orig[k];
        let Some(vin) = val_in[k] else { continue };
        let out = if f.regs(o).has(Regs::CALL) {
            Val::Unknown
        } else if f.regs(o).has(Regs::M0_WRITE) {
            match allowed(&f.inst(o)) {
                Some(Allowed::SetM0(c)) => Val::Const(c),
                _ => Val::Unknown,
            }
        } else {
            vin
        };
        for &s in cfg.succs.of(k) {
            let s = s as usize;
            let merged = match val_in[s] {
                None => out,
                Some(v) if v == out => v,
                Some(_) => Val::Unknown,
            };
            if val_in[s] != Some(merged) {
                val_in[s] = Some(merged);
                work.push_back(s);
            }
        }
    }
    val_in
}
