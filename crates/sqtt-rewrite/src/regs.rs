//! Which SGPRs inserted code may write at each insertion point, proven from the original code
//! alone (issue 12; shared/notes/rewriting.md "Registers": "never hard-code scratch registers,
//! prove them dead from the current text").
//!
//! An SGPR is free before instruction `i` of function `f` when
//! - it is dead there: no path from `i` reads it before an unconditional write (backward liveness
//!   over the function's CFG; calls and returns below);
//! - no SMEM load issued earlier may still write it: its result arrives asynchronously until an
//!   `s_waitcnt lgkmcnt(0)` (gfx9-gfx11) / `s_wait_kmcnt 0` (gfx12+), so inserted code that used
//!   it could see it change under its feet (ISA manuals, "Data dependency resolution");
//! - it is in the function's allocation mask (the caller's: gfx9 kernels' SGPR budget, s0..s105 on
//!   gfx10+) and is not a scope-filter flag.
//!
//! Calls and returns (no calling-convention assumption). A call reads every SGPR read by any
//! function reachable from its callee (an unresolved call: every SGPR) and kills nothing but the
//! return-address pair it writes itself. A device function's returns are followed by what is live
//! after each of its call sites, joined over all of them, when every caller is known (the object
//! has no unresolved call, every function decoded, and the function has a direct call or tail
//! call); otherwise every SGPR is live at its returns. A tail call passes its caller's return
//! liveness on to the callee. `s_endpgm` ends liveness. An instruction whose SGPR operand is
//! indexed by M0 (`s_movrels*`) reads every SGPR; conditional or indexed writes (`s_cmov*`,
//! `s_movreld*`) kill nothing.

use crate::analysis::{Callee, Exit, Func, Program};
use amdgpu_isa::{Family, Format, Instruction, Special};
use std::collections::BTreeMap;

/// A set of SGPRs: bit `n` is `s<n>` (n < 106).
pub type Sgprs = u128;

/// Every SGPR a wave can address, s0..s105 (VCC and the other special registers excluded).
pub const ALL_SGPRS: Sgprs = (1u128 << 106) - 1;

/// SGPRs `inst` reads (an `s_movrels*` reads any SGPR through M0).
pub fn sgpr_reads(inst: &Instruction) -> Sgprs {
    if inst.mnemonic().starts_with("s_movrels") {
        return ALL_SGPRS;
    }
    inst.reads().sgpr_bits()
}

/// SGPRs `inst` certainly overwrites (a kill for liveness): none for conditional or M0-indexed
/// writes (`s_cmov*`, `s_movreld*`).
fn sgpr_kills(inst: &Instruction) -> Sgprs {
    let m = inst.mnemonic();
    if m.starts_with("s_cmov") || m.starts_with("s_movreld") {
        return 0;
    }
    inst.writes().sgpr_bits()
}

/// SGPRs `inst` may write (an `s_movreld*` writes any SGPR through M0).
pub fn sgpr_writes(inst: &Instruction) -> Sgprs {
    if inst.mnemonic().starts_with("s_movreld") {
        return ALL_SGPRS;
    }
    inst.writes().sgpr_bits()
}

/// SGPRs written asynchronously by `inst`: SMEM loads (and `s_memtime`-style SMEM reads) and the
/// gfx11+ `s_sendmsg_rtn_*`, which return through the LGKM / KM counter.
fn async_writes(inst: &Instruction) -> Sgprs {
    if inst.format() == Format::Smem || inst.mnemonic().starts_with("s_sendmsg_rtn") {
        inst.writes().sgpr_bits()
    } else {
        0
    }
}

