//! Which SGPRs inserted code may write at each insertion point, proven from the original code
//! alone (issue 12; docs/background/rewriting.md "Registers": "never hard-code scratch registers,
//! prove them dead from the current text").
//!
//! An SGPR is free before instruction `i` of function `f` when
//! - it is dead there: no path from `i` reads it before an unconditional write (backward liveness
//!   over the function's CFG; calls and returns below);
//! - no SMEM load issued earlier may still write it: its result arrives asynchronously until an
//!   `s_waitcnt lgkmcnt(0)` (gfx9-gfx11) / `s_wait_kmcnt 0` (gfx12+), so inserted code that used
//!   it could see it change under its feet (ISA manuals, "Data dependency resolution"). A device
//!   function starts with every SMEM destination of the object pending; after a call, the SMEM
//!   destinations of every function the callee reaches are added;
//! - it is in the function's allocation mask (the caller's: gfx9 kernels' SGPR budget, s0..s105 on
//!   gfx10+) and is not a scope-filter flag.
//!
//! Calls and returns. A call reads every SGPR read by any function reachable from its callee (an
//! unresolved call: every SGPR) and kills nothing but the return-address pair it writes itself.
//! A device function's returns are followed by what is live after each of its call sites,
//! joined over all of them, when the object has no unresolved call and every function decoded;
//! a function that code outside the object may enter ([`crate::callers`]) adds the SGPRs the
//! AMDGPU function calling convention preserves ([`CALLEE_SAVED`]), and so does one with no
//! call site at all (whoever enters it follows the convention). With an unresolved call or an
//! undecoded function, every SGPR is live at every return. A tail call passes its caller's
//! return liveness on to the callee. `s_endpgm` ends liveness, and so does an `s_trap 2` with
//! nothing after it (the wave is halted: AMDGPUUsage "Trap Handler ABI"). The convention's argument
//! registers s0..s29 (`inreg` arguments, and the implicit inputs in s0..s15: private segment
//! buffer, dispatch and queue pointers, kernarg segment pointer, dispatch id, workgroup ids, LDS
//! kernel id) are live on entry: they stay live up to the function's last read of them (its own,
//! or a call's reads of everything the callee may reach), so such a callee-clobbered SGPR is free
//! only after the input it carries is dead. An instruction whose SGPR operand is
//! indexed by M0 (`s_movrels*`) reads every SGPR; conditional or indexed writes (`s_cmov*`,
//! `s_movreld*`) kill nothing.

use crate::analysis::{Callee, Exit, Func, Program};
use crate::reguse::RegUse;
use std::collections::BTreeMap;

/// A set of SGPRs: bit `n` is `s<n>` (n < 106).
pub type Sgprs = u128;

/// Every SGPR a wave can address, s0..s105 (VCC and the other special registers excluded).
pub const ALL_SGPRS: Sgprs = (1u128 << 106) - 1;

/// SGPRs a caller following the AMDGPU function calling convention expects a callee to preserve:
/// s30..s105 (LLVM `AMDGPUCallingConv.td` `CSR_AMDGPU_SGPRs`: s30..s105 through LLVM 20, a
/// striped subset of it since; the union covers code of every version). s0..s29 are
/// callee-clobbered (`CC_AMDGPU_Func` passes `inreg` arguments in them; AMDGPUUsage "Calling
/// Conventions").
pub const CALLEE_SAVED: Sgprs = ALL_SGPRS & !((1u128 << 30) - 1);

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
    /// Per function: SMEM destinations of every function it reaches (all SGPRs when it reaches
    /// an unresolved call or a function that did not decode).
    smem_reach: Vec<Sgprs>,
    /// SMEM destinations of the whole object (what may be in flight when a device function
    /// entered only from known call sites is entered).
    smem_all: Sgprs,
    /// Per function: entered by code the analysis cannot see (outside the object, or no call
    /// site): every SGPR may await an SMEM result at its entry.
    unknown_entry: Vec<bool>,
    /// The object has an unresolved call or a function that did not decode: every SGPR is live
    /// at every call of unknown code and at every return.
    unresolved: bool,
    /// Per instruction of one function: (free, savable) sets (see [`SgprFacts::free_at`] and
    /// [`SgprFacts::savable_at`]).
    cache: Option<(usize, Vec<(Sgprs, Sgprs)>)>,
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

