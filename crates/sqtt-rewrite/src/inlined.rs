//! Inlined functions as scopes (issue 16; spec "Phase 1" / "Phase 2": the compile-time pass
//! gives every inlined instance above the `SQTT_INSTRUMENT_FUNCTIONS` threshold its own scope and
//! an `F:` row without an address). Post link, the only source is DWARF
//! (`DW_TAG_inlined_subroutine`, read by [`dwarf_remap::LocationIndex::inlined`]).
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
//! # Placement
//!
//! Markers of the edges into `k` go in front of `k`: the fall-through edge runs all of them,
//! every branch edge into `k` runs the part placed with [`Landing::Before`] (a suffix). A branch
//! edge that needs more (its markers differ from the fall-through edge's or from another branch
//! edge's) gets a landing block: its SOPP branch is retargeted to a small block after it,
//! `{markers; s_branch k}` ([`Landing::Edge`], laid out by [`crate::layout`] like a long-branch
//! island, so a branch pushed out of range turns the block's jump into a long one). Where that is
//! not possible (the edge comes from an indirect or long jump, there is no safe insertion point,
//! or the target has no landing blocks) the scopes involved are left out and reported, and the
//! placement is recomputed without them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rayon::prelude::*;

use amdgpu_isa::{Flow, Special};
use dwarf_remap::{InlinedScope, LocationIndex};

use crate::analysis::{Func, Program};
use crate::config::{FunctionThreshold, Options};
use crate::layout::{Landing, Reloc};
use crate::plan::{cost, forbidden_points, Forbidden, MarkerKey, Site, SiteKind, Word};

mod loop_scopes;
mod region_scopes;
pub use loop_scopes::{LoopLeftOut, LoopReport};
use loop_scopes::{LoopNode, NodeKind};
pub use region_scopes::{RegionReport, RegionSkipped};

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
    /// Branch edges given a landing block (their markers differ from the other edges' into the
    /// same instruction).
    pub landing_blocks: usize,
    /// Instances not marked: below the threshold (counted, not listed).
    pub below_threshold: usize,
    /// Instances not marked for another reason, each with the reason.
    pub left_out: Vec<LeftOut>,
    /// Why no inlined function could be looked for (no inline information in the object,
    /// unreadable DWARF, or no inlined instance inside an instrumented function): said once per
    /// object, not per site.
    pub unavailable: Option<String>,
    /// The object has DWARF that cannot be read (the reader's error): its inlined functions are
    /// not marked, a loss of coverage (`--strict` fails). Absent from the JSON report when the
    /// DWARF was read or there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dwarf_error: Option<String>,
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
    /// Row data for the [`MarkerKey::Loop`] keys used (name, header `file:line`).
    pub loop_names: InlinedNames,
    /// What happened to the loops (`--loops`; `None` when not asked for).
    pub loops: Option<LoopReport>,
    /// Back-edge point markers (`--loops N:iters`) that could not be placed, with the reason.
    pub skipped: Vec<crate::plan::Skipped>,
    /// Row data for the [`MarkerKey::Region`] keys used (name; the location is in the name).
    pub region_names: InlinedNames,
    /// Row data for the [`MarkerKey::UserPoint`] keys used.
    pub point_names: InlinedNames,
    /// What happened to the user-named regions and points (`--region`, `--point`; `None` when
    /// none was asked for).
    pub regions: Option<RegionReport>,
}

