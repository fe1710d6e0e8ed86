//! Loops as scopes (`--loops N`, issue 34), planned together with the inlined-function scopes
//! of the same function so that every instruction's open scopes stay one chain.
//!
//! A loop ([`crate::loops`]) becomes a scope whose region is its body: the placement of
//! [`super::FuncPlan`] then puts the enter on every edge into the header from outside the loop
//! and an exit on every edge that leaves the body (landing blocks where edges into one
//! instruction need different markers), and nothing on the back edges.
//!
//! Nesting with inlined scopes is by instruction sets: a loop whose body lies inside a marked
//! inlined scope's region nests inside it (equal sets included), an inlined scope whose region
//! lies strictly inside a loop's body nests inside the loop; a loop that shares instructions
//! with an inlined scope without either holding the other is left out and reported (its markers
//! could not nest).
//!
//! A loop is a single-entry region; user-named regions (`--region`, [`super::region_scopes`])
//! are nodes of the same kind ([`NodeKind::Region`]), nested with the loops by instruction sets
//! too.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};

use dwarf_remap::LocationIndex;

use amdgpu_isa::Flow;

use super::FuncPlan;
use crate::layout::{Landing, Reloc};
use crate::loops::Loops;
use crate::plan::Forbidden;

/// One loop left without a scope, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopLeftOut {
    /// Function (symbol) holding the loop.
    pub function: String,
    /// The loop's scope name (`loop <function>+0x<header offset>`).
    pub name: String,
    /// Why it has no scope.
    pub why: String,
}

/// What happened to the loops of one code object (`--loops`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopReport {
    /// Natural loops in the instrumented functions.
    pub found: usize,
    /// Loops given enter/exit markers (scopes whose markers were all inserted).
    pub instrumented: usize,
    /// Irreducible regions (cycles entered at more than one block), left alone.
    pub irreducible: usize,
    /// Loops nested deeper than `--loops N` allows, not marked.
    pub too_deep: usize,
    /// Loops not marked for another reason, each with the reason.
    pub left_out: Vec<LoopLeftOut>,
    /// `--loops N:iters`: back edges given a point marker (count of sites planned).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub iteration_markers: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl LoopReport {
    /// Adds the counts and lists of `o` (another function's report).
    pub(super) fn add(&mut self, o: &LoopReport) {
        self.found += o.found;
        self.instrumented += o.instrumented;
        self.irreducible += o.irreducible;
        self.too_deep += o.too_deep;
        self.iteration_markers += o.iteration_markers;
        self.left_out.extend(o.left_out.iter().cloned());
    }
}

/// Where a back edge's point marker goes: (insert before, landing rule), or why it cannot.
pub(super) type IterPoint = Result<(usize, Landing), &'static str>;

/// What a [`LoopNode`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeKind {
    /// A natural loop (`--loops`).
    Loop,
    /// A user-named region (`--region`): index into [`crate::config::Options::regions`].
    Region(usize),
}

/// A loop (or a user-named region: a single-entry region like a loop) given a scope in one
/// function's plan.
#[derive(Debug, Clone)]
pub(super) struct LoopNode {
    /// Loop or region.
    pub kind: NodeKind,
    /// Funcmap name, `loop <function>+0x<header offset> (<file>:<line>)` (offset in the input,
    /// bytes; the line of the header's first instruction from the line table, when there is
    /// one); for a region `region <NAME> <function>+0x<entry offset> (<file>:<line>)`.
    pub name: String,
    /// Always `None`: the location is in the name (AMD's parser drops a `U:` row's location).
    pub loc: Option<String>,
    /// Instruction index of the header (a region's entry).
    pub header: usize,
    /// Last instructions of the back-edge sources ([`crate::loops::Loop::latches`]; none for a
    /// region).
    pub latches: Vec<usize>,
    /// Node of the nearest enclosing loop or region that has a scope.
    pub parent: Option<usize>,
    /// Marked inlined scopes whose region holds the whole body.
    pub within: Vec<usize>,
    /// Marked inlined scopes whose region lies strictly inside the body.
    pub holds: HashSet<usize>,
}

/// How a body nests with the marked inlined scopes: the scopes holding it, the scopes it
/// holds, or (`Err`) a scope it crosses.
pub(super) type InlinedNesting = Result<(Vec<usize>, HashSet<usize>), usize>;

