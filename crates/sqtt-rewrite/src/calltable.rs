//! Jumps and calls through an SGPR pair whose address was built in another block (issue 37,
//! item 3): hipBLASLt's activation epilogues choose one of several blocks with an
//! `s_cmp`/`s_cbranch` chain, each builds the address of a label such as
//! `label_Activation_Gelu_VW1` into one pair with an `s_getpc` address builder and branches to a
//! join; later `s_swappc_b64 s[r:r+1], s[p:p+1]` calls it and the subroutine, inside the same
//! kernel symbol, returns with `s_setpc_b64 s[r:r+1]`.
//!
//! Resolution is by reaching definitions of the pair over the function's CFG: every path back
//! from the use must meet, as the first write of either half of the pair, the last instruction
//! of a recognised address builder (a call or jump to its target) or, for a jump, a resolved
//! in-function `s_swappc_b64` that wrote the pair (a return to the instruction after that
//! call). A path that reaches the function entry, or meets any other write first, leaves the
//! use unresolved, and the caller keeps its earlier decision (an indirect call, a return, or in
//! a kernel a [`Problem`] that leaves the function alone). Since the first write on every path
//! back from a return is its call, the return pair is provably not written between the call and
//! the return. The edges found are added as extra successors ([`Func::more_succs`]) so that
//! liveness sees the subroutine bodies between each call and the instruction after it.

use crate::analysis::{Func, Problem};
use crate::layout::{PcRel, PcRelUse};
use std::collections::{BTreeMap, BTreeSet};

/// A use of an SGPR pair as a code address that straight-line analysis did not resolve.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    /// Instruction index of the `s_setpc_b64` / `s_swappc_b64`.
    pub at: usize,
    /// First SGPR of the pair read.
    pub pair: u16,
    /// `s_swappc_b64` (a call) rather than `s_setpc_b64` (a jump).
    pub call: bool,
}

/// The last instruction of a recognised address builder: (instruction index, pair, index of the
/// builder in the program's list).
pub(crate) type Built = (usize, u16, usize);

/// What a pending use resolved to.
pub(crate) enum Resolved {
    /// Calls or jumps to these in-function instruction indices.
    Targets(Vec<usize>),
    /// Returns to the instructions after these in-function calls.
    Returns(Vec<usize>),
}

/// Whether instruction `j` writes SGPR `n` or `n + 1`.
fn writes_pair(f: &Func, j: usize, n: u16) -> bool {
    let w = f.reg_use[j].operand_writes();
    n < 127 && (w >> n) & 3 != 0
}

/// The instructions one backward walk has visited, for many walks over one function: each
/// instruction holds the number of the last walk that visited it, so a new walk starts without
/// clearing anything (a hipBLASLt gfx1201 kernel has ~76 calls through a pair in ~2,600
/// instructions; a tree set per walk cost a quarter of the rewrite).
struct Visited {
    /// Per instruction index: the walk that last visited it (0: none).
    walk_of: Vec<u32>,
    /// The current walk's number (from 1).
    walk: u32,
}

impl Visited {
    /// No instruction of a function of `n` instructions visited.
    fn new(n: usize) -> Self {
        Self {
            walk_of: vec![0; n],
            walk: 0,
        }
    }

    /// Starts a walk: nothing visited.
    fn start(&mut self) {
        self.walk = self.walk.wrapping_add(1);
        if self.walk == 0 {
            self.walk_of.fill(0);
            self.walk = 1;
        }
    }

    /// Marks `j` visited; false when this walk had visited it already.
    fn visit(&mut self, j: usize) -> bool {
        let fresh = self.walk_of[j] != self.walk;
        self.walk_of[j] = self.walk;
        fresh
    }
}

/// The reaching definitions of `pair` at instruction `at`: `Ok` with the defining instruction
/// indices, or `Err` with why they are not all known.
fn reaching_defs(
    f: &Func,
    preds: &[Vec<usize>],
    seen: &mut Visited,
    at: usize,
    pair: u16,
) -> Result<BTreeSet<usize>, String> {
    let mut defs = BTreeSet::new();
    seen.start();
    let mut stack: Vec<usize> = preds[at].clone();
    if at == 0 {
        return Err("the pair is not set before the function's entry".into());
    }
    if preds[at].is_empty() {
        return Err("no path reaches it".into());
    }
    while let Some(j) = stack.pop() {
        if !seen.visit(j) {
            continue;
        }
        if writes_pair(f, j, pair) {
            defs.insert(j);
            continue;
        }
        if j == 0 {
            return Err(
                "the address pair is not set on every path from the function's entry".into(),
            );
        }
        stack.extend(preds[j].iter().copied());
    }
    Ok(defs)
}

