//! [`Check::Markers`]: enter/exit markers are balanced and properly nested on every path
//! (spec "Semantic rules").

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use super::cfg::Cfg;
use super::effect::{entry_key, Effect};
use super::subscopes::Regions;
use crate::program::insn::{marker_kind, MarkerKind};
use crate::program::{Func, FuncmapInfo, OInst};
use crate::{Check, Finding};

/// One scope operation of a marker word as the decoder applies it (spec "Semantic rules";
/// `marker_stream.cpp`: `exit_prev` pops, `enter` pushes only for `F`/`U` rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScopeOp {
    Push(u32),
    Pop,
}

/// The scope operations of a run's marker words, in order. An enter (or fused exit+enter) whose id
/// has no `F`/`U` row does not push (points never push); that is reported once per address.
pub(super) fn scope_ops(
    f: &Func,
    e: &Effect,
    fm: &FuncmapInfo,
    at: &OInst,
    reported: &mut BTreeSet<u64>,
    findings: &mut Vec<Finding>,
) -> Vec<ScopeOp> {
    let kind = |id: u32| {
        fm.new
            .as_ref()
            .and_then(|m| m.by_id.get(&id))
            .map(|r| r.kind)
    };
    let mut ops = Vec::new();
    for &(a, v) in &e.markers {
        let (pop, push) = match marker_kind(v) {
            MarkerKind::Enter(id) => (false, Some(id)),
            MarkerKind::Fused(id) => (true, Some(id)),
            MarkerKind::Exit => (true, None),
            MarkerKind::Point(_) | MarkerKind::Reserved => (false, None),
        };
        if pop {
            ops.push(ScopeOp::Pop);
        }
        if let Some(id) = push {
            match kind(id) {
                Some('F' | 'U') => ops.push(ScopeOp::Push(id)),
                // No row at all is `check_marker`'s finding.
                None => {}
                Some(k) if reported.insert(a) => {
                    findings.push(f.finding(
                        Check::Markers,
                        Some(at.addr),
                        Some(a),
                        format!(
                            "enter marker {v:#x}: id {id} is a {k}: row, which never opens a scope"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    ops
}

/// Scope stacks (ids of the open `F`/`U` scopes, outermost first) for every path through the
/// function: the stack before each original instruction must be the same on every path that
/// reaches it (so every CFG join agrees, in depth and in which scopes are open), no exit may pop
/// an empty stack, and the stack must be empty at every function exit (`s_endpgm`, return, tail
/// call, unresolved indirect jump) (spec: enter/exit "properly nested"; the llvm-project test
/// decoder rejects underflow and unclosed scopes). Applies to every kind of scope: device
/// functions (`F:`), inlined instances (`F:` without address), kernel scopes (`U:`).
///
/// An in-kernel subroutine that is a separate region ([`super::subscopes`]) is its own walk:
/// entered with no open scope, its returns must be reached with none open (net zero); a call
/// of such subroutines steps to the instruction after it with its stack unchanged.
///
/// A branch edge through a landing block (`landed`: effects by block start) runs the block's
/// markers before the target's run.
pub(super) fn check_balance(
    f: &Func,
    cfg: &Cfg,
    regions: &Regions,
    effects: &BTreeMap<(usize, Option<u64>), Effect>,
    landed: &BTreeMap<u64, Effect>,
    fm: &FuncmapInfo,
    findings: &mut Vec<Finding>,
) {
    let mut w = Walk {
        f,
        cfg,
        regions,
        effects,
        landed,
        fm,
        marked: vec![false; f.orig.len()],
        reported: BTreeSet::new(),
        bad_enter: BTreeSet::new(),
    };
    for &(k, _) in effects.keys() {
        w.marked[k] = true;
    }
    let stack = w.walk(0, None, false, findings);
    for &k in &cfg.exits {
        w.open_at(&stack, k, "", findings);
    }
    for (&e, &land) in &regions.entries {
        let stack = w.walk(e, land, true, findings);
        for &k in &regions.returns {
            w.open_at(&stack, k, " (return of an in-kernel subroutine)", findings);
        }
    }
}

/// One function's scope walks ([`check_balance`]).
struct Walk<'a, 'f> {
    f: &'a Func<'f>,
    cfg: &'a Cfg,
    regions: &'a Regions,
    effects: &'a BTreeMap<(usize, Option<u64>), Effect>,
    landed: &'a BTreeMap<u64, Effect>,
    fm: &'a FuncmapInfo,
    /// Whether some entry into the run of original `k` has an effect with markers (most have
    /// none: no map lookup on their edges).
    marked: Vec<bool>,
    /// Instructions with a finding already (one per instruction).
    reported: BTreeSet<u64>,
    bad_enter: BTreeSet<u64>,
}

impl Walk<'_, '_> {
    /// Scope operations on entering original `k` at `land`, after landing block `via` if any.
    fn ops(
        &mut self,
        k: usize,
        land: Option<u64>,
        via: Option<u64>,
        findings: &mut Vec<Finding>,
    ) -> Vec<ScopeOp> {
        if via.is_none() && !self.marked[k] {
            return Vec::new();
        }
        let block = via.and_then(|b| self.landed.get(&b));
        let run = self.effects.get(&(k, entry_key(self.f, k, land)));
        let mut v = Vec::new();
        for e in block.into_iter().chain(run) {
            let at = &self.f.orig[k];
            v.extend(scope_ops(
                self.f,
                e,
                self.fm,
                at,
                &mut self.bad_enter,
                findings,
            ));
        }
        v
    }

    /// The stacks of the walk from original `start` entered at `land` (`None` where it does not
    /// reach); `region`: a subroutine's walk, which ends at the returns.
    fn walk(
        &mut self,
        start: usize,
        land: Option<u64>,
        region: bool,
        findings: &mut Vec<Finding>,
    ) -> Vec<Option<Rc<Vec<u32>>>> {
        let (f, n) = (self.f, self.f.orig.len());
        // Scope stacks are shared between instructions until a marker changes them (a copy per
        // instruction was an allocation per instruction inside every scope).
        let mut stack: Vec<Option<Rc<Vec<u32>>>> = vec![None; n];
        let first = self.ops(start, land, None, findings);
        let (s0, ok0) = apply(&Rc::new(Vec::new()), &first);
        if !ok0 {
            let o = &f.orig[start];
            let (at, new, what) = if region {
                (o.addr, f.new_address(o), "an in-kernel subroutine's entry")
            } else {
                (f.orig_start, f.new_start, "function entry")
            };
            findings.push(f.finding(
                Check::Markers,
                Some(at),
                new,
                format!("exit marker at {what} with no open scope"),
            ));
        }
        stack[start] = Some(s0);
        let mut work = VecDeque::from([start]);
        while let Some(k) = work.pop_front() {
            let Some(cur) = stack[k].clone() else {
                continue;
            };
            if region && self.regions.returns.contains(&k) {
                continue;
            }
            let succ: Vec<_> = self.regions.succ(self.cfg, k).collect();
            for (s, land) in succ {
                let via = self.cfg.via.get(&(k, s)).copied();
                let ops = self.ops(s, land, via, findings);
                let (next, ok) = apply(&cur, &ops);
                let o = &f.orig[s];
                if !ok && self.reported.insert(s as u64) {
                    findings.push(f.finding(
                        Check::Markers,
                        Some(o.addr),
                        f.new_address(o),
                        "exit marker with no open scope on some path".into(),
                    ));
                }
                match &stack[s] {
                    None => {
                        stack[s] = Some(next);
                        work.push_back(s);
                    }
                    Some(old) if *old != next && self.reported.insert(s as u64) => {
                        let msg = if old.len() != next.len() {
                            format!(
                                "unbalanced markers: scope depth {} and {} meet here",
                                old.len(),
                                next.len()
                            )
                        } else {
                            format!(
                                "unbalanced markers: scope stacks (ids) {old:?} and {next:?} meet here"
                            )
                        };
                        findings.push(f.finding(
                            Check::Markers,
                            Some(o.addr),
                            f.new_address(o),
                            msg,
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        stack
    }

    /// A finding when scopes are still open at exit `k` of a walk.
    fn open_at(
        &mut self,
        stack: &[Option<Rc<Vec<u32>>>],
        k: usize,
        what: &str,
        findings: &mut Vec<Finding>,
    ) {
        if let Some(d) = stack[k].as_ref().map(|s| s.len()).filter(|d| *d != 0) {
            let o = &self.f.orig[k];
            findings.push(self.f.finding(
                Check::Markers,
                Some(o.addr),
                self.f.new_address(o),
                format!(
                    "{d} marker scope(s) still open at {}{what}",
                    self.f.inst(o).mnemonic()
                ),
            ));
        }
    }
}

/// Applies `ops` to `from`; `false` when an exit finds no open scope.
fn apply(from: &Rc<Vec<u32>>, ops: &[ScopeOp]) -> (Rc<Vec<u32>>, bool) {
    if ops.is_empty() {
        return (Rc::clone(from), true);
    }
    let mut s = from.to_vec();
    let mut ok = true;
    for op in ops {
        match op {
            ScopeOp::Push(id) => s.push(*id),
            ScopeOp::Pop => ok &= s.pop().is_some(),
        }
    }
    (Rc::new(s), ok)
}
