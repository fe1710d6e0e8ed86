//! The verifier's CFG of each function: the original instructions with their rewritten jumps'
//! landings, built while the relocated branch, call and address-builder targets are checked
//! ([`Check::Branch`]).

use std::collections::BTreeMap;

use amdgpu_isa::Flow;

use super::subcalls::Resolved;
use crate::program::{Func, Program, Regs};
use crate::{Check, Finding};

/// Successor of an original instruction: index and, for jumps, the rewritten landing address
/// (`None`: falls through into the whole run).
pub(super) type Succ = (usize, Option<u64>);

/// Per original instruction of one function, a list of `u32` (successor indices), all in one
/// flat array (compressed rows): 4 bytes per instruction plus 4 per entry, where a `Vec` per
/// instruction cost about 70 bytes and an allocation each.
#[derive(Default)]
pub(crate) struct Rows {
    /// Row `k` is `to[off[k]..off[k + 1]]`.
    pub(super) off: Vec<u32>,
    pub(super) to: Vec<u32>,
}

impl Rows {
    pub(super) fn with_capacity(n: usize) -> Rows {
        let mut off = Vec::with_capacity(n + 1);
        off.push(0);
        Rows {
            off,
            to: Vec::with_capacity(n),
        }
    }

    /// Appends an entry to the row being built.
    pub(super) fn push(&mut self, v: usize) {
        self.to.push(v as u32);
    }

    /// Closes the row being built (rows are built in order).
    pub(super) fn end_row(&mut self) {
        self.off.push(self.to.len() as u32);
    }

    pub(super) fn range(&self, k: usize) -> std::ops::Range<usize> {
        self.off[k] as usize..self.off[k + 1] as usize
    }

    /// The entries of row `k`.
    pub fn of(&self, k: usize) -> &[u32] {
        &self.to[self.range(k)]
    }

    /// Number of rows (instructions).
    pub fn len(&self) -> usize {
        self.off.len() - 1
    }
}

/// Successors for register facts: a function's CFG edges plus the fall-through of `s_trap`
/// (the trap handler resumes at the next instruction), without a copy of the edges.
pub(crate) struct FactSuccs<'a> {
    pub(super) cfg: &'a Rows,
    /// Ascending indices of `s_trap` instructions with a next instruction.
    pub(super) traps: Vec<u32>,
}

impl FactSuccs<'_> {
    /// The successors of original instruction `k`.
    pub fn each(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let trap = self.traps.binary_search(&(k as u32)).is_ok();
        self.cfg
            .of(k)
            .iter()
            .map(|&s| s as usize)
            .chain(trap.then_some(k + 1))
    }

    /// Whether control leaves the function after `k`.
    pub fn none(&self, k: usize) -> bool {
        self.each(k).next().is_none()
    }
}

/// The CFG of one function over its original instructions, with the rewritten landings of its
/// jumps.
pub(super) struct Cfg {
    /// Successor indices per original instruction.
    pub(super) succs: Rows,
    /// Edges that land at a given address (jumps into a run), ascending by edge index (index
    /// into `succs.to`); every other edge falls into the whole run.
    pub(super) lands: Vec<(u32, u64)>,
    /// Branch edges through a landing block: (branch, successor) → the block's start.
    pub(super) via: BTreeMap<(usize, usize), u64>,
    /// Function exits (end of program, return, tail call) that must leave no open scope.
    pub(super) exits: Vec<usize>,
    /// `s_swappc_b64` calls of subroutines inside the function ([`super::subcalls`]): not calls
    /// of unknown code.
    pub(super) intra_calls: Vec<usize>,
    /// Entries of those subroutines, each with the landing of a call's edge into it.
    pub(super) sub_entries: BTreeMap<usize, Option<u64>>,
    /// `s_setpc_b64` returns from those calls, ascending.
    pub(super) returns: Vec<usize>,
}

impl Cfg {
    pub(super) fn push(&mut self, (s, land): Succ) {
        if let Some(l) = land {
            self.lands.push((self.succs.to.len() as u32, l));
        }
        self.succs.push(s);
    }