/// Whether `inst` waits until every SMEM result has arrived: `s_waitcnt` with LGKM_CNT 0
/// (simm16 bits 11:8 on gfx9, 13:8 on gfx10, 9:4 on gfx11; ISA manuals "S_WAITCNT"),
/// `s_waitcnt_lgkmcnt null, 0` (gfx10/gfx11 SOPK), `s_wait_kmcnt 0` (gfx12+), or `s_endpgm`.
fn waits_for_smem(inst: &Instruction) -> bool {
    let imm = || inst.field("simm16").unwrap_or(u32::MAX);
    match inst.mnemonic() {
        "s_waitcnt" => {
            let lgkm = match inst.target().family() {
                Family::Gfx9 => (imm() >> 8) & 0xf,
                Family::Gfx10 => (imm() >> 8) & 0x3f,
                Family::Gfx11 => (imm() >> 4) & 0x3f,
                _ => return false,
            };
            lgkm == 0
        }
        // sdst 125 is `null` on gfx10/gfx11; any other SGPR adds its value to the count.
        "s_waitcnt_lgkmcnt" => inst.field("sdst") == Some(125) && imm() == 0,
        "s_wait_kmcnt" => imm() == 0,
        _ => inst.special() == Special::EndPgm,
    }
}

/// Interprocedural SGPR facts of one [`Program`]; per-instruction sets are computed per function
/// on demand (one function cached), so memory stays proportional to the largest function.
pub struct SgprFacts {
    /// Per function: SGPRs read by it or any function it can reach through calls and tail calls.
    reach_reads: Vec<Sgprs>,
    /// Per function: SGPRs live after its returns.
    ret_live: Vec<Sgprs>,
    /// Per function: SGPRs any of its instructions reads or may write (all when it did not decode).
    touched: Vec<Sgprs>,
    /// Per function: SGPRs inserted code may use at all (allocation mask minus scope flags).
    allowed: Vec<Sgprs>,
    cache: Option<(usize, Vec<Sgprs>)>,
}

/// Per-instruction exits and callees of a function, by instruction index.
struct Edges {
    exit: BTreeMap<usize, Exit>,
    call: BTreeMap<usize, Callee>,
}

fn edges(f: &Func) -> Edges {
    Edges {
        exit: f.exits.iter().copied().collect(),
        call: f.calls.iter().copied().collect(),
    }
}

/// Whether `f` has instructions the analysis could not see (decode failure).
fn opaque(f: &Func) -> bool {
    f.insts.is_empty() && f.spec.end > f.spec.start
}

