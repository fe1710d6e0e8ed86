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

/// The predecessors of each instruction, with the straight-line runs they form: a walk back
/// from `j` must pass every instruction down to the head of its run ([`Graph::head`]; each
/// instruction after the head has the one before it as its only predecessor), so it looks up
/// the last write of a pair in that run ([`Graph::last_write`]) instead of stepping over each
/// instruction. Edges added while resolving ([`Graph::add_edge`]) split runs.
struct Graph {
    /// Predecessors of instruction `j`: `base[base_at[j]..base_at[j + 1]]`
    /// ([`Func::flat_predecessors`]), then `added[j]`.
    base_at: Vec<usize>,
    base: Vec<usize>,
    added: BTreeMap<usize, Vec<usize>>,
    /// The head of each instruction's run over the predecessors found before resolving.
    run_start: Vec<usize>,
    /// Instructions that head a run since an edge to them was added.
    splits: BTreeSet<usize>,
    /// Per SGPR pair asked about: for each instruction `j`, the last instruction in
    /// `run_start[j]..=j` that writes the pair.
    last_write: BTreeMap<u16, Vec<Option<usize>>>,
}

impl Graph {
    /// From the successors found so far (inline and extra).
    fn new(f: &Func) -> Self {
        let n = f.insts.len();
        let (base_at, base) = f.flat_predecessors();
        let mut run_start = vec![0; n];
        for j in 1..n {
            run_start[j] = if base[base_at[j]..base_at[j + 1]] == [j - 1] {
                run_start[j - 1]
            } else {
                j
            };
        }
        Self {
            base_at,
            base,
            added: BTreeMap::new(),
            run_start,
            splits: BTreeSet::new(),
            last_write: BTreeMap::new(),
        }
    }

    /// Instructions in the function.
    fn len(&self) -> usize {
        self.run_start.len()
    }

    /// The predecessors of `j`.
    fn preds(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        self.base[self.base_at[j]..self.base_at[j + 1]]
            .iter()
            .chain(self.added.get(&j).into_iter().flatten())
            .copied()
    }

    /// The first instruction of `j`'s run.
    fn head(&self, j: usize) -> usize {
        let start = self.run_start[j];
        match self.splits.range(..=j).next_back() {
            Some(&s) if s > start => s,
            _ => start,
        }
    }

    /// The last write of `pair` in the run of `j`, from its head to `j`.
    fn last_write(&mut self, f: &Func, pair: u16, j: usize) -> Option<usize> {
        let head = self.head(j);
        let starts = &self.run_start;
        let w = self.last_write.entry(pair).or_insert_with(|| {
            let mut last = vec![None; starts.len()];
            for k in 0..starts.len() {
                last[k] = if writes_pair(f, k, pair) {
                    Some(k)
                } else if starts[k] == k {
                    None
                } else {
                    last[k - 1]
                };
            }
            last
        })[j];
        w.filter(|&w| w >= head)
    }

    /// Adds the edge `from` → `to`: `to` then heads a run of its own.
    fn add_edge(&mut self, from: usize, to: usize) {
        self.added.entry(to).or_default().push(from);
        if self.run_start[to] != to {
            self.splits.insert(to);
        }
    }
}

/// The reaching definitions of `pair` at instruction `at`: `Ok` with the defining instruction
/// indices, or `Err` with why they are not all known.
fn reaching_defs(
    f: &Func,
    g: &mut Graph,
    seen: &mut Visited,
    at: usize,
    pair: u16,
) -> Result<BTreeSet<usize>, String> {
    let mut defs = BTreeSet::new();
    seen.start();
    if at == 0 {
        return Err("the pair is not set before the function's entry".into());
    }
    if g.preds(at).next().is_none() {
        return Err("no path reaches it".into());
    }
    let mut stack: Vec<usize> = g.preds(at).collect();
    while let Some(j) = stack.pop() {
        if !seen.visit(j) {
            continue;
        }
        // The walk back from `j` passes its run down to the first write of the pair in it.
        if let Some(w) = g.last_write(f, pair, j) {
            defs.insert(w);
            continue;
        }
        let head = g.head(j);
        if head == 0 {
            return Err(
                "the address pair is not set on every path from the function's entry".into(),
            );
        }
        stack.extend(g.preds(head));
    }
    Ok(defs)
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
    let mut graph = Graph::new(f);
    let mut seen = Visited::new(graph.len());
    for p in order {
        let res = reaching_defs(f, &mut graph, &mut seen, p.at, p.pair).and_then(|defs| {
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
                    graph.add_edge(p.at, d);
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
