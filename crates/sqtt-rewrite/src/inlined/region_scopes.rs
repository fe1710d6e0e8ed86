//! User-named regions and points (`--region`, `--point`, issue 34), planned with the loops
//! and the inlined-function scopes of the same function.
//!
//! A region's code in one function is a set of instructions ([`resolve`]): those whose inline
//! chain ([`dwarf_remap::LocationIndex::chain`]: the line-table row, then the call sites of the
//! enclosing inlined instances) names one of the lines of the specification, or those starting
//! at the specification's offsets. It gets a scope only where it is single-entry: exactly one of
//! its instructions (the entry) is the function's first instruction or has a predecessor outside
//! the set. Every path from the function's entry into the region then passes through that
//! instruction, so its block dominates the rest of the region, as a loop's header dominates its
//! body; the region then becomes a node like a loop ([`super::loop_scopes::NodeKind::Region`]):
//! entered on the edges into its entry from outside, exited on every edge that leaves it, nested
//! with the loops and the inlined scopes by instruction sets. Anything else (more than one
//! entry, an entry no known edge reaches, a region crossing a loop's or another region's or an
//! inlined scope's boundary) is reported with the reason and gets no markers: no whole-object
//! failure.
//!
//! A point goes in front of one instruction: the first instruction (lowest address) of the line
//! in each function holding code of it, or the instruction at the offset.

use std::collections::BTreeSet;

use dwarf_remap::{LocationIndex, SourceLoc};

use super::loop_scopes::{LoopNode, NodeKind};
use super::{FuncPlan, Planned};
use crate::analysis::Func;
use crate::layout::Landing;
use crate::plan::{forbidden_points, MarkerKey, Site, SiteKind, Word};
use crate::regions::{file_matches, Place, Spec, SpecKind};

/// A region or point (a whole specification, or its instance in one function) not
/// instrumented, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionSkipped {
    /// Region or point.
    pub kind: SpecKind,
    /// The specification as given (`NAME=FILE:LINE-LINE`, ...).
    pub spec: String,
    /// The function of the instance; `None` when the specification matched no code at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Why it has no markers.
    pub why: String,
}

/// What happened to the user-named regions and points of one code object.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionReport {
    /// `--region` specifications given.
    pub regions: usize,
    /// `--point` specifications given.
    pub points: usize,
    /// Region instances found: one per function holding code of a region specification.
    pub found: usize,
    /// Region instances given enter/exit markers (scopes whose markers were all inserted).
    pub instrumented: usize,
    /// Point instances found: one per function holding the point's line or offset.
    pub points_found: usize,
    /// Point instances given a marker.
    pub points_instrumented: usize,
    /// Specifications and instances not instrumented, each with the reason.
    pub skipped: Vec<RegionSkipped>,
}

impl RegionReport {
    /// Adds the counts and lists of `o` (another function's report).
    pub(super) fn add(&mut self, o: &RegionReport) {
        self.found += o.found;
        self.instrumented += o.instrumented;
        self.points_found += o.points_found;
        self.points_instrumented += o.points_instrumented;
        self.skipped.extend(o.skipped.iter().cloned());
    }
}

/// The code of the specifications in one function.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    /// (specification index, instruction indices ascending, without the instructions that end
    /// the function) of each region with code here.
    pub regions: Vec<(usize, Vec<usize>)>,
    /// (specification index, instruction index) of each point with code here.
    pub points: Vec<(usize, usize)>,
    /// (specification index, reason) of each offset specification naming this function that
    /// cannot be served.
    pub problems: Vec<(usize, String)>,
}

impl Resolved {
    /// True when no specification has code or a problem here.
    pub(super) fn is_empty(&self) -> bool {
        self.regions.is_empty() && self.points.is_empty() && self.problems.is_empty()
    }

    /// Specification indices this function answered (code or a problem).
    pub(super) fn answered(&self) -> impl Iterator<Item = usize> + '_ {
        self.regions
            .iter()
            .map(|r| r.0)
            .chain(self.points.iter().map(|p| p.0))
            .chain(self.problems.iter().map(|p| p.0))
    }
}