    pub(super) fn extend(&mut self, s: Option<Succ>) {
        if let Some(s) = s {
            self.push(s);
        }
    }

    /// The edges `range` (indices into `succs.to`), each with its landing: one walk along the
    /// sparse landings, not a search per edge.
    pub(super) fn edges_in(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Succ> + '_ {
        let mut j = self.lands.partition_point(|e| (e.0 as usize) < range.start);
        range.map(move |i| {
            let land = match self.lands.get(j) {
                Some(&(e, l)) if e as usize == i => {
                    j += 1;
                    Some(l)
                }
                _ => None,
            };
            (self.succs.to[i] as usize, land)
        })
    }

    /// The successors of original instruction `k`.
    pub(super) fn succ(&self, k: usize) -> impl Iterator<Item = Succ> + '_ {
        self.edges_in(self.succs.range(k))
    }

    /// Every edge's successor, by source instruction.
    pub(super) fn edges(&self) -> impl Iterator<Item = Succ> + '_ {
        self.edges_in(0..self.succs.to.len())
    }

    /// Number of original instructions.
    pub(super) fn len(&self) -> usize {
        self.succs.len()
    }
}

/// The scope-filter flag (spec "Scope filtering": computed once at kernel entry from
/// HW_ID / HW_ID1 / HW_ID2 into one reserved SGPR and reused by every marker): a reserved SGPR
/// written by a kernel's entry run that reads a hardware-ID register, and read before being
/// written by some other run. Every kernel entry must then compute it.
/// Index of the original instruction where a kernel's body starts: after the 256-byte
/// kernarg-preload prologue when the kernel has one (an `s_branch` inside the first 256 bytes to
/// entry + 256), else the first instruction.
pub(crate) fn entry_index(f: &Func) -> usize {
    if f.kind != crate::FunctionKind::Kernel {
        return 0;
    }
    let body = f.orig_start + 256;
    // The prologue ends with that branch followed only by `s_nop` padding up to entry + 256
    // (a loop branch that happens to target entry + 256 is followed by real code).
    let in_prologue = f.orig.iter().take_while(|o| o.addr < body);
    let has_prologue = in_prologue.enumerate().any(|(i, o)| {
        let inst = f.inst(o);
        matches!(inst.flow(), Flow::Branch { conditional: false })
            && inst.branch_target(o.addr) == Some(body)
            && f.orig[i + 1..]
                .iter()
                .take_while(|x| x.addr < body)
                .all(|x| f.inst(x).special() == amdgpu_isa::Special::Nop)
    });
    if !has_prologue {
        return 0;
    }
    f.orig.iter().position(|o| o.addr == body).unwrap_or(0)
}