impl SgprFacts {
    /// Computes the summaries. `allowed[f]`: SGPRs inserted code may use in function `f` at all.
    pub fn new(prog: &Program, allowed: Vec<Sgprs>) -> SgprFacts {
        let n = prog.funcs.len();
        let touched: Vec<Sgprs> = prog
            .funcs
            .iter()
            .map(|f| {
                if opaque(f) {
                    return ALL_SGPRS;
                }
                f.insts
                    .iter()
                    .fold(0, |a, (_, i)| a | sgpr_reads(i) | sgpr_writes(i))
            })
            .collect();
        let unresolved = prog
            .funcs
            .iter()
            .any(|f| opaque(f) || f.calls.iter().any(|(_, c)| *c == Callee::Indirect));
        // Reads of everything reachable: iterate to a fixed point over the call graph.
        let mut reach_reads: Vec<Sgprs> = prog
            .funcs
            .iter()
            .map(|f| {
                if opaque(f) {
                    return ALL_SGPRS;
                }
                f.insts.iter().fold(0, |a, (_, i)| a | sgpr_reads(i))
            })
            .collect();
        let callees: Vec<Vec<Option<usize>>> = prog
            .funcs
            .iter()
            .map(|f| {
                let calls = f.calls.iter().map(|(_, c)| match c {
                    Callee::Direct(g) => Some(*g),
                    Callee::Indirect => None,
                });
                let tails = f.exits.iter().filter_map(|(_, e)| match e {
                    Exit::TailCall(g) => Some(Some(*g)),
                    _ => None,
                });
                calls.chain(tails).collect()
            })
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for fi in 0..n {
                let mut v = reach_reads[fi];
                for c in &callees[fi] {
                    v |= c.map_or(ALL_SGPRS, |g| reach_reads[g]);
                }
                if v != reach_reads[fi] {
                    reach_reads[fi] = v;
                    changed = true;
                }
            }
        }
        // Functions every caller of which is known: at least one direct call or tail call.
        let mut called = vec![false; n];
        for cs in &callees {
            for g in cs.iter().flatten() {
                called[*g] = true;
            }
        }
        let ret_live: Vec<Sgprs> = (0..n)
            .map(|g| {
                if unresolved || !called[g] {
                    ALL_SGPRS
                } else {
                    0
                }
            })
            .collect();
        let mut facts = SgprFacts {
            reach_reads,
            ret_live,
            touched,
            allowed,
            cache: None,
        };
        if !unresolved {
            facts.join_returns(prog);
        }
        facts
    }

    /// Fixed point of the return liveness of known-caller functions: the union of what is live
    /// after each call site, and the caller's own return liveness at tail calls.
    fn join_returns(&mut self, prog: &Program) {
        let n = prog.funcs.len();
        let mut work: Vec<usize> = (0..n).rev().collect();
        let mut queued = vec![true; n];
        while let Some(fi) = work.pop() {
            queued[fi] = false;
            let f = &prog.funcs[fi];
            if f.calls.is_empty() && !f.exits.iter().any(|(_, e)| matches!(e, Exit::TailCall(_))) {
                continue;
            }
            let live = self.live_in(prog, fi);
            let mut push = |g: usize, add: Sgprs, ret: &mut Vec<Sgprs>| {
                if ret[g] | add != ret[g] {
                    ret[g] |= add;
                    if !queued[g] {
                        queued[g] = true;
                        work.push(g);
                    }
                }
            };
            for &(i, c) in &f.calls {
                if let Callee::Direct(g) = c {
                    let after = f.succs[i].iter().fold(0, |a, &s| a | live[s]);
                    push(g, after, &mut self.ret_live);
                }
            }
            for &(_, e) in &f.exits {
                if let Exit::TailCall(g) = e {
                    let add = self.ret_live[fi];
                    push(g, add, &mut self.ret_live);
                }
            }
        }
    }

    /// SGPRs live before each instruction of function `fi`.
    fn live_in(&self, prog: &Program, fi: usize) -> Vec<Sgprs> {
        let f = &prog.funcs[fi];
        let n = f.insts.len();
        let e = edges(f);
        let mut uses = Vec::with_capacity(n);
        let mut kills = Vec::with_capacity(n);
        let mut exit_live = Vec::with_capacity(n);
        for (i, (_, inst)) in f.insts.iter().enumerate() {
            let mut u = sgpr_reads(inst);
            if let Some(c) = e.call.get(&i) {
                u |= match c {
                    Callee::Direct(g) => self.reach_reads[*g],
                    Callee::Indirect => ALL_SGPRS,
                };
            }
            uses.push(u);
            kills.push(sgpr_kills(inst));
            exit_live.push(match e.exit.get(&i) {
                Some(Exit::EndPgm) => 0,
                Some(Exit::Return) => self.ret_live[fi],
                Some(Exit::TailCall(g)) => self.reach_reads[*g] | self.ret_live[fi],
                // No successor and no known exit (a problem the analysis reported): anything.
                None if f.succs[i].is_empty() => ALL_SGPRS,
                None => 0,
            });
        }
        let mut live = vec![0 as Sgprs; n];
        let mut changed = true;
        while changed {
            changed = false;
            for i in (0..n).rev() {
                let out = f.succs[i].iter().fold(exit_live[i], |a, &s| a | live[s]);
                let v = uses[i] | (out & !kills[i]);
                if v != live[i] {
                    live[i] = v;
                    changed = true;
                }
            }
        }
        live
    }

    /// SGPRs an SMEM result may still arrive in before each instruction of function `fi`
    /// (device functions start with everything pending until their first wait; calls leave
    /// everything pending).
    fn pending_in(prog: &Program, fi: usize) -> Vec<Sgprs> {
        let f = &prog.funcs[fi];
        let n = f.insts.len();
        let mut pend: Vec<Option<Sgprs>> = vec![None; n];
        if n == 0 {
            return Vec::new();
        }
        pend[0] = Some(if f.spec.kernel.is_some() {
            0
        } else {
            ALL_SGPRS
        });
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..n {
                let Some(p) = pend[i] else { continue };
                let inst = &f.insts[i].1;
                let mut out = if waits_for_smem(inst) { 0 } else { p } | async_writes(inst);
                if inst.flow() == amdgpu_isa::Flow::Call {
                    out = ALL_SGPRS;
                }
                for &s in &f.succs[i] {
                    let v = pend[s].unwrap_or(0) | out;
                    if pend[s] != Some(v) {
                        pend[s] = Some(v);
                        changed = true;
                    }
                }
            }
        }
        // Unreached instructions: nothing is known.
        pend.into_iter().map(|p| p.unwrap_or(ALL_SGPRS)).collect()
    }

    /// SGPRs inserted code may write right before instruction `i` of function `fi` (dead, not
    /// awaiting an SMEM result, allowed in the function).
    pub fn free_at(&mut self, prog: &Program, fi: usize, i: usize) -> Sgprs {
        if self.cache.as_ref().is_none_or(|(f, _)| *f != fi) {
            let live = self.live_in(prog, fi);
            let pend = Self::pending_in(prog, fi);
            let free = live
                .iter()
                .zip(&pend)
                .map(|(l, p)| self.allowed[fi] & !l & !p)
                .collect();
            self.cache = Some((fi, free));
        }
        self.cache
            .as_ref()
            .and_then(|(_, v)| v.get(i).copied())
            .unwrap_or(0)
    }

    /// SGPRs inserted code may use in function `fi` at all.
    pub fn allowed(&self, fi: usize) -> Sgprs {
        self.allowed[fi]
    }

    /// SGPRs any instruction of function `fi` reads or may write.
    pub fn touched(&self, fi: usize) -> Sgprs {
        self.touched[fi]
    }

    /// Removes `regs` from what inserted code may use in every function (scope flags).
    pub fn forbid(&mut self, regs: Sgprs) {
        for a in &mut self.allowed {
            *a &= !regs;
        }
        self.cache = None;
    }
}