/// Finds the code of each of `specs` in `f` (`lines`: the DWARF index; line specifications
/// match nothing without one). Instructions the line table attributes to no line (line 0, or no
/// row) join a line region when the nearest instructions before and after them are in it (the
/// compiler's line-0 rows between statements).
pub(super) fn resolve(f: &Func, specs: &[Spec], lines: Option<&LocationIndex>) -> Resolved {
    let n = f.insts.len();
    let ends: BTreeSet<usize> = f.exits.iter().map(|&(i, _)| i).collect();
    let by_lines = specs.iter().any(|s| matches!(s.place, Place::Lines { .. }));
    let chains: Option<Vec<Vec<SourceLoc>>> = lines
        .filter(|_| by_lines)
        .map(|ix| (0..n).map(|i| ix.chain(f.insts.addr(i))).collect());
    let mut out = Resolved::default();
    for (si, s) in specs.iter().enumerate() {
        match &s.place {
            Place::Lines { file, first, last } => {
                let Some(ch) = &chains else { continue };
                let hit: Vec<bool> = ch
                    .iter()
                    .map(|c| {
                        c.iter().any(|l| {
                            (*first..=*last).contains(&l.line) && file_matches(&l.file, file)
                        })
                    })
                    .collect();
                let Some(head) = hit.iter().position(|&h| h) else {
                    continue;
                };
                if s.kind == SpecKind::Point {
                    out.points.push((si, head));
                    continue;
                }
                let mut set = hit.clone();
                let neutral = |i: usize| ch[i].first().is_none_or(|l| l.line == 0);
                let (mut prev, mut pending) = (false, Vec::new());
                for (i, &h) in hit.iter().enumerate() {
                    if !h && neutral(i) {
                        pending.push(i);
                        continue;
                    }
                    if h && prev {
                        for &j in &pending {
                            set[j] = true;
                        }
                    }
                    pending.clear();
                    prev = h;
                }
                let body: Vec<usize> = (0..n).filter(|&i| set[i] && !ends.contains(&i)).collect();
                if body.is_empty() {
                    out.problems.push((
                        si,
                        "its only instruction in this function ends the function".into(),
                    ));
                } else {
                    out.regions.push((si, body));
                }
            }
            Place::Offsets { symbol, start, end } => {
                if *symbol != f.spec.name {
                    continue;
                }
                let size = f.spec.end - f.spec.start;
                let at = |off: u64| {
                    let i = f.insts.partition_point(f.spec.start.saturating_add(off));
                    (i < n && f.insts.addr(i) == f.spec.start + off).then_some(i)
                };
                let Some(b) = at(*start) else {
                    out.problems.push((
                        si,
                        format!(
                            "offset {start:#x} is not the start of an instruction of {symbol} (size {size:#x})"
                        ),
                    ));
                    continue;
                };
                let Some(e) = end else {
                    out.points.push((si, b));
                    continue;
                };
                let e = match at(*e) {
                    Some(i) => i,
                    None if *e == size => n,
                    None => {
                        out.problems.push((
                            si,
                            format!(
                                "end offset {e:#x} is neither the start of an instruction of {symbol} nor its end ({size:#x})"
                            ),
                        ));
                        continue;
                    }
                };
                let body: Vec<usize> = (b..e).filter(|i| !ends.contains(i)).collect();
                if body.is_empty() {
                    out.problems.push((
                        si,
                        "the range holds only instructions that end the function".into(),
                    ));
                } else {
                    out.regions.push((si, body));
                }
            }
        }
    }
    out
}

/// `file:line` of the instruction at `addr` for a row name (none for line 0 or a path with `@`).
fn line_of(lines: Option<&LocationIndex>, addr: u64) -> Option<String> {
    lines
        .and_then(|ix| ix.chain(addr).into_iter().next())
        .filter(|s| s.line != 0)
        .map(|s| s.to_string())
        .filter(|s| !s.contains('@'))
}