/// Plans inlined-scope markers for the functions of `prog` with `ok[fi]` (instrumented, not left
/// alone), from the index of the input's DWARF (`None`: no DWARF; `Err`: why it cannot be read). Nothing is planned when the
/// functions option is off.
pub fn sites(
    prog: &Program,
    ok: &[bool],
    opts: &Options,
    dwarf: Option<&Result<LocationIndex, String>>,
) -> Planned {
    let mut out = Planned::default();
    let max_depth = opts.loops;
    if max_depth.is_some() {
        out.loops = Some(LoopReport::default());
    }
    let specs = &opts.regions[..];
    if !specs.is_empty() {
        let count = |k| specs.iter().filter(|s| s.kind == k).count();
        out.regions = Some(RegionReport {
            regions: count(crate::regions::SpecKind::Region),
            points: count(crate::regions::SpecKind::Point),
            ..Default::default()
        });
    }
    let threshold = match opts.functions {
        FunctionThreshold::Off if max_depth.is_none() && specs.is_empty() => return out,
        FunctionThreshold::Off => 0,
        FunctionThreshold::Count(n) | FunctionThreshold::Cost(n) => n,
    };
    let scopes = match dwarf {
        _ if opts.functions == FunctionThreshold::Off => &[][..],
        Some(Ok(ix)) if !ix.inlined().is_empty() => ix.inlined(),
        Some(Err(e)) => {
            out.report.unavailable = Some(format!(
                "inlined functions not marked: the DWARF cannot be read ({e})"
            ));
            out.report.dwarf_error = Some(e.clone());
            &[][..]
        }
        _ => {
            out.report.unavailable = Some(
                "inlined functions not marked: the object has no inline information (DWARF DW_TAG_inlined_subroutine; compile with -g or -gline-tables-only)"
                    .into(),
            );
            &[][..]
        }
    };
    if scopes.is_empty() && max_depth.is_none() && specs.is_empty() {
        return out;
    }
    let lines = match dwarf {
        Some(Ok(ix)) => Some(ix),
        _ => None,
    };
    let symbols: HashSet<&str> = prog.funcs.iter().map(|f| f.spec.name.as_str()).collect();
    let by_start = ScopesByStart::new(scopes);
    let landing_blocks = crate::layout::may_add_branches(prog.target);
    // Each function is planned on its own (in parallel); marker keys are then numbered in
    // function order, as a sequential walk would number them.
    let plans: Vec<(usize, FuncPlan, region_scopes::Resolved)> = prog
        .funcs
        .par_iter()
        .enumerate()
        .filter(|&(fi, _)| ok.get(fi).copied().unwrap_or(false))
        .filter_map(|(fi, f)| {
            let mine = by_start.within(f.spec.start, f.spec.end);
            let found = max_depth.map(|_| crate::loops::find(f));
            let no_cycles = |l: &crate::loops::Loops| l.loops.is_empty() && l.irreducible.is_empty();
            let resolved = region_scopes::resolve(f, specs, lines);
            if mine.is_empty() && found.as_ref().is_none_or(no_cycles) && resolved.is_empty() {
                return None;
            }
            let mut fp = FuncPlan::new(f, scopes, &mine, opts.functions, threshold, specs);
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
            if let (Some(max), Some(found)) = (max_depth, found) {
                fp.add_loops(found, max, lines);
            }
            fp.add_regions(&resolved.regions, lines);
            fp.settle(landing_blocks);
            Some((fi, fp, resolved))
        })
        .collect();
    let mut keys: HashMap<String, u32> = HashMap::new();
    // Specifications some function answered (code or a problem); the others matched nothing.
    let mut answered: HashSet<usize> = HashSet::new();
    for (fi, mut fp, resolved) in plans {
        let f = &prog.funcs[fi];
        answered.extend(resolved.answered());
        let mut loop_key: HashMap<usize, MarkerKey> = HashMap::new();
        for &s in &fp.marked {
            if let Some(l) = fp.loop_node(s) {
                let (names, key): (_, fn(u32) -> MarkerKey) = match l.kind {
                    NodeKind::Loop => (&mut out.loop_names, MarkerKey::Loop),
                    NodeKind::Region(_) => (&mut out.region_names, MarkerKey::Region),
                };
                loop_key.insert(s, key(names.rows.len() as u32));
                names.rows.push((l.name.clone(), l.loc.clone()));
                continue;
            }
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
        let key = |s: usize| match loop_key.get(&s) {
            Some(&k) => k,
            None => MarkerKey::Inlined(keys[&scopes[s].name]),
        };
        // (point, rank at the point, landing rule, operation); the edge of an unconditional
        // branch goes in front of the branch, after the markers of the edges into it: every path
        // through the branch takes the edge, so it needs no landing block.
        let conditional = |p: usize| f.insts.flow(p) == Flow::Branch { conditional: true };
        let mut placed: Vec<(usize, u8, Landing, Op)> = Vec::new();
        let mut blocks = 0;
        for (k, parts) in fp.placement() {
            for (landing, ops) in parts {
                let (before, rank, landing) = match *landing {
                    Landing::Edge(p) if !conditional(p) => (p, 2, Landing::Before),
                    Landing::After => (*k, 0, Landing::After),
                    l => (*k, 1, l),
                };
                blocks += usize::from(matches!(landing, Landing::Edge(_)) && !ops.is_empty());
                placed.extend(ops.iter().map(|&op| (before, rank, landing, op)));
            }
        }
        placed.sort_by_key(|x| (x.0, x.1));
        for (before, _, landing, op) in placed {
            let kinds = |s: usize| match loop_key.get(&s) {
                Some(MarkerKey::Region(_)) => (SiteKind::RegionEnter, SiteKind::RegionExit),
                Some(_) => (SiteKind::LoopEnter, SiteKind::LoopExit),
                None => (SiteKind::InlinedEnter, SiteKind::InlinedExit),
            };
            let (word, kind) = match op {
                Op::Pop(s) => (Word::Exit, kinds(s).1),
                Op::Push(s) => (Word::Enter(key(s)), kinds(s).0),
            };
            out.sites.push(Site {
                func: fi,
                before,
                word,
                landing,
                kind,
                addr: f.insts.addr(before),
            });
        }
        if opts.loop_iters && !loop_key.is_empty() {
            let forbidden = forbidden_points(f);
            for &s in &fp.marked {
                for (p, at) in fp.iteration_points(s, &forbidden, landing_blocks) {
                    match at {
                        Ok((before, landing)) => {
                            fp.loop_report.iteration_markers += 1;
                            let MarkerKey::Loop(n) = loop_key[&s] else {
                                continue;
                            };
                            out.sites.push(Site {
                                func: fi,
                                before,
                                word: Word::Point(MarkerKey::LoopIter(n)),
                                landing,
                                kind: SiteKind::LoopIteration,
                                addr: f.insts.addr(p),
                            });
                        }
                        Err(why) => out.skipped.push(crate::plan::Skipped {
                            function: f.spec.name.clone(),
                            addr: f.insts.addr(p),
                            kind: SiteKind::LoopIteration,
                            why: why.into(),
                        }),
                    }
                }
            }
        }
        if let Some(lr) = out.loops.as_mut() {
            lr.add(&fp.loop_report);
        }
        if out.regions.is_some() {
            region_scopes::finish(f, fi, &fp.region_report, resolved, specs, lines, &mut out);
        }
        let r = &mut out.report;
        r.found += fp.report.found;
        // Loop and region nodes follow the inlined scopes' indices: not counted here.
        r.marked += fp.marked.iter().filter(|&&s| s < scopes.len()).count();
        r.merged_gaps += fp.report.merged_gaps;
        r.small_fragments += fp.report.small_fragments;
        r.landing_blocks += blocks;
        r.below_threshold += fp.report.below_threshold;
        r.left_out.extend(fp.report.left_out);
    }
    if let Some(rr) = out.regions.as_mut() {
        for (si, s) in specs.iter().enumerate() {
            if !answered.contains(&si) {
                rr.skipped.push(RegionSkipped {
                    kind: s.kind,
                    spec: s.to_string(),
                    function: None,
                    why: region_scopes::no_code(s, lines.is_some()),
                });
            }
        }
    }
    if out.report.found == 0 && !scopes.is_empty() {
        out.report.unavailable = Some(format!(
            "inlined functions not marked: none of the {} inlined instances in the DWARF starts inside an instrumented function (addresses outside those functions' ranges in .text)",
            scopes.len()
        ));
    }
    out
}

/// Scope indices ordered by the start of their first DWARF range (bytes), to find the scopes
/// of one function without scanning every scope of the object.
struct ScopesByStart(Vec<(u64, usize)>);

impl ScopesByStart {
    fn new(scopes: &[InlinedScope]) -> Self {
        let mut v: Vec<(u64, usize)> = scopes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.ranges.first().map(|&(b, _)| (b, i)))
            .collect();
        v.sort_unstable();
        ScopesByStart(v)
    }

    /// Indices (ascending: `.debug_info` pre-order) of the scopes whose first range starts in
    /// `[start, end)` (bytes).
    fn within(&self, start: u64, end: u64) -> Vec<usize> {
        let lo = self.0.partition_point(|&(b, _)| b < start);
        let hi = self.0.partition_point(|&(b, _)| b < end);
        let mut v: Vec<usize> = self.0[lo..hi].iter().map(|&(_, i)| i).collect();
        v.sort_unstable();
        v
    }
}