/// Checks one relocated jump and returns the landing if it is inside the same function.
/// `k`: index of the jumping original instruction in function `fi`.
pub(super) fn check_target(
    p: &Program,
    fi: usize,
    k: usize,
    t_o: u64,
    t_n: Option<u64>,
    what: &str,
    findings: &mut Vec<Finding>,
) -> Option<Succ> {
    let f = &p.funcs[fi];
    let o_addr = f.orig[k].addr;
    let n_addr = f.new_address(&f.orig[k]);
    // A relaxed branch reaches its target through a long-branch island, a branch with a landing
    // block through the block's jump.
    let t_n = t_n.map(|t| {
        p.landings
            .get(&t)
            .map(|b| b.dest)
            .or_else(|| p.islands.get(&t).map(|isl| isl.dest))
            .unwrap_or(t)
    })?;
    // A function kept in place runs the original code, so what it reaches outside itself is
    // the original there (kept in `.text`), not another function's instrumented copy.
    if f.kept_in_place && !(f.orig_start <= t_o && t_o < f.orig_end) {
        if t_n != t_o {
            findings.push(f.finding(
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} to orig {t_o:#x} from a function kept in place reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    if !p.otext.contains(t_o) {
        let want = p.map_data(t_o);
        if t_n != want {
            findings.push(f.finding(
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} data target {t_o:#x} should become {want:#x}, reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    // Into a function kept in place that does not decode: the address stays.
    if let Some(name) = p.opaque_at(t_o) {
        if t_n != t_o {
            findings.push(f.finding(
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} to orig {t_o:#x} in {name} (kept in place) reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    let Some((tfi, tk, lands)) = p.landings(t_o, Some(fi)) else {
        findings.push(f.finding(
            Check::Branch,
            Some(o_addr),
            n_addr,
            format!("{what} target {t_o:#x} is not a mapped original instruction"),
        ));
        return None;
    };
    let entry_of_other = tk == 0 && tfi != fi;
    let ok = if entry_of_other {
        lands.clone().next() == Some(t_n)
    } else {
        lands.clone().any(|a| a == t_n)
    };
    if !ok {
        findings.push(f.finding(
            Check::Branch,
            Some(o_addr),
            n_addr,
            format!(
                "{what} to orig {t_o:#x} reaches {t_n:#x}, allowed {}",
                lands
                    .map(|a| format!("{a:#x}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    (tfi == fi).then_some((tk, Some(t_n)))
}

/// The CFG of function `fi`; in a kernel, calls and jumps through a pair built in another
/// block are resolved over a first CFG without them ([`super::subcalls`]) and the CFG is built
/// again with their edges.
pub(super) fn build_cfg(p: &Program, fi: usize, findings: &mut Vec<Finding>) -> Cfg {
    let f = &p.funcs[fi];
    let mut first = Vec::new();
    let cfg = build_cfg_with(p, fi, &mut first, &Resolved::default());
    if f.kind != crate::FunctionKind::Kernel {
        findings.extend(first);
        return cfg;
    }
    let jumps: Vec<usize> = cfg
        .exits
        .iter()
        .copied()
        .filter(|&k| {
            let i = f.inst(&f.orig[k]);
            i.flow() == Flow::IndirectJump && i.special() != amdgpu_isa::Special::AddPcI64
        })
        .collect();
    let extra = super::subcalls::resolve(
        f,
        |k| cfg.succs.of(k).iter().map(|&s| s as usize).collect(),
        &jumps,
    );
    if extra.is_empty() {
        findings.extend(first);
        return cfg;
    }
    build_cfg_with(p, fi, findings, &extra)
}

pub(super) fn build_cfg_with(
    p: &Program,
    fi: usize,
    findings: &mut Vec<Finding>,
    extra: &Resolved,
) -> Cfg {
    let f = &p.funcs[fi];
    let n = f.orig.len();
    let mut cfg = Cfg {
        succs: Rows::with_capacity(n),
        lands: Vec::new(),
        via: BTreeMap::new(),
        exits: Vec::new(),
        intra_calls: extra.calls.keys().copied().collect(),
        sub_entries: BTreeMap::new(),
        returns: extra.returns.keys().copied().collect(),
    };
    // Address builders: their targets, and the intra-function ones by destination pair.
    let mut builder_edges: BTreeMap<usize, (u16, Option<Succ>)> = BTreeMap::new();
    // The last instruction of each builder (by its `s_getpc`).
    let builder_ends: BTreeMap<usize, usize> = f
        .builders
        .iter()
        .map(|b| (b.getpc, b.parts.iter().copied().max().unwrap_or(b.getpc)))
        .collect();
    for b in &f.builders {
        let Some(g) = f.orig.get(b.getpc) else {
            continue;
        };
        let Some(t_o) = b.target_with(g.addr, |k| f.orig.get(k).map(|o| f.inst(o))) else {
            continue;
        };
        let t_n = f.copy(g).and_then(|gn| {
            b.target_with(gn.addr, |k| {
                f.orig.get(k).and_then(|o| f.copy(o)).map(|c| c.inst)
            })
        });
        let edge = check_target(p, fi, b.getpc, t_o, t_n, "address builder", findings);
        builder_edges.insert(b.getpc, (b.dst, edge));
    }
    for (k, o) in f.orig.iter().enumerate() {
        let next = (k + 1 < n).then_some((k + 1, None));
        if f.regs(o).has(Regs::PLAIN) {
            cfg.extend(next);
            cfg.succs.end_row();
            continue;
        }
        let oi = f.inst(o);
        match oi.flow() {
            Flow::Call if extra.calls.contains_key(&k) => {
                cfg.extend(next);
                for g in &extra.calls[&k] {
                    if let Some(&(_, Some(s))) = builder_edges.get(g) {
                        cfg.sub_entries.entry(s.0).or_insert(s.1);
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if extra.jumps.contains_key(&k) => {
                for g in &extra.jumps[&k] {
                    if let Some(&(_, Some(s))) = builder_edges.get(g) {
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if extra.returns.contains_key(&k) => {
                // Returns to the instruction after each call: the call's copy + its length must
                // be where that instruction's run or copy starts.
                for &c in &extra.returns[&k] {
                    let o = &f.orig[c];
                    let len = f.inst(o).len() as u64;
                    let t_n = f.copy(o).map(|nn| nn.addr + nn.inst.len() as u64);
                    if let Some(s) = check_target(p, fi, k, o.addr + len, t_n, "return", findings) {
                        cfg.push(s);
                    }
                }
            }
            Flow::Fallthrough | Flow::Call => cfg.extend(next),
            Flow::Branch { conditional } => {
                if conditional {
                    cfg.extend(next);
                }
                if let Some(t_o) = oi.branch_target(o.addr) {
                    let t_n = f.copy(o).and_then(|nn| nn.inst.branch_target(nn.addr));
                    if let Some(s) = check_target(p, fi, k, t_o, t_n, oi.mnemonic(), findings) {
                        if let Some(b) = t_n.filter(|t| p.landings.contains_key(t)) {
                            cfg.via.insert((k, s.0), b);
                        }
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if oi.special() == amdgpu_isa::Special::AddPcI64 => {
                // gfx1250 long branch: next instruction's address + 64-bit literal.
                let target_of = |i: &amdgpu_isa::Instruction, at: u64| {
                    i.literal().map(|l| (at + i.len() as u64).wrapping_add(l))
                };
                if let Some(t_o) = target_of(&oi, o.addr) {
                    let t_n = f.copy(o).and_then(|nn| target_of(&nn.inst, nn.addr));
                    match check_target(p, fi, k, t_o, t_n, "s_add_pc_i64", findings) {
                        Some(s) => cfg.push(s),
                        None => cfg.exits.push(k),
                    }
                } else {
                    cfg.exits.push(k);
                }
            }
            Flow::IndirectJump => {
                // A long branch: the latest builder before k producing the register pair, when
                // no instruction between them writes the pair (a `s_setpc_b64 s[30:31]` returning
                // from an in-kernel subroutine after an unrelated long branch through s[30:31]
                // is no jump to that branch's target: `super::subcalls` resolves it).
                let src = oi.reads().max_sgpr().map(|r| r.saturating_sub(1));
                let edge = builder_edges
                    .range(..k)
                    .rev()
                    .find(|(_, (d, _))| Some(*d) == src)
                    .filter(|(g, (d, _))| {
                        let last = builder_ends.get(g).copied().unwrap_or(**g);
                        (last + 1..k).all(|j| !super::subcalls::writes_pair(f, j, *d))
                    })
                    .and_then(|(_, (_, e))| *e);
                match edge {
                    Some(s) => cfg.push(s),
                    None => cfg.exits.push(k),
                }
            }
            Flow::EndProgram | Flow::Return => cfg.exits.push(k),
            Flow::Trap => {}
        }
        if oi.mnemonic() == "s_call_b64" || oi.mnemonic() == "s_call_i64" {
            if let Some(t_o) = oi.branch_target(o.addr) {
                let t_n = f.copy(o).and_then(|nn| nn.inst.branch_target(nn.addr));
                check_target(p, fi, k, t_o, t_n, oi.mnemonic(), findings);
            }
        }
        cfg.succs.end_row();
    }
    // Grown past one successor per instruction by conditional branches: kept until the last
    // check.
    cfg.succs.to.shrink_to_fit();
    cfg
}