/// Registers handed out to one snippet from the SGPRs free at its insertion point.
#[derive(Debug, Clone, Copy)]
pub struct SiteRegs {
    free: Sgprs,
    /// Every SGPR handed out so far.
    pub used: Sgprs,
}

impl SiteRegs {
    /// An allocator over `free`.
    pub fn new(free: Sgprs) -> SiteRegs {
        SiteRegs { free, used: 0 }
    }

    /// The lowest free SGPR, or `Err(why)` naming the role that found none.
    pub fn one(&mut self, role: &str) -> Result<u8, String> {
        if self.free == 0 {
            return Err(format!("no SGPR is provably free here for {role}"));
        }
        let r = self.free.trailing_zeros() as u8;
        self.free &= !(1u128 << r);
        self.used |= 1u128 << r;
        Ok(r)
    }

    /// The lowest free even-aligned SGPR pair (`s[r:r+1]`), or `Err(why)`.
    pub fn pair(&mut self, role: &str) -> Result<u8, String> {
        let r = (0..105u8)
            .step_by(2)
            .find(|&r| self.free >> r & 3 == 3)
            .ok_or_else(|| format!("no SGPR pair is provably free here for {role}"))?;
        self.free &= !(3u128 << r);
        self.used |= 3u128 << r;
        Ok(r)
    }
}

/// SGPR numbers of a set, ascending.
pub fn members(s: Sgprs) -> impl Iterator<Item = u8> {
    (0..106u8).filter(move |r| s >> r & 1 == 1)
}