impl FuncPlan<'_> {
    /// The loop of node `s`, if `s` is a loop's node (nodes past the inlined scopes' indices).
    pub(super) fn loop_node(&self, s: usize) -> Option<&LoopNode> {
        s.checked_sub(self.scopes.len())
            .and_then(|i| self.loops.get(i))
    }

    /// Adds the loops of `found` nested at most `max` deep as scopes; `lines`: the DWARF index
    /// for the headers' source lines.
    pub(super) fn add_loops(&mut self, found: Loops, max: u32, lines: Option<&LocationIndex>) {
        let f = self.f;
        let base = self.scopes.len();
        self.loop_report.found += found.loops.len();
        self.loop_report.irreducible += found.irreducible.len();
        let ends: BTreeSet<usize> = f.exits.iter().map(|&(i, _)| i).collect();
        let owners = self.inlined_owners();
        let mut node_of: Vec<Option<usize>> = vec![None; found.loops.len()];
        for (li, l) in found.loops.iter().enumerate() {
            if l.depth > max {
                self.loop_report.too_deep += 1;
                continue;
            }
            let addr = f.insts.addr(l.header);
            let name = format!("loop {}+{:#x}", f.spec.name, addr - f.spec.start);
            let body: Vec<usize> = l
                .body
                .iter()
                .copied()
                .filter(|i| !ends.contains(i))
                .collect();
            let nesting = self
                .inlined_nesting(&owners, &body)
                .map_err(|s| self.crossing(s));
            let mut left = |why: String| {
                self.loop_report.left_out.push(LoopLeftOut {
                    function: f.spec.name.clone(),
                    name: name.clone(),
                    why,
                })
            };
            if name.contains('@') {
                left("no name a funcmap row can carry (the function's name contains '@')".into());
                continue;
            }
            let (within, holds) = match nesting {
                Ok(x) => x,
                Err(why) => {
                    left(why);
                    continue;
                }
            };
            let mut p = l.parent;
            while let Some(x) = p {
                if node_of[x].is_some() {
                    break;
                }
                p = found.loops[x].parent;
            }
            let loc = lines
                .and_then(|ix| ix.chain(addr).into_iter().next())
                .filter(|s| s.line != 0)
                .map(|s| s.to_string())
                .filter(|s| !s.contains('@'));
            // The line goes into the name: AMD's funcmap parser keeps no location for `U:` rows.
            let name = match &loc {
                Some(l) => format!("{name} ({l})"),
                None => name,
            };
            let loc = None;
            let node = base + self.loops.len();
            node_of[li] = Some(node);
            self.region.insert(node, body);
            self.marked.push(node);
            self.loops.push(LoopNode {
                kind: NodeKind::Loop,
                name,
                loc,
                header: l.header,
                latches: l.latches.clone(),
                parent: p.and_then(|x| node_of[x]),
                within,
                holds,
            });
        }
    }

    /// The marked inlined scopes holding each instruction, by instruction index.
    pub(super) fn inlined_owners(&self) -> Vec<Vec<usize>> {
        let mut owners: Vec<Vec<usize>> = vec![Vec::new(); self.f.insts.len()];
        for &s in self.marked.iter().filter(|&&s| s < self.scopes.len()) {
            for &i in &self.region[&s] {
                owners[i].push(s);
            }
        }
        owners
    }

    /// How `body` (instruction indices) nests with the marked inlined scopes (`owners`:
    /// [`FuncPlan::inlined_owners`]): the scopes whose region holds all of it, those whose
    /// region lies strictly inside it, or a scope it shares instructions with without either
    /// holding the other.
    pub(super) fn inlined_nesting(&self, owners: &[Vec<usize>], body: &[usize]) -> InlinedNesting {
        let mut count: HashMap<usize, usize> = HashMap::new();
        for &i in body {
            for &s in &owners[i] {
                *count.entry(s).or_default() += 1;
            }
        }
        let (mut within, mut holds, mut crosses) = (Vec::new(), HashSet::new(), None);
        for (s, c) in count {
            if c == body.len() {
                within.push(s);
            } else if c == self.region[&s].len() {
                holds.insert(s);
            } else {
                crosses = Some(crosses.map_or(s, |x: usize| x.min(s)));
            }
        }
        if let Some(s) = crosses {
            return Err(s);
        }
        within.sort_unstable();
        Ok((within, holds))
    }

    /// Why a body crossing the marked inlined scope `s` gets no scope.
    pub(super) fn crossing(&self, s: usize) -> String {
        let sc = &self.scopes[s];
        format!(
            "its body crosses the boundary of the scope of inlined {} (called at {}): the markers could not nest",
            sc.name, sc.call
        )
    }

    /// Nearest enclosing scope of node `s` in `marked` when the plan has loops: for a loop, the
    /// inner one of its nearest marked enclosing loop and its innermost marked inlined scope;
    /// for an inlined scope, the innermost marked loop strictly holding it inside its nearest
    /// marked DWARF parent, else that parent.
    pub(super) fn nested_parent(&self, s: usize, marked: &HashSet<usize>) -> Option<usize> {
        let Some(l) = self.loop_node(s) else {
            let p = self.dwarf_parent(s, marked);
            return (0..self.loops.len())
                .map(|i| (i, self.scopes.len() + i))
                .filter(|(i, x)| marked.contains(x) && self.loops[*i].holds.contains(&s))
                .filter(|(i, _)| p.is_none_or(|p| self.loops[*i].within.contains(&p)))
                .min_by_key(|(_, x)| self.region[x].len())
                .map(|(_, x)| x)
                .or(p);
        };
        let mut outer = l.parent;
        while let Some(x) = outer {
            if marked.contains(&x) {
                break;
            }
            outer = self.loop_node(x).and_then(|n| n.parent);
        }
        let inlined = l
            .within
            .iter()
            .copied()
            .filter(|x| marked.contains(x))
            .min_by_key(|&x| {
                (
                    self.region[&x].len(),
                    Reverse(self.scopes[x].depth(self.scopes)),
                )
            });
        match (outer, inlined) {
            (Some(a), Some(b)) => {
                let a_inside_b = self.loop_node(a).is_some_and(|n| n.within.contains(&b));
                Some(if a_inside_b { a } else { b })
            }
            (a, b) => a.or(b),
        }
    }

    /// Where the point marker of each back edge of loop node `s` goes (`--loops N:iters`):
    /// `(latch, Ok((insert before, landing rule)))`, or the reason it cannot be placed:
    /// - a conditional SOPP branch back to the header: a landing block after it
    ///   ([`Landing::Edge`], keyed at the header as [`super::FuncPlan::point`] keys its landing
    ///   blocks; the target must allow landing blocks, `landing_blocks`);
    /// - an `s_branch` back to the header: in front of it (every path through it is the back edge);
    /// - a fall-through into the header: in front of the header, run by the fall-through only
    ///   ([`Landing::After`]);
    /// - anything else (an indirect or long jump): not placed.
    pub(super) fn iteration_points(
        &self,
        s: usize,
        forbidden: &Forbidden,
        landing_blocks: bool,
    ) -> Vec<(usize, IterPoint)> {
        let f = self.f;
        let Some(l) = self.loop_node(s) else {
            return Vec::new();
        };
        let head = f.insts.addr(l.header);
        let hard = |p: usize| p >= f.insts.len() || forbidden.hard.contains(&p);
        l.latches
            .iter()
            .map(|&p| {
                let (addr, inst) = f.insts.at(p);
                let sopp = matches!(f.relocs[p], Reloc::Branch { .. });
                let to_head = sopp && inst.branch_target(addr) == Some(head);
                let placed = match inst.flow() {
                    Flow::Branch { conditional: true } if to_head => {
                        if !landing_blocks {
                            Err("the target has no landing blocks (gfx1010-gfx1013)")
                        } else if hard(p + 1) {
                            Err("no safe insertion point after the back edge's branch")
                        } else {
                            // Keyed at the branch's target, as every landing-block site.
                            Ok((l.header, Landing::Edge(p)))
                        }
                    }
                    Flow::Branch { conditional: false } if to_head => match hard(p) {
                        true => Err("no safe insertion point in front of the back edge's branch"),
                        false => Ok((p, Landing::Before)),
                    },
                    Flow::Fallthrough if p + 1 == l.header => match hard(l.header) {
                        true => Err("no safe insertion point in front of the header"),
                        false => Ok((l.header, Landing::After)),
                    },
                    _ => Err("the back edge is not a SOPP branch or a fall-through (an indirect or long jump)"),
                };
                (p, placed)
            })
            .collect()
    }

    /// Nesting depth of node `s` among the marked scopes (DWARF depth without loops).
    pub(super) fn depth(&self, s: usize) -> usize {
        if self.loops.is_empty() {
            return self.scopes[s].depth(self.scopes);
        }
        let marked: HashSet<usize> = self.marked.iter().copied().collect();
        self.chain_len(s, &marked)
    }

    fn chain_len(&self, s: usize, marked: &HashSet<usize>) -> usize {
        let mut d = 0;
        let mut c = self.marked_parent(s, marked);
        // Parents form a tree; the bound only guards against a cycle.
        while let Some(x) = c.filter(|_| d <= marked.len()) {
            d += 1;
            c = self.marked_parent(x, marked);
        }
        d
    }

    /// The marked nodes, every one after its marked parent: [`FuncPlan::marked`] (pre-order)
    /// without loops, by nesting depth with loops.
    pub(super) fn parents_first(&self, marked: &HashSet<usize>) -> Vec<usize> {
        let mut v = self.marked.clone();
        if !self.loops.is_empty() {
            v.sort_by_cached_key(|&s| (self.chain_len(s, marked), s));
        }
        v
    }
}
