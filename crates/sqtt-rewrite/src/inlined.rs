//! Inlined functions as scopes (issue 16; seed spec "Phase 1" / "Phase 2": the compile-time pass
//! gives every inlined instance above the `SQTT_INSTRUMENT_FUNCTIONS` threshold its own scope and
//! an `F:` row without an address). Post link, the only source is DWARF
//! (`DW_TAG_inlined_subroutine`, read by [`dwarf_remap::inlined_scopes`]).
//!
//! # Policy
//!
//! A scope is a set of instructions of one function (a CFG region), not an address range:
//! 1. Its instructions are those whose address lies in the instance's DWARF ranges. Scheduling
//!    scatters them into fragments (maximal runs of consecutive instructions); two fragments
//!    separated by at most [`MERGE_GAP`] foreign instructions are merged into one (the gap joins
//!    the scope), unless a gap instruction belongs to a DWARF instance outside this one's subtree.
//! 2. Fragments (after merging) below the threshold (`--functions N`: N instructions, `cost:N`:
//!    cost N) are not marked; an instance whose own size is below the threshold is not marked.
//! 3. A scope is clipped to its nearest marked enclosing scope, so the open scopes before every
//!    instruction form one chain (outermost first): markers nest as DWARF nests the instances.
//! 4. Instructions that end the function (`s_endpgm`, return, tail call) are outside every
//!    inlined scope: the scopes close on the edge into them.
//! 5. On every CFG edge `p -> k` the markers are the exits of the scopes open at `p` and not at
//!    `k` (bare `0x1`, innermost first), then the enters of the scopes open at `k` and not at `p`
//!    (outermost first); the function's entry is an edge from "nothing open".
//!
//! # Placement without landing blocks (what is not done yet)
//!
//! Markers go in front of `k`; the fall-through edge runs all of them, every branch edge into `k`
//! runs the part placed with [`Landing::Before`] (a suffix). This serves `k` when every branch
//! edge into it needs the same markers and they are a suffix of the fall-through edge's. Where
//! that does not hold (an edge would need a landing block), the scopes involved are left out and
//! reported, and the placement is recomputed without them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use amdgpu_isa::{Flow, Special};
use dwarf_remap::InlinedScope;

use crate::analysis::{Func, Program};
use crate::config::{FunctionThreshold, Options};
use crate::layout::Landing;
use crate::plan::{cost, forbidden_points, MarkerKey, Site, SiteKind, Word};

/// Fragments of one instance separated by at most this many foreign instructions are merged.
pub const MERGE_GAP: usize = 8;

/// One inlined instance that was not marked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeftOut {
    /// Function (symbol) the instance was inlined into.
    pub function: String,
    /// Name of the inlined function (linkage name when DWARF has one).
    pub name: String,
    /// Call site `file:line`.
    pub call: String,
    /// Why it is not marked.
    pub why: String,
}

/// What happened to the inlined instances of one code object.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InlinedReport {
    /// `DW_TAG_inlined_subroutine` entries with code in instrumented functions.
    pub found: usize,
    /// Instances that got enter/exit markers.
    pub marked: usize,
    /// Gaps of foreign instructions merged into a marked instance's region.
    pub merged_gaps: usize,
    /// Fragments of marked instances below the threshold, not marked.
    pub small_fragments: usize,
    /// Instances not marked: below the threshold (counted, not listed).
    pub below_threshold: usize,
    /// Instances not marked for another reason, each with the reason.
    pub left_out: Vec<LeftOut>,
    /// Why no inlined function could be looked for (no inline information in the object, or
    /// unreadable DWARF): said once per object, not per site.
    pub unavailable: Option<String>,
}

/// Marker name of an inlined function: the scopes of one function share one id (the pass gives
/// a function one id, and its markers travel with every inlined copy).
#[derive(Debug, Clone, Default)]
pub struct InlinedNames {
    /// Name and definition site (`file:line`, when DWARF has one) by the key's number.
    pub rows: Vec<(String, Option<String>)>,
}

impl InlinedNames {
    /// Name and location of [`MarkerKey::Inlined`]`(n)`.
    pub fn get(&self, n: u32) -> Option<&(String, Option<String>)> {
        self.rows.get(n as usize)
    }
}

/// Result of [`sites`].
#[derive(Debug, Clone, Default)]
pub struct Planned {
    /// Enter and exit sites, in the order they must be emitted at each point.
    pub sites: Vec<Site>,
    /// Row data for the marker keys used.
    pub names: InlinedNames,
    pub report: InlinedReport,
}

