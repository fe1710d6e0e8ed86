//! Calls and returns inside one kernel through an SGPR pair (hipBLASLt's activation
//! epilogues: a chain of blocks each building a label address into one pair, a later
//! `s_swappc_b64 s[r:r+1], s[p:p+1]`, and a subroutine after the kernel's `s_endpgm` returning
//! with `s_setpc_b64 s[r:r+1]`), resolved by the verifier's own reaching-definitions walk over
//! its CFG of the original code.
//!
//! A use of a pair is resolved when every path back from it meets, as the first instruction
//! writing either half of the pair, the last part of a recognised address builder
//! ([`crate::program::builder`]) whose original target lies in the function (a call or jump there), or —
//! for an `s_setpc_b64` — a resolved `s_swappc_b64` writing that pair (a return to the
//! instruction after that call). Anything else (a path from the entry, another write) leaves it
//! unresolved, and the verifier treats it as before: an unknown call or an exit.

use crate::program::Func;
use amdgpu_isa::Flow;
use std::collections::{BTreeMap, BTreeSet};

/// What the walk resolved in one function.
#[derive(Default)]
pub(crate) struct Resolved {
    /// `s_swappc_b64` index → the `s_getpc` indices of the builders it calls.
    pub calls: BTreeMap<usize, Vec<usize>>,
    /// `s_setpc_b64` index → the builders it jumps through (across blocks).
    pub jumps: BTreeMap<usize, Vec<usize>>,
    /// `s_setpc_b64` index → the calls it returns from.
    pub returns: BTreeMap<usize, Vec<usize>>,
}

impl Resolved {
    /// Nothing resolved.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.jumps.is_empty() && self.returns.is_empty()
    }
}

/// The lowest SGPR of the pair instruction `k` reads as a code address.
fn pair_read(f: &Func, k: usize) -> Option<u16> {
    f.inst(&f.orig[k])
        .reads()
        .max_sgpr()
        .map(|r| r.saturating_sub(1))
}

/// The lowest SGPR of the pair `s_swappc_b64` at `k` writes.
fn pair_written(f: &Func, k: usize) -> Option<u16> {
    f.inst(&f.orig[k])
        .writes()
        .max_sgpr()
        .map(|r| r.saturating_sub(1))
}

/// Whether original instruction `j` of `f` writes either half of the SGPR pair `pair`.
pub(super) fn writes_pair(f: &Func, j: usize, pair: u16) -> bool {
    let w = f.regs(&f.orig[j]).sgpr_writes;
    pair < 127 && (w >> pair) & 3 != 0
}

/// The predecessors of a kernel's original instructions, and for each instruction the first
/// of the straight chain it ends: `chain[j] == j` unless `j`'s only predecessor is `j - 1`, and
/// then `chain[j] == chain[j - 1]`. A walk back from `j` passes the whole chain, so per pair it
/// looks up the chain's latest writer at or before `j` (computed once per pair) instead of
/// stepping over each instruction. A predecessor added later makes its instruction a chain
/// start (`cuts`).
struct Back {
    preds: Vec<Vec<usize>>,
    chain: Vec<usize>,
    cuts: BTreeSet<usize>,
    /// Per pair: for each `j`, the latest writer of the pair in `chain[j]..=j`.
    writer: BTreeMap<u16, Vec<Option<usize>>>,
}

impl Back {
    fn new(preds: Vec<Vec<usize>>) -> Back {
        let mut chain: Vec<usize> = (0..preds.len()).collect();
        for j in 1..preds.len() {
            if preds[j].len() == 1 && preds[j][0] == j - 1 {
                chain[j] = chain[j - 1];
            }
        }
        Back {
            preds,
            chain,
            cuts: BTreeSet::new(),
            writer: BTreeMap::new(),
        }
    }

    /// A new predecessor `p` of `to`.
    fn add_pred(&mut self, to: usize, p: usize) {
        self.preds[to].push(p);
        if self.chain[to] != to {
            self.cuts.insert(to);
        }
    }

    /// The first instruction of the chain `j` ends now.
    fn first(&self, j: usize) -> usize {
        let c = self.chain[j];
        if c == j {
            // `j` starts its chain (the cuts between would be an empty, inverted range).
            return j;
        }
        self.cuts.range(c + 1..=j).next_back().copied().unwrap_or(c)
    }

    /// The latest writer of `pair` from the first instruction of `j`'s chain to `j`.
    fn writer_in_chain(&mut self, f: &Func, pair: u16, j: usize) -> Option<usize> {
        let first = self.first(j);
        let chain = &self.chain;
        let w = self.writer.entry(pair).or_insert_with(|| {
            let mut w: Vec<Option<usize>> = Vec::with_capacity(chain.len());
            for k in 0..chain.len() {
                let here = if writes_pair(f, k, pair) {
                    Some(k)
                } else if chain[k] != k {
                    w[k - 1]
                } else {
                    None
                };
                w.push(here);
            }
            w
        });
        w[j].filter(|&x| x >= first)
    }
}

