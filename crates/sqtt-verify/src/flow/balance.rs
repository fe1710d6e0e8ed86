//! [`Check::Markers`]: enter/exit markers are balanced and properly nested on every path
//! (spec "Semantic rules").

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use super::cfg::Cfg;
use super::effect::{entry_key, Effect};
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
/// A branch edge through a landing block (`landed`: effects by block start) runs the block's
/// markers before the target's run.
pub(super) fn check_balance(
    f: &Func,
    cfg: &Cfg,
    effects: &BTreeMap<(usize, Option<u64>), Effect>,
    landed: &BTreeMap<u64, Effect>,
    fm: &FuncmapInfo,
    findings: &mut Vec<Finding>,
) {
    let n = f.orig.len();
    // Scope stacks are shared between instructions until a marker changes them (a copy per
    // instruction was an allocation per instruction inside every scope).
    let mut stack: Vec<Option<Rc<Vec<u32>>>> = vec![None; n];
    let mut reported = BTreeSet::new();
    let mut bad_enter = BTreeSet::new();
    // Whether some entry into the run of original `k` has an effect with markers (most have
    // none: no map lookup on their edges).
    let mut marked = vec![false; n];
    for &(k, _) in effects.keys() {
        marked[k] = true;
    }
    // Scope operations on entering original `k` at `land`, after landing block `via` if any.
    let mut ops = |k: usize, land: Option<u64>, via: Option<u64>, findings: &mut Vec<Finding>| {
        if via.is_none() && !marked[k] {
            return Vec::new();
        }
        let block = via.and_then(|b| landed.get(&b));
        let run = effects.get(&(k, entry_key(f, k, land)));
        let mut v = Vec::new();
        for e in block.into_iter().chain(run) {
            v.extend(scope_ops(f, e, fm, &f.orig[k], &mut bad_enter, findings));
        }
        v
    };
    // Applies `ops` to `from`; `false` when an exit finds no open scope.
    let apply = |from: &Rc<Vec<u32>>, ops: &[ScopeOp]| {
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
    };
    let (s0, ok0) = apply(&Rc::new(Vec::new()), &ops(0, None, None, findings));
    if !ok0 {
        findings.push(f.finding(
            Check::Markers,
            Some(f.orig_start),
            f.new_start,
            "exit marker at function entry with no open scope".into(),
        ));
    }
    stack[0] = Some(s0);
    let mut work = VecDeque::from([0usize]);
    while let Some(k) = work.pop_front() {
        let Some(cur) = stack[k].clone() else {
            continue;
        };
        for (s, land) in cfg.succ(k) {
            let via = cfg.via.get(&(k, s)).copied();
            let (next, ok) = apply(&cur, &ops(s, land, via, findings));
            let o = &f.orig[s];
            if !ok && reported.insert(s) {
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
                Some(old) if *old != next && reported.insert(s) => {
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
                    findings.push(f.finding(Check::Markers, Some(o.addr), f.new_address(o), msg));
                }
                Some(_) => {}
            }
        }
    }
    for &k in &cfg.exits {
        if let Some(d) = stack[k].as_ref().map(|s| s.len()).filter(|d| *d != 0) {
            let o = &f.orig[k];
            findings.push(f.finding(
                Check::Markers,
                Some(o.addr),
                f.new_address(o),
                format!("{d} marker scope(s) still open at {}", f.inst(o).mnemonic()),
            ));
        }
    }
}