/// Plans inlined-scope markers for the functions of `prog` with `ok[fi]` (instrumented, not left
/// alone), from the input's `.debug_*` sections (`None`: no DWARF). Nothing is planned when the
/// functions option is off.
pub fn sites(
    prog: &Program,
    ok: &[bool],
    opts: &Options,
    dwarf: Option<&HashMap<String, Vec<u8>>>,
) -> Planned {
    let mut out = Planned::default();
    let threshold = match opts.functions {
        FunctionThreshold::Off => return out,
        FunctionThreshold::Count(n) | FunctionThreshold::Cost(n) => n,
    };
    let scopes = match dwarf.map(dwarf_remap::inlined_scopes) {
        Some(Ok(s)) if !s.is_empty() => s,
        Some(Err(e)) => {
            out.report.unavailable = Some(format!(
                "inlined functions not marked: the DWARF cannot be read ({e})"
            ));
            return out;
        }
        _ => {
            out.report.unavailable = Some(
                "inlined functions not marked: the object has no inline information (DWARF DW_TAG_inlined_subroutine; compile with -g or -gline-tables-only)"
                    .into(),
            );
            return out;
        }
    };
    let symbols: BTreeSet<&str> = prog.funcs.iter().map(|f| f.spec.name.as_str()).collect();
    let mut keys: BTreeMap<String, u32> = BTreeMap::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        if !ok.get(fi).copied().unwrap_or(false) {
            continue;
        }
        let mine: Vec<usize> = (0..scopes.len())
            .filter(|&s| {
                scopes[s]
                    .ranges
                    .first()
                    .is_some_and(|&(b, _)| f.spec.start <= b && b < f.spec.end)
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut fp = FuncPlan::new(f, &scopes, &mine, opts.functions, threshold);
        fp.report.found = mine.len();
        for &s in &mine {
            let name = &scopes[s].name;
            if (name.is_empty() || name.contains('@')) && fp.marked.contains(&s) {
                fp.leave(
                    s,
                    "no name a funcmap row can carry (empty or containing '@')",
                );
            }
            if symbols.contains(scopes[s].name.as_str()) && fp.marked.contains(&s) {
                fp.leave(
                    s,
                    "an out-of-line copy of the function exists: its F row belongs to the symbol",
                );
            }
        }
        fp.settle();
        for &s in &fp.marked {
            let name = &scopes[s].name;
            if !keys.contains_key(name) {
                keys.insert(name.clone(), out.names.rows.len() as u32);
                out.names.rows.push((
                    name.clone(),
                    scopes[s]
                        .decl
                        .as_ref()
                        .map(ToString::to_string)
                        .filter(|l| !l.contains('@')),
                ));
            }
        }
        let key = |s: usize| MarkerKey::Inlined(keys[&scopes[s].name]);
        for (k, parts) in fp.placement() {
            let addr = f.insts[k].0;
            for (landing, ops) in parts {
                for op in ops {
                    let (word, kind) = match op {
                        Op::Pop => (Word::Exit, SiteKind::InlinedExit),
                        Op::Push(s) => (Word::Enter(key(s)), SiteKind::InlinedEnter),
                    };
                    out.sites.push(Site {
                        func: fi,
                        before: k,
                        word,
                        landing,
                        kind,
                        addr,
                    });
                }
            }
        }
        let r = &mut out.report;
        r.found += fp.report.found;
        r.marked += fp.marked.len();
        r.merged_gaps += fp.report.merged_gaps;
        r.small_fragments += fp.report.small_fragments;
        r.below_threshold += fp.report.below_threshold;
        r.left_out.extend(fp.report.left_out);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Pop,
    Push(usize),
}

/// Marker operations in front of one instruction, by landing rule.
type Parts = Vec<(Landing, Vec<Op>)>;

/// The scopes of one function.
struct FuncPlan<'a> {
    f: &'a Func,
    scopes: &'a [InlinedScope],
    /// Marked scopes (indices into `scopes`), pre-order.
    marked: Vec<usize>,
    /// Region of each scope: instruction indices, before clipping to marked ancestors.
    region: BTreeMap<usize, BTreeSet<usize>>,
    report: InlinedReport,
}

impl<'a> FuncPlan<'a> {
    fn new(
        f: &'a Func,
        scopes: &'a [InlinedScope],
        mine: &[usize],
        mode: FunctionThreshold,
        threshold: u64,
    ) -> Self {
        let size = |i: usize| match mode {
            FunctionThreshold::Cost(_) => cost(&f.insts[i].1),
            _ => u64::from(!matches!(
                f.insts[i].1.special(),
                Special::Nop | Special::CodeEnd
            )),
        };
        let ends: BTreeSet<usize> = f.exits.iter().map(|&(i, _)| i).collect();
        let mut fp = FuncPlan {
            f,
            scopes,
            marked: Vec::new(),
            region: BTreeMap::new(),
            report: InlinedReport::default(),
        };
        let raw = |s: usize| -> BTreeSet<usize> {
            (0..f.insts.len())
                .filter(|&i| scopes[s].contains(f.insts[i].0))
                .collect()
        };
        let raws: BTreeMap<usize, BTreeSet<usize>> = mine.iter().map(|&s| (s, raw(s))).collect();
        let in_subtree = |s: usize, t: usize| {
            let mut c = Some(t);
            while let Some(x) = c {
                if x == s {
                    return true;
                }
                c = scopes[x].parent;
            }
            false
        };
        for &s in mine {
            let own = &raws[&s];
            let total: u64 = own.iter().map(|&i| size(i)).sum();
            if total < threshold {
                fp.report.below_threshold += 1;
                continue;
            }
            // Merge fragments across short gaps of instructions foreign to this subtree.
            let foreign_owned = |i: usize| {
                raws.iter()
                    .any(|(&t, r)| r.contains(&i) && !in_subtree(s, t) && !in_subtree(t, s))
            };
            let mut frags: Vec<(usize, usize)> = Vec::new();
            for &i in own {
                match frags.last_mut() {
                    Some((_, e)) if *e + 1 == i => *e = i,
                    Some((_, e)) if i - *e - 1 <= MERGE_GAP && !(*e + 1..i).any(foreign_owned) => {
                        fp.report.merged_gaps += 1;
                        *e = i;
                    }
                    _ => frags.push((i, i)),
                }
            }
            let mut region = BTreeSet::new();
            for (b, e) in frags {
                let part: u64 = (b..=e).map(size).sum();
                if part < threshold {
                    fp.report.small_fragments += 1;
                    continue;
                }
                region.extend((b..=e).filter(|i| !ends.contains(i)));
            }
            if region.is_empty() {
                fp.report.below_threshold += 1;
                continue;
            }
            fp.region.insert(s, region);
            fp.marked.push(s);
        }
        fp
    }

    fn leave(&mut self, s: usize, why: &str) {
        if let Some(pos) = self.marked.iter().position(|&x| x == s) {
            self.marked.remove(pos);
            let sc = &self.scopes[s];
            self.report.left_out.push(LeftOut {
                function: self.f.spec.name.clone(),
                name: sc.name.clone(),
                call: sc.call.to_string(),
                why: why.into(),
            });
        }
    }

    /// Nearest marked enclosing scope.
    fn marked_parent(&self, s: usize) -> Option<usize> {
        let mut p = self.scopes[s].parent;
        while let Some(x) = p {
            if self.marked.contains(&x) {
                return Some(x);
            }
            p = self.scopes[x].parent;
        }
        None
    }

    /// Open scopes before each instruction (outermost first), regions clipped to their marked
    /// ancestors; siblings claim instructions in pre-order.
    fn stacks(&self) -> Vec<Vec<usize>> {
        let n = self.f.insts.len();
        let mut clipped: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        let mut claimed: BTreeMap<Option<usize>, BTreeSet<usize>> = BTreeMap::new();
        for &s in &self.marked {
            let parent = self.marked_parent(s);
            let mut r = self.region[&s].clone();
            if let Some(p) = parent {
                r.retain(|i| clipped[&p].contains(i));
            }
            let taken = claimed.entry(parent).or_default();
            r.retain(|i| !taken.contains(i));
            taken.extend(r.iter().copied());
            clipped.insert(s, r);
        }
        let mut out = vec![Vec::new(); n];
        for &s in &self.marked {
            for &i in &clipped[&s] {
                out[i].push(s);
            }
        }
        out
    }

    /// Fall-through and branch predecessors of each instruction.
    fn preds(&self) -> Vec<(Option<usize>, Vec<usize>)> {
        let f = self.f;
        let n = f.insts.len();
        let mut out: Vec<(Option<usize>, Vec<usize>)> = vec![(None, Vec::new()); n];
        for p in 0..n {
            let (addr, inst) = &f.insts[p];
            let falls = matches!(
                inst.flow(),
                Flow::Fallthrough | Flow::Call | Flow::Branch { conditional: true }
            );
            let target = inst.branch_target(*addr);
            for &s in &f.succs[p] {
                if s == p + 1 && falls {
                    out[s].0 = Some(p);
                }
                if s != p + 1 || (target.is_some() && target == f.insts.get(s).map(|x| x.0)) {
                    out[s].1.push(p);
                }
            }
        }
        out
    }

    /// Removes scopes until every point can be served without a landing block. Each round
    /// finds every point that cannot be served and leaves out, per point, the innermost scope
    /// that changes there on some edge (all scopes of the function if none is found, which
    /// cannot happen for a point that needs markers).
    fn settle(&mut self) {
        let forbidden = forbidden_points(self.f);
        let preds = self.preds();
        loop {
            let stacks = self.stacks();
            let mut victims: BTreeMap<usize, String> = BTreeMap::new();
            let mut stuck = false;
            for k in 0..self.f.insts.len() {
                let (ft, brs) = &preds[k];
                let at = &stacks[k];
                let from = |p: Option<usize>| p.map_or(&[][..], |p| stacks[p].as_slice());
                let needs = |p: Option<usize>| from(p) != at.as_slice();
                let entry = k == 0;
                let any = (entry && !at.is_empty())
                    || ft.is_some_and(|p| needs(Some(p)))
                    || brs.iter().any(|&p| needs(Some(p)));
                if !any {
                    continue;
                }
                let seq_b: BTreeSet<(usize, usize)> =
                    brs.iter().map(|&p| edge(from(Some(p)), at)).collect();
                let fall = (ft.is_some() || entry).then(|| edge(from(*ft), at));
                let why = if forbidden.hard.contains(&k) {
                    "no safe insertion point (s_clause window, address builder or kernarg-preload prologue)"
                } else if seq_b.len() > 1 {
                    "branch edges into one instruction need different markers (needs a landing block)"
                } else if matches!((fall, seq_b.iter().next()), (Some(f), Some(&b)) if !suffix(f, b))
                {
                    "the branch edges' markers are not a suffix of the fall-through edge's (needs a landing block)"
                } else {
                    continue;
                };
                // The innermost scope that changes at k on some edge.
                let open_k = |s: &usize| stacks[k].contains(s);
                let victim = stacks[k]
                    .iter()
                    .chain(ft.iter().chain(brs).flat_map(|&p| stacks[p].iter()))
                    .copied()
                    .filter(|s| {
                        ft.iter()
                            .chain(brs)
                            .any(|&p| stacks[p].contains(s) != open_k(s))
                            || (entry && open_k(s))
                    })
                    .max_by_key(|&s| self.scopes[s].depth(self.scopes));
                match victim {
                    Some(s) => {
                        victims
                            .entry(s)
                            .or_insert_with(|| format!("{why} at {:#x}", self.f.insts[k].0));
                    }
                    None => stuck = true,
                }
            }
            if stuck {
                for s in self.marked.clone() {
                    self.leave(s, "scope placement did not converge in this function");
                }
                return;
            }
            if victims.is_empty() {
                return;
            }
            for (s, why) in victims {
                self.leave(s, &why);
            }
        }
    }

    /// Marker operations in front of each instruction: the part only the fall-through edge runs
    /// ([`Landing::After`]), then the part every edge runs ([`Landing::Before`]).
    fn placement(&self) -> Vec<(usize, Parts)> {
        let stacks = self.stacks();
        let preds = self.preds();
        let mut out = Vec::new();
        for k in 0..self.f.insts.len() {
            let (ft, brs) = &preds[k];
            let at = &stacks[k];
            let from = |p: Option<usize>| p.map_or(&[][..], |p| stacks[p].as_slice());
            let entry = k == 0;
            let fall = (ft.is_some() || entry).then(|| edge(from(*ft), at));
            let br = brs.first().map(|&p| edge(from(Some(p)), at));
            let ops = |(pops, keep): (usize, usize), upto: usize| {
                let mut v = vec![Op::Pop; pops];
                v.extend(at[keep..upto].iter().map(|&s| Op::Push(s)));
                v
            };
            let parts = match (fall, br) {
                (None, None) => continue,
                (Some(f), None) => vec![(Landing::Before, ops(f, at.len()))],
                (None, Some(b)) => vec![(Landing::Before, ops(b, at.len()))],
                (Some(f), Some(b)) if b.0 > 0 => vec![
                    (Landing::After, vec![Op::Pop; f.0 - b.0]),
                    (Landing::Before, ops(b, at.len())),
                ],
                (Some(f), Some(b)) => vec![
                    (Landing::After, ops(f, b.1)),
                    (Landing::Before, ops((0, b.1), at.len())),
                ],
            };
            if parts.iter().any(|(_, v)| !v.is_empty()) {
                out.push((k, parts));
            }
        }
        out
    }
}

/// Markers of an edge from open scopes `from` to `to`: (exits, length of the common prefix kept;
/// the enters are `to[kept..]`).
fn edge(from: &[usize], to: &[usize]) -> (usize, usize) {
    let keep = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    (from.len() - keep, keep)
}

/// Whether edge markers `b` are a suffix of edge markers `f` (both into the same instruction).
fn suffix(f: (usize, usize), b: (usize, usize)) -> bool {
    if b.0 > 0 {
        b.1 == f.1 && b.0 <= f.0
    } else {
        b.1 >= f.1
    }
}