/// The row name of a region or point instance: `<word> <NAME> <function>+0x<offset>`, then
/// ` (<file>:<line>)` of the instruction at `addr` when the line table has it (in the name: AMD's
/// funcmap parser keeps no location for `U:` rows).
pub(super) fn row_name(
    kind: SpecKind,
    spec: &Spec,
    f: &Func,
    addr: u64,
    lines: Option<&LocationIndex>,
) -> String {
    let name = format!(
        "{} {} {}+{:#x}",
        kind.word(),
        spec.name,
        f.spec.name,
        addr - f.spec.start
    );
    match line_of(lines, addr) {
        Some(l) => format!("{name} ({l})"),
        None => name,
    }
}

impl FuncPlan<'_> {
    /// Records that the instance of region `spec` in this function gets no scope.
    fn skip_region(&mut self, spec: &Spec, why: String) {
        self.region_report.skipped.push(RegionSkipped {
            kind: SpecKind::Region,
            spec: spec.to_string(),
            function: Some(self.f.spec.name.clone()),
            why,
        });
    }

    /// Adds the regions of `found` ([`Resolved::regions`]) as scopes, after the loops: each one
    /// single-entry and nesting with the loops, the regions added before it and the marked
    /// inlined scopes, or reported with the reason.
    pub(super) fn add_regions(
        &mut self,
        found: &[(usize, Vec<usize>)],
        lines: Option<&LocationIndex>,
    ) {
        if found.is_empty() {
            return;
        }
        let f = self.f;
        let specs = self.specs;
        let n = f.insts.len();
        let base = self.scopes.len();
        let preds = self.preds();
        let owners = self.inlined_owners();
        for (si, body) in found {
            let spec = &specs[*si];
            self.region_report.found += 1;
            let mut inside = vec![false; n];
            for &i in body {
                inside[i] = true;
            }
            let unreached = |i: usize| i != 0 && preds[i].0.is_none() && preds[i].1.is_empty();
            let entries: Vec<usize> = body
                .iter()
                .copied()
                .filter(|&i| {
                    let (ft, brs) = &preds[i];
                    i == 0 || unreached(i) || ft.iter().chain(brs).any(|&p| !inside[p])
                })
                .collect();
            let at = |i: usize| format!("{}+{:#x}", f.spec.name, f.insts.addr(i) - f.spec.start);
            let entry = match entries[..] {
                [h] if !unreached(h) => h,
                [h] => {
                    self.skip_region(spec, format!(
                        "its entry {} is reached by no known edge (unreachable, or reached by an indirect jump)",
                        at(h)
                    ));
                    continue;
                }
                [] => {
                    self.skip_region(spec, "no edge enters it (unreachable code)".to_string());
                    continue;
                }
                _ => {
                    let shown: Vec<String> = entries.iter().take(6).map(|&i| at(i)).collect();
                    let more = if entries.len() > 6 { ", ..." } else { "" };
                    self.skip_region(spec, format!(
                        "not single-entry: entered at {} places ({}{more}), so no block of it dominates the rest",
                        entries.len(),
                        shown.join(", ")
                    ));
                    continue;
                }
            };
            let name = row_name(SpecKind::Region, spec, f, f.insts.addr(entry), lines);
            if f.spec.name.contains('@') {
                self.skip_region(
                    spec,
                    "no name a funcmap row can carry (the function's name contains '@')".into(),
                );
                continue;
            }
            let (within, holds) = match self.inlined_nesting(&owners, body) {
                Ok(x) => x,
                Err(s) => {
                    let why = self.crossing(s);
                    self.skip_region(spec, why);
                    continue;
                }
            };
            // Nesting with the loops and the regions added before: the smallest node holding the
            // body is the parent (the later one of equal sets); nodes the body holds whose
            // parent holds the body move inside it; a node sharing instructions without either
            // holding the other cannot nest.
            let (mut parent, mut children, mut crosses) = (None::<usize>, Vec::new(), None);
            for (k, other) in self.loops.iter().enumerate() {
                let x = base + k;
                let theirs = &self.region[&x];
                let c = theirs.iter().filter(|&&i| inside[i]).count();
                if c == 0 {
                    continue;
                }
                if c == body.len() {
                    if parent.is_none_or(|p| self.region[&p].len() >= theirs.len()) {
                        parent = Some(x);
                    }
                } else if c == theirs.len() {
                    children.push(x);
                } else {
                    crosses = Some(other.name.clone());
                    break;
                }
            }
            if let Some(other) = crosses {
                self.skip_region(
                    spec,
                    format!("it crosses the boundary of {other}: the markers could not nest"),
                );
                continue;
            }
            let node = base + self.loops.len();
            for c in children {
                let k = c - base;
                let outer = self.loops[k].parent;
                if outer.is_none_or(|q| body.len() <= self.region[&q].len()) {
                    self.loops[k].parent = Some(node);
                }
            }
            self.region.insert(node, body.clone());
            self.marked.push(node);
            self.loops.push(LoopNode {
                kind: NodeKind::Region(*si),
                name,
                loc: None,
                header: entry,
                latches: Vec::new(),
                parent,
                within,
                holds,
            });
        }
    }
}