/// Predecessors from the successors found so far (inline and extra).
fn predecessors(f: &Func) -> Vec<Vec<usize>> {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); f.insts.len()];
    for i in 0..f.insts.len() {
        for s in f.successors(i) {
            if let Some(p) = preds.get_mut(s) {
                p.push(i);
            }
        }
    }
    preds
}

/// Resolves `pending` uses of `f` (calls first, then jumps, so that a return sees the edges of
/// the calls). `built` are the function's builders by last instruction; `pcrels` the program's
/// builders (a builder whose target becomes a call or jump destination is marked
/// [`PcRelUse::Branch`]). Adds the edges and leaders; returns each use with its resolution or
/// why it stays unresolved.
pub(crate) fn resolve(
    f: &mut Func,
    pending: &[Pending],
    built: &[Built],
    pcrels: &mut [PcRel],
) -> Vec<(Pending, Result<Resolved, String>)> {
    let by_end: BTreeMap<usize, (u16, usize)> =
        built.iter().map(|&(j, p, k)| (j, (p, k))).collect();
    let mut out = Vec::new();
    let mut calls: BTreeMap<usize, u16> = BTreeMap::new(); // resolved call -> return pair
    let mut order: Vec<Pending> = pending.to_vec();
    order.sort_by_key(|p| !p.call);
    // Built once; each edge found below is added to it, so later uses (the returns) see it.
    let mut preds = predecessors(f);
    let mut seen = Visited::new(preds.len());
    for p in order {
        let res = reaching_defs(f, &preds, &mut seen, p.at, p.pair).and_then(|defs| {
            let mut targets = Vec::new();
            let mut returns = Vec::new();
            for &d in &defs {
                match (by_end.get(&d), calls.get(&d)) {
                    (Some(&(bp, k)), _) if bp == p.pair => {
                        let t = pcrels[k].target;
                        let in_fn = t >= f.spec.start && t < f.spec.end;
                        match f.insts.index_of(t).filter(|_| in_fn) {
                            Some(ti) => targets.push((ti, k)),
                            None => {
                                return Err(format!(
                                    "its address {t:#x} is not an instruction of this function"
                                ))
                            }
                        }
                    }
                    (_, Some(&rp)) if rp == p.pair && !p.call => returns.push(d),
                    _ => {
                        return Err(format!(
                            "the address pair is set by {} at {:#x}, not by an address builder{}",
                            f.insts.get(d).mnemonic(),
                            f.insts.addr(d),
                            if p.call { "" } else { " or a call" }
                        ))
                    }
                }
            }
            match (targets.is_empty(), returns.is_empty()) {
                (false, true) => {
                    for &(ti, k) in &targets {
                        pcrels[k].use_kind = PcRelUse::Branch;
                        f.leaders.insert(ti);
                    }
                    Ok(Resolved::Targets(
                        targets.into_iter().map(|t| t.0).collect(),
                    ))
                }
                (true, false) => Ok(Resolved::Returns(returns)),
                (true, true) => Err("no definition of the address pair reaches it".into()),
                (false, false) => Err("it is both a jump to built addresses and a return".into()),
            }
        });
        if let Ok(r) = &res {
            let dests: Vec<usize> = match r {
                Resolved::Targets(t) => t.clone(),
                Resolved::Returns(c) => c
                    .iter()
                    .map(|c| c + 1)
                    .filter(|&s| s < f.insts.len())
                    .collect(),
            };
            let more = f.more_succs.entry(p.at).or_default();
            for d in dests {
                if !more.contains(&d) {
                    more.push(d);
                    preds[d].push(p.at);
                }
            }
            if p.call {
                if let Some(rp) = return_pair(f, p.at) {
                    calls.insert(p.at, rp);
                }
            }
        }
        out.push((p, res));
    }
    out
}

/// The pair an `s_swappc_b64` writes its return address to (its destination).
fn return_pair(f: &Func, at: usize) -> Option<u16> {
    let w = f.reg_use[at].operand_writes();
    (0..127u16).find(|&n| (w >> n) & 3 == 3)
}

/// The problem of a kernel jump that stays unresolved.
pub(crate) fn unresolved(f: &Func, p: &Pending, why: &str) -> Problem {
    Problem {
        addr: f.insts.addr(p.at),
        why: format!("indirect jump through a register in a kernel ({why})"),
    }
}