/// Whether instruction `i` of `f` is `s_trap 2` ([`crate::analysis::aborts`]).
fn aborts_at(f: &Func, i: usize) -> bool {
    i < f.insts.len() && crate::analysis::aborts(&f.insts.get(i))
}

/// Whether `f` has instructions the analysis could not see (decode failure).
fn opaque(f: &Func) -> bool {
    f.insts.is_empty() && f.spec.end > f.spec.start
}

impl SgprFacts {
    /// Computes the summaries. `allowed[f]`: SGPRs inserted code may use in function `f` at all;
    /// `outside[f]`: code outside the object may enter device function `f`
    /// ([`crate::callers::Callers::outside`]).
    pub fn new(prog: &Program, allowed: Vec<Sgprs>, outside: &[bool]) -> SgprFacts {
        let n = prog.funcs.len();
        let touched: Vec<Sgprs> = prog
            .funcs
            .iter()
            .map(|f| {
                if opaque(f) {
                    return ALL_SGPRS;
                }
                f.reg_use
                    .iter()
                    .fold(0, |a, u| a | u.sgpr_reads() | u.sgpr_writes())
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
                f.reg_use.iter().fold(0, |a, u| a | u.sgpr_reads())
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
        let mut smem_reach: Vec<Sgprs> = prog
            .funcs
            .iter()
            .map(|f| {
                if opaque(f) {
                    return ALL_SGPRS;
                }
                f.reg_use.iter().fold(0, |a, u| a | u.async_writes())
            })
            .collect();
        let smem_all = smem_reach.iter().fold(0, |a, s| a | s);
        let mut changed = true;
        while changed {
            changed = false;
            for fi in 0..n {
                let mut v = reach_reads[fi];
                let mut m = smem_reach[fi];
                for c in &callees[fi] {
                    v |= c.map_or(ALL_SGPRS, |g| reach_reads[g]);
                    m |= c.map_or(ALL_SGPRS, |g| smem_reach[g]);
                }
                if v != reach_reads[fi] || m != smem_reach[fi] {
                    reach_reads[fi] = v;
                    smem_reach[fi] = m;
                    changed = true;
                }
            }
        }
        // Functions with a known call site: at least one direct call or tail call.
        let mut called = vec![false; n];
        for cs in &callees {
            for g in cs.iter().flatten() {
                called[*g] = true;
            }
        }
        let outside = |g: usize| outside.get(g).copied().unwrap_or(true);
        let ret_live: Vec<Sgprs> = (0..n)
            .map(|g| {
                if unresolved {
                    ALL_SGPRS
                } else if !called[g] || outside(g) {
                    CALLEE_SAVED
                } else {
                    0
                }
            })
            .collect();
        let unknown_entry = (0..n)
            .map(|g| prog.funcs[g].spec.kernel.is_none() && (!called[g] || outside(g)))
            .collect();
        let mut facts = SgprFacts {
            reach_reads,
            ret_live,
            touched,
            allowed,
            smem_reach,
            smem_all,
            unknown_entry,
            unresolved,
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
                    let after = f.successors(i).fold(0, |a, s| a | live[s]);
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
        for (i, r) in f.reg_use.iter().enumerate() {
            let mut u = r.sgpr_reads();
            if let Some(c) = e.call.get(&i) {
                u |= match c {
                    Callee::Direct(g) => self.reach_reads[*g],
                    Callee::Indirect => ALL_SGPRS,
                };
            }
            uses.push(u);
            kills.push(r.sgpr_kills());
            exit_live.push(match e.exit.get(&i) {
                Some(Exit::EndPgm) => 0,
                Some(Exit::Return) => self.ret_live[fi],
                Some(Exit::TailCall(g)) => self.reach_reads[*g] | self.ret_live[fi],
                // `s_trap 2` ending the function: the wave is halted and its queue put into
                // the error state (AMDGPUUsage "Trap Handler ABI"); nothing runs after it.
                None if f.successors(i).next().is_none() && aborts_at(f, i) => 0,
                // No successor and no known exit (a problem the analysis reported): anything.
                None if f.successors(i).next().is_none() => ALL_SGPRS,
                None => 0,
            });
        }
        let mut live = vec![0 as Sgprs; n];
        let mut changed = true;
        while changed {
            changed = false;
            for i in (0..n).rev() {
                let out = f.successors(i).fold(exit_live[i], |a, s| a | live[s]);
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
    /// (device functions start with the object's SMEM destinations pending until their first
    /// wait, every SGPR when code the analysis cannot see may enter them; a call adds the SMEM
    /// destinations of everything its callee reaches).
    fn pending_in(&self, prog: &Program, fi: usize) -> Vec<Sgprs> {
        let f = &prog.funcs[fi];
        let n = f.insts.len();
        let mut pend: Vec<Option<Sgprs>> = vec![None; n];
        if n == 0 {
            return Vec::new();
        }
        let calls: BTreeMap<usize, Callee> = f.calls.iter().copied().collect();
        pend[0] = Some(if f.spec.kernel.is_some() {
            0
        } else if self.unknown_entry[fi] {
            ALL_SGPRS
        } else {
            self.smem_all
        });
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..n {
                let Some(p) = pend[i] else { continue };
                let u = &f.reg_use[i];
                let mut out = if u.waits_for_smem() { 0 } else { p } | u.async_writes();
                if f.insts.flow(i) == amdgpu_isa::Flow::Call {
                    out |= match calls.get(&i) {
                        Some(Callee::Direct(g)) => self.smem_reach[*g],
                        Some(Callee::Indirect) => ALL_SGPRS,
                        // A subroutine inside the function ([`crate::calltable`]): its own
                        // loads are on the CFG's edges into it.
                        None => 0,
                    };
                }
                for s in f.successors(i) {
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

    /// The (free, savable) sets ([`SgprFacts::free_at`], [`SgprFacts::savable_at`]) before
    /// every instruction of function `fi`, by instruction index; computed afresh (no cache), so
    /// functions can be asked in parallel.
    pub fn function_sets(&self, prog: &Program, fi: usize) -> Vec<(Sgprs, Sgprs)> {
        let live = self.live_in(prog, fi);
        let pend = self.pending_in(prog, fi);
        live.iter()
            .zip(&pend)
            .map(|(l, p)| {
                let savable = self.allowed[fi] & !p;
                (savable & !l, savable)
            })
            .collect()
    }

    /// Per-instruction (free, savable) sets of function `fi`, cached.
    fn sets_at(&mut self, prog: &Program, fi: usize, i: usize) -> (Sgprs, Sgprs) {
        if self.cache.as_ref().is_none_or(|(f, _)| *f != fi) {
            self.cache = Some((fi, self.function_sets(prog, fi)));
        }
        self.cache
            .as_ref()
            .and_then(|(_, v)| v.get(i).copied())
            .unwrap_or((0, 0))
    }

    /// SGPRs inserted code may write right before instruction `i` of function `fi` (dead, not
    /// awaiting an SMEM result, allowed in the function).
    pub fn free_at(&mut self, prog: &Program, fi: usize, i: usize) -> Sgprs {
        self.sets_at(prog, fi, i).0
    }

    /// SGPRs inserted code may use right before instruction `i` of function `fi` when it saves
    /// and restores their values around itself (issue 12 item 3): allowed in the function and
    /// not awaiting an SMEM result (a result arriving between the save and the restore would be
    /// lost). Live ones included; the caller removes what the snippet reads as input.
    pub fn savable_at(&mut self, prog: &Program, fi: usize, i: usize) -> Sgprs {
        self.sets_at(prog, fi, i).1
    }

    /// SGPRs inserted code may use in function `fi` at all.
    pub fn allowed(&self, fi: usize) -> Sgprs {
        self.allowed[fi]
    }

    /// Whether the object has an unresolved call or a function that did not decode (every SGPR
    /// is then live at every return and at every call of unknown code).
    pub fn unresolved(&self) -> bool {
        self.unresolved
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

/// Registers handed out to one snippet from the SGPRs free at its insertion point, and, when
/// none is left and a spill VGPR exists, from live SGPRs that the snippet saves into lanes of
/// that VGPR first and restores afterwards ([`crate::snippets::spill_wrap`]).
#[derive(Debug, Clone, Copy)]
pub struct SiteRegs {
    free: Sgprs,
    /// Live SGPRs that may be saved and restored (empty without a spill VGPR).
    savable: Sgprs,
    /// VGPR whose lanes hold saved SGPRs ([`spill_vgprs`]).
    pub vgpr: Option<u16>,
    /// Every SGPR handed out so far.
    pub used: Sgprs,
    /// The handed-out SGPRs that are live and must be saved and restored.
    pub spilled: Sgprs,
}

impl SiteRegs {
    /// An allocator over `free` that never spills.
    pub fn new(free: Sgprs) -> SiteRegs {
        SiteRegs::with_spill(free, 0, None)
    }

    /// An allocator over `free` that falls back to `savable` SGPRs (saved in lanes of `vgpr`).
    pub fn with_spill(free: Sgprs, savable: Sgprs, vgpr: Option<u16>) -> SiteRegs {
        SiteRegs {
            free,
            savable: if vgpr.is_some() { savable & !free } else { 0 },
            vgpr,
            used: 0,
            spilled: 0,
        }
    }

    fn take(&mut self, regs: Sgprs) {
        self.spilled |= regs & !self.free;
        self.free &= !regs;
        self.savable &= !regs;
        self.used |= regs;
    }

    /// The lowest free SGPR, else the lowest savable one (spilled), or `Err(why)` naming the
    /// role that found none.
    pub fn one(&mut self, role: &str) -> Result<u8, String> {
        let pool = if self.free != 0 {
            self.free
        } else {
            self.savable
        };
        if pool == 0 {
            return Err(format!("no SGPR is provably free here for {role}"));
        }
        let r = pool.trailing_zeros() as u8;
        self.take(1u128 << r);
        Ok(r)
    }

    /// The lowest free even-aligned SGPR pair (`s[r:r+1]`), else the lowest pair made of free
    /// and savable SGPRs (the savable ones spilled), or `Err(why)`.
    pub fn pair(&mut self, role: &str) -> Result<u8, String> {
        let find = |pool: Sgprs| (0..105u8).step_by(2).find(|&r| pool >> r & 3 == 3);
        let r = find(self.free)
            .or_else(|| find(self.free | self.savable))
            .ok_or_else(|| format!("no SGPR pair is provably free here for {role}"))?;
        self.take(3u128 << r);
        Ok(r)
    }
}

/// SGPR numbers of a set, ascending.
pub fn members(s: Sgprs) -> impl Iterator<Item = u8> {
    (0..106u8).filter(move |r| s >> r & 1 == 1)
}

/// The VGPR each function may use to save SGPRs in (issue 12 item 3). `caps`: per kernel, its
/// function index, the architected VGPRs its descriptor allocates now, and the most it may be
/// given without fewer waves per SIMD (the caller's occupancy rule). A VGPR is usable when no
/// original instruction of any kernel call graph containing the function touches it (VGPR or
/// AGPR number) and every one of those kernels has it allocated or may grow to it: the highest
/// VGPR already allocated everywhere (no descriptor change), else the lowest untouched one (the
/// smallest growth, the caller grows the descriptors). Its lanes then hold nothing the original program
/// ever reads. `None` for a function no kernel reaches, a call graph with an unresolved call or
/// a function that did not decode, one that indexes VGPRs ([`RegUse::indexes_vgprs`]), or no such VGPR.
/// At most v255 (`v_readlane_b32` / `v_writelane_b32` address v0..v255).
pub fn spill_vgprs(prog: &Program, caps: &[(usize, u32, u32)]) -> Vec<Option<u16>> {
    let n = prog.funcs.len();
    // Per function: highest VGPR/AGPR number + 1 its instructions touch, or None when unknown.
    let top: Vec<Option<u16>> = prog
        .funcs
        .iter()
        .map(|f| {
            if opaque(f) || f.calls.iter().any(|(_, c)| *c == Callee::Indirect) {
                return None;
            }
            if f.reg_use.iter().any(RegUse::indexes_vgprs) {
                return None;
            }
            Some(f.reg_use.iter().map(RegUse::vector_top).max().unwrap_or(0))
        })
        .collect();
    // Per function: (lowest allocation, lowest growth cap, highest top) over the call graphs of
    // the kernels reaching it.
    let mut bound: Vec<Option<(u32, u32, Option<u16>)>> = vec![None; n];
    for &(k, now, cap) in caps {
        let reach = prog.reachable(k);
        let used = reach
            .iter()
            .try_fold(0u16, |a, &g| top[g].map(|t| a.max(t)));
        for &g in &reach {
            bound[g] = Some(match bound[g] {
                None => (now, cap, used),
                Some((a, c, u)) => (a.min(now), c.min(cap), u.zip(used).map(|(x, y)| x.max(y))),
            });
        }
    }
    bound
        .into_iter()
        .map(|b| {
            let (now, cap, used) = b?;
            let used = used?;
            let highest = u16::try_from(now.min(256)).ok()?.checked_sub(1)?;
            if highest >= used {
                return Some(highest);
            }
            (u32::from(used) < cap.min(256)).then_some(used)
        })
        .collect()
}