/// Adds what function `fi` (`f`) did with the specifications to `out`: its regions' report
/// (`regions`: [`FuncPlan::region_report`]), the problems of `resolved`, and a point site in
/// front of the instruction of each of its points ([`Landing::Before`]: every edge into the
/// instruction runs it), or the reason it cannot have one (the instruction is no safe insertion
/// point: an `s_clause` window, an address builder or a kernarg-preload prologue).
pub(super) fn finish(
    f: &Func,
    fi: usize,
    regions: &RegionReport,
    resolved: Resolved,
    specs: &[Spec],
    lines: Option<&LocationIndex>,
    out: &mut Planned,
) {
    let Some(rr) = out.regions.as_mut() else {
        return;
    };
    rr.add(regions);
    let skipped = |si: usize, why: String| RegionSkipped {
        kind: specs[si].kind,
        spec: specs[si].to_string(),
        function: Some(f.spec.name.clone()),
        why,
    };
    for (si, why) in resolved.problems {
        rr.skipped.push(skipped(si, why));
    }
    if resolved.points.is_empty() {
        return;
    }
    let forbidden = forbidden_points(f);
    for (si, p) in resolved.points {
        rr.points_found += 1;
        let addr = f.insts.addr(p);
        if forbidden.hard.contains(&p) {
            rr.skipped.push(skipped(si, format!(
                "{}+{:#x} is no safe insertion point (s_clause window, address builder or kernarg-preload prologue)",
                f.spec.name,
                addr - f.spec.start
            )));
            continue;
        }
        if f.spec.name.contains('@') {
            rr.skipped.push(skipped(
                si,
                "no name a funcmap row can carry (the function's name contains '@')".into(),
            ));
            continue;
        }
        let n = out.point_names.rows.len() as u32;
        out.point_names
            .rows
            .push((row_name(SpecKind::Point, &specs[si], f, addr, lines), None));
        out.sites.push(Site {
            func: fi,
            before: p,
            word: Word::Point(MarkerKey::UserPoint(n)),
            landing: Landing::Before,
            kind: SiteKind::UserPoint,
            addr,
        });
    }
}

/// Why specification `s` matched no code in any instrumented function (`dwarf`: the object has
/// a readable line table).
pub(super) fn no_code(s: &Spec, dwarf: bool) -> String {
    match &s.place {
        Place::Lines { .. } if !dwarf => {
            "the object has no readable DWARF line table (compile with -g or -gline-tables-only)"
                .into()
        }
        Place::Lines { file, .. } => format!(
            "no instruction of an instrumented function has a line-table row for those lines of {file}"
        ),
        Place::Offsets { symbol, .. } => {
            format!("no instrumented function is named {symbol}")
        }
    }
}