/// First writers of `pair` on every path back from `at` (`None`: a path reaches the entry).
/// `marked`: one flag per instruction, all false on entry and on return (the walk clears what
/// it set, so one buffer serves every walk of a function).
fn first_writers(
    f: &Func,
    back: &mut Back,
    marked: &mut [bool],
    at: usize,
    pair: u16,
) -> Option<BTreeSet<usize>> {
    let mut reached = Vec::new();
    let found = walk_back(f, back, marked, &mut reached, at, pair);
    for j in reached {
        marked[j] = false;
    }
    found
}

/// The walk of [`first_writers`]; every index it marks is pushed on `reached`.
fn walk_back(
    f: &Func,
    back: &mut Back,
    marked: &mut [bool],
    reached: &mut Vec<usize>,
    at: usize,
    pair: u16,
) -> Option<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    let mut stack = back.preds.get(at)?.clone();
    if at == 0 || stack.is_empty() {
        return None;
    }
    while let Some(j) = stack.pop() {
        if std::mem::replace(&mut marked[j], true) {
            continue;
        }
        reached.push(j);
        if let Some(w) = back.writer_in_chain(f, pair, j) {
            out.insert(w);
            continue;
        }
        match back.first(j) {
            0 => return None,
            first => stack.extend(back.preds[first].iter().copied()),
        }
    }
    Some(out)
}

/// Resolves the in-function calls and the jumps of kernel `f` (see the module docs).
/// `succ(k)`: the CFG successors found without them; `unresolved_jumps`: the `s_setpc_b64`
/// indices that CFG treats as exits.
pub(crate) fn resolve(
    f: &Func,
    succ: impl Fn(usize) -> Vec<usize>,
    unresolved_jumps: &[usize],
) -> Resolved {
    let n = f.orig.len();
    let mut res = Resolved::default();
    let calls: Vec<usize> = (0..n)
        .filter(|&k| {
            let i = f.inst(&f.orig[k]);
            i.flow() == Flow::Call && i.branch_target(f.orig[k].addr).is_none()
        })
        .collect();
    if calls.is_empty() && unresolved_jumps.is_empty() {
        return res;
    }
    // Builders by their last part: (pair, `s_getpc` index, index of the instruction at the
    // in-function target when one starts there).
    let mut ends: BTreeMap<usize, (u16, usize, Option<usize>)> = BTreeMap::new();
    for b in &f.builders {
        let (Some(g), Some(&last)) = (f.orig.get(b.getpc), b.parts.iter().max()) else {
            continue;
        };
        let Some(t) = b.target_with(g.addr, |k| f.orig.get(k).map(|o| f.inst(o))) else {
            continue;
        };
        if t >= f.orig_start && t < f.orig_end {
            let ti = f.orig.binary_search_by_key(&t, |o| o.addr).ok();
            ends.insert(last, (b.dst, b.getpc, ti));
        }
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for k in 0..n {
        for s in succ(k) {
            if let Some(p) = preds.get_mut(s) {
                p.push(k);
            }
        }
    }
    let mut back = Back::new(preds);
    let mut marked = vec![false; n];
    // The builders (by last part) behind every definition, when all are builders of `pair`.
    let through_builders = |defs: &BTreeSet<usize>, pair: u16| -> Option<Vec<usize>> {
        defs.iter()
            .map(|d| ends.get(d).filter(|e| e.0 == pair).map(|_| *d))
            .collect()
    };
    for &k in &calls {
        let Some(pair) = pair_read(f, k) else {
            continue;
        };
        if let Some(lasts) = first_writers(f, &mut back, &mut marked, k, pair)
            .and_then(|d| through_builders(&d, pair))
        {
            // The subroutine entries become successors of the call for the returns' walk.
            for (_, _, ti) in lasts.iter().map(|d| ends[d]) {
                if let Some(ti) = ti {
                    back.add_pred(ti, k);
                }
            }
            res.calls
                .insert(k, lasts.iter().map(|d| ends[d].1).collect());
        }
    }
    for &k in unresolved_jumps {
        let Some(pair) = pair_read(f, k) else {
            continue;
        };
        let Some(defs) = first_writers(f, &mut back, &mut marked, k, pair) else {
            continue;
        };
        if let Some(lasts) = through_builders(&defs, pair) {
            res.jumps
                .insert(k, lasts.iter().map(|d| ends[d].1).collect());
        } else if defs
            .iter()
            .all(|d| res.calls.contains_key(d) && pair_written(f, *d) == Some(pair))
        {
            res.returns.insert(k, defs.into_iter().collect());
        }
    }
    res
}