/// One marker of an edge. A bare exit closes the innermost open scope whichever it is, so two
/// exits are the same marker: `Pop` carries the scope it closes on the edge it was computed for
/// only to name the site's kind in the report, and is equal to every other `Pop`.
#[derive(Debug, Clone, Copy)]
enum Op {
    Pop(usize),
    Push(usize),
}

impl PartialEq for Op {
    fn eq(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::Pop(_), Op::Pop(_)) => true,
            (Op::Push(a), Op::Push(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Op {}

/// Marker operations in front of one instruction, by landing rule.
type Parts = Vec<(Landing, Vec<Op>)>;

/// The scopes of one function.
struct FuncPlan<'a> {
    f: &'a Func,
    scopes: &'a [InlinedScope],
    /// Marked scopes (indices into `scopes`), pre-order.
    marked: Vec<usize>,
    /// Region of each scope: instruction indices (ascending), before clipping to marked
    /// ancestors.
    region: BTreeMap<usize, Vec<usize>>,
    /// Marker operations by point, as [`FuncPlan::settle`] placed them.
    placed: Vec<(usize, Parts)>,
    report: InlinedReport,
    /// Loops and user-named regions given scopes (`--loops`, `--region`): node
    /// `scopes.len() + i` is `loops[i]`.
    loops: Vec<LoopNode>,
    loop_report: LoopReport,
    /// Regions of this function (`--region`).
    region_report: RegionReport,
    /// The region and point specifications ([`crate::config::Options::regions`]).
    specs: &'a [crate::regions::Spec],
}

impl<'a> FuncPlan<'a> {
    fn new(
        f: &'a Func,
        scopes: &'a [InlinedScope],
        mine: &[usize],
        mode: FunctionThreshold,
        threshold: u64,
        specs: &'a [crate::regions::Spec],
    ) -> Self {
        let size = |i: usize| match mode {
            FunctionThreshold::Cost(_) => cost(&f.insts.get(i)),
            _ => u64::from(!matches!(
                f.insts.get(i).special(),
                Special::Nop | Special::CodeEnd
            )),
        };
        let ends: BTreeSet<usize> = f.exits.iter().map(|&(i, _)| i).collect();
        let mut fp = FuncPlan {
            f,
            scopes,
            marked: Vec::new(),
            region: BTreeMap::new(),
            placed: Vec::new(),
            report: InlinedReport::default(),
            loops: Vec::new(),
            loop_report: LoopReport::default(),
            region_report: RegionReport::default(),
            specs,
        };
        // Instructions are in address order, so each DWARF range is one run of indices.
        let index_of = |a: u64| f.insts.partition_point(a);
        let raw = |s: usize| -> Vec<usize> {
            let mut v: Vec<usize> = scopes[s]
                .ranges
                .iter()
                .flat_map(|&(b, e)| index_of(b)..index_of(e))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        // In the order of `mine` (ascending scope index).
        let raws: Vec<Vec<usize>> = mine.iter().map(|&s| raw(s)).collect();
        // Scopes owning each instruction, by instruction index.
        let mut owners: Vec<Vec<usize>> = vec![Vec::new(); f.insts.len()];
        for (&t, r) in mine.iter().zip(&raws) {
            for &i in r {
                owners[i].push(t);
            }
        }
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
        for (&s, own) in mine.iter().zip(&raws) {
            let total: u64 = own.iter().map(|&i| size(i)).sum();
            if total < threshold {
                fp.report.below_threshold += 1;
                continue;
            }
            // Merge fragments across short gaps of instructions foreign to this subtree.
            let foreign_owned = |i: usize| {
                owners
                    .get(i)
                    .is_some_and(|ts| ts.iter().any(|&t| !in_subtree(s, t) && !in_subtree(t, s)))
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
            let mut region = Vec::new();
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
            if let Some(l) = self.loop_node(s) {
                let function = self.f.spec.name.clone();
                match l.kind {
                    NodeKind::Loop => self.loop_report.left_out.push(LoopLeftOut {
                        function,
                        name: l.name.clone(),
                        why: why.into(),
                    }),
                    NodeKind::Region(si) => {
                        let spec = self.specs.get(si).map(ToString::to_string);
                        self.region_report.skipped.push(RegionSkipped {
                            kind: crate::regions::SpecKind::Region,
                            spec: spec.unwrap_or_default(),
                            function: Some(function),
                            why: why.into(),
                        })
                    }
                }
                return;
            }
            let sc = &self.scopes[s];
            self.report.left_out.push(LeftOut {
                function: self.f.spec.name.clone(),
                name: sc.name.clone(),
                call: sc.call.to_string(),
                why: why.into(),
            });
        }
    }

    /// Nearest enclosing scope in `marked` (the set of [`FuncPlan::marked`]).
    fn marked_parent(&self, s: usize, marked: &HashSet<usize>) -> Option<usize> {
        if !self.loops.is_empty() {
            return self.nested_parent(s, marked);
        }
        self.dwarf_parent(s, marked)
    }

    /// Nearest enclosing inlined scope of inlined scope `s` in `marked`, by DWARF.
    fn dwarf_parent(&self, s: usize, marked: &HashSet<usize>) -> Option<usize> {
        let mut p = self.scopes[s].parent;
        while let Some(x) = p {
            if marked.contains(&x) {
                return Some(x);
            }
            p = self.scopes[x].parent;
        }
        None
    }

    /// Open scopes before each instruction (outermost first), regions clipped to their marked
    /// ancestors; siblings claim instructions in pre-order.
    ///
    /// The open scopes of an instruction always form one chain, each the nearest marked parent
    /// of the next, because a scope takes an instruction only when its marked parent is the
    /// innermost scope already open there (inside the parent's clipped region, not yet claimed
    /// by a sibling or a sibling's descendant, all of which come earlier in pre-order); a scope
    /// without a marked parent takes only instructions no scope has taken.
    fn stacks(&self) -> Vec<Vec<usize>> {
        let marked: HashSet<usize> = self.marked.iter().copied().collect();
        let mut out = vec![Vec::new(); self.f.insts.len()];
        for s in self.parents_first(&marked) {
            let parent = self.marked_parent(s, &marked);
            for &i in &self.region[&s] {
                if out[i].last().copied() == parent {
                    out[i].push(s);
                }
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
            let (addr, inst) = f.insts.at(p);
            let falls = matches!(
                inst.flow(),
                Flow::Fallthrough | Flow::Call | Flow::Branch { conditional: true }
            );
            let target = inst.branch_target(addr);
            for s in f.successors(p) {
                if s == p + 1 && falls {
                    out[s].0 = Some(p);
                }
                if s != p + 1 || (target.is_some() && target == f.insts.checked_addr(s)) {
                    out[s].1.push(p);
                }
            }
        }
        out
    }

    /// Removes scopes until every point can be served, and keeps the placement of the last
    /// round. Each round finds every point that cannot be served ([`FuncPlan::point`]) and leaves
    /// out, per point, the innermost scope that changes there on some edge (all scopes of the
    /// function if none is found, which cannot happen for a point that needs markers).
    fn settle(&mut self, landing_blocks: bool) {
        let forbidden = forbidden_points(self.f);
        let preds = self.preds();
        loop {
            let stacks = self.stacks();
            let mut victims: BTreeMap<usize, String> = BTreeMap::new();
            let mut stuck = false;
            let mut placed = Vec::new();
            for k in 0..self.f.insts.len() {
                let why = match self.point(k, &stacks, &preds, &forbidden, landing_blocks) {
                    Ok(None) => continue,
                    Ok(Some(parts)) => {
                        placed.push((k, parts));
                        continue;
                    }
                    Err(why) => why,
                };
                let (ft, brs) = &preds[k];
                let entry = k == 0;
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
                    .max_by_key(|&s| self.depth(s));
                match victim {
                    Some(s) => {
                        victims
                            .entry(s)
                            .or_insert_with(|| format!("{why} at {:#x}", self.f.insts.addr(k)));
                    }
                    None => stuck = true,
                }
            }
            if stuck {
                for s in self.marked.clone() {
                    self.leave(s, "scope placement did not converge in this function");
                }
                self.placed.clear();
                return;
            }
            if victims.is_empty() {
                self.placed = placed;
                return;
            }
            for (s, why) in victims {
                self.leave(s, &why);
            }
        }
    }

    /// Marker operations on the edges into instruction `k` and where they go (`None`: no edge
    /// into `k` needs a marker), or why they cannot be placed:
    /// - [`Landing::After`] in front of `k`: the part only the fall-through edge (or the
    ///   function's entry) runs;
    /// - [`Landing::Before`] in front of `k`: the part every edge runs, chosen among the suffixes
    ///   of the fall-through edge's markers so that the most branch edges need nothing else;
    /// - [`Landing::Edge`]`(p)`: the rest of the markers of the branch edge from `p`: in a
    ///   landing block the conditional SOPP branch `p` is retargeted to (`landing_blocks`: the
    ///   target allows them), or in front of `p` when it is an unconditional `s_branch`.
    fn point(
        &self,
        k: usize,
        stacks: &[Vec<usize>],
        preds: &[(Option<usize>, Vec<usize>)],
        forbidden: &Forbidden,
        landing_blocks: bool,
    ) -> Result<Option<Parts>, &'static str> {
        let f = self.f;
        let (ft, brs) = &preds[k];
        let entry = k == 0;
        // Every edge into `k` keeps the open scopes (the same stack): no marker, nothing to
        // compute. The function's entry opens `k`'s scopes.
        let at = &stacks[k];
        let same = |p: &usize| stacks[*p] == *at;
        if (!entry || at.is_empty()) && ft.iter().all(same) && brs.iter().all(same) {
            return Ok(None);
        }
        let from = |p: Option<usize>| p.map_or(&[][..], |p| stacks[p].as_slice());
        let fall = (ft.is_some() || entry).then(|| ops(from(*ft), at));
        let branches: Vec<(usize, Vec<Op>)> =
            brs.iter().map(|&p| (p, ops(from(Some(p)), at))).collect();
        if fall.as_ref().is_none_or(Vec::is_empty) && branches.iter().all(|(_, v)| v.is_empty()) {
            return Ok(None);
        }
        // The part every edge runs: a suffix of the fall-through edge's markers (of the first
        // branch edge's without one) that ends every branch edge's; most edges served, longest.
        let base = fall.as_ref().or(branches.first().map(|(_, v)| v));
        let base = base.map_or(&[][..], Vec::as_slice);
        let before = (0..=base.len())
            .map(|n| &base[base.len() - n..])
            .filter(|b| branches.iter().all(|(_, v)| v.ends_with(b)))
            .max_by_key(|b| {
                (
                    branches.iter().filter(|(_, v)| v.as_slice() == *b).count(),
                    b.len(),
                )
            })
            .unwrap_or_default();
        let mut parts: Parts = Vec::new();
        if let Some(fv) = &fall {
            parts.push((Landing::After, fv[..fv.len() - before.len()].to_vec()));
        }
        parts.push((Landing::Before, before.to_vec()));
        let mut landed = BTreeSet::new();
        for (p, v) in &branches {
            if v.len() == before.len() || !landed.insert(*p) {
                continue;
            }
            let inst = f.insts.get(*p);
            let sopp = matches!(f.relocs[*p], Reloc::Branch { .. })
                && matches!(inst.flow(), Flow::Branch { .. });
            if !landing_blocks {
                return Err("the branch edges need their own markers and the target has no landing blocks (gfx1010-gfx1013: LDS/VMEM hazard waits around new branches not implemented)");
            }
            if !sopp {
                return Err("a branch edge needs its own markers and its branch is not a SOPP branch (no landing block)");
            }
            // A conditional branch's landing block goes after it; an unconditional branch's
            // edge markers go in front of it.
            let point = match inst.flow() {
                Flow::Branch { conditional: true } => *p + 1,
                _ => *p,
            };
            if point >= f.insts.len() || forbidden.hard.contains(&point) {
                return Err("a branch edge needs its own markers and there is no safe insertion point at its branch");
            }
            parts.push((Landing::Edge(*p), v[..v.len() - before.len()].to_vec()));
        }
        let inline = parts
            .iter()
            .any(|(l, v)| !v.is_empty() && !matches!(l, Landing::Edge(_)));
        if inline && forbidden.hard.contains(&k) {
            return Err("no safe insertion point (s_clause window, address builder or kernarg-preload prologue)");
        }
        Ok(Some(parts))
    }

    /// Marker operations in front of each instruction, by landing rule (see
    /// [`FuncPlan::point`]), as [`FuncPlan::settle`] left them.
    fn placement(&self) -> &[(usize, Parts)] {
        &self.placed
    }
}

/// Marker operations of an edge from open scopes `from` to `to`: exits of the scopes `to` does
/// not keep (innermost first), then enters of `to`'s new scopes (outermost first).
fn ops(from: &[usize], to: &[usize]) -> Vec<Op> {
    let keep = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let mut v: Vec<Op> = from[keep..].iter().rev().map(|&s| Op::Pop(s)).collect();
    v.extend(to[keep..].iter().map(|&s| Op::Push(s)));
    v
}
