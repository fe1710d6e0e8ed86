//! In-kernel subroutines as scope regions of their own ([`super::subcalls`]: bodies reached by
//! `s_swappc_b64` through a call table, returning with `s_setpc_b64`), for the marker balance
//! ([`super::balance`]) and for the `F:` rows the rewrite names after them
//! ([`check_sub_enters`]).
//!
//! A subroutine is *separate* when every path from its entry, stepping over the in-kernel calls
//! whose subroutines are all separate, ends at a resolved return: none reaches an exit of the
//! kernel (`s_endpgm`, an unresolved jump). Its markers are then checked on their own (entered
//! with no open scope, every return reached with none open), and a call all of whose
//! subroutines are separate steps to the instruction after it with its scopes unchanged, as a
//! call of a device function does. Other calls keep the CFG's edges into the bodies.

use std::collections::{BTreeMap, BTreeSet};

use super::cfg::{Cfg, Succ};
use super::effect::Effect;
use crate::program::insn::{marker_kind, MarkerKind};
use crate::program::{Func, FuncmapInfo};
use crate::{Check, Finding};

/// The separate subroutines of one function and the calls that step over them.
pub(super) struct Regions {
    /// Separate subroutine entries, each with the landing of a call's edge into it.
    pub(super) entries: BTreeMap<usize, Option<u64>>,
    /// Calls whose subroutines are all separate.
    pub(super) stepped: BTreeSet<usize>,
    /// Resolved returns (region exits).
    pub(super) returns: BTreeSet<usize>,
}

impl Regions {
    /// The successors of `k` for a scope walk: a stepped call's fall-through only.
    pub(super) fn succ<'c>(&self, cfg: &'c Cfg, k: usize) -> impl Iterator<Item = Succ> + 'c {
        let stepped = self.stepped.contains(&k);
        cfg.succ(k)
            .filter(move |&(s, land)| !stepped || (s == k + 1 && land.is_none()))
    }
}

/// The calls' subroutine entries (by call) from the CFG.
fn call_entries(cfg: &Cfg) -> BTreeMap<usize, Vec<usize>> {
    cfg.intra_calls
        .iter()
        .map(|&c| {
            let t = cfg
                .succ(c)
                .filter(|&(s, land)| !(s == c + 1 && land.is_none()))
                .map(|e| e.0)
                .collect();
            (c, t)
        })
        .collect()
}

/// The separate subroutines of `cfg` (see the module docs).
pub(super) fn regions(cfg: &Cfg) -> Regions {
    let returns: BTreeSet<usize> = cfg.returns.iter().copied().collect();
    let calls = call_entries(cfg);
    let exits: BTreeSet<usize> = cfg.exits.iter().copied().collect();
    // Per entry: the entries its body calls, or `None` when a path leaves the kernel.
    let mut nested: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for &e in cfg.sub_entries.keys() {
        let (mut seen, mut calls_of, mut ok, mut reached_return) =
            (BTreeSet::new(), BTreeSet::new(), true, false);
        let mut stack = vec![e];
        while let Some(k) = stack.pop() {
            if !seen.insert(k) {
                continue;
            }
            if returns.contains(&k) {
                reached_return = true;
                continue;
            }
            if exits.contains(&k) {
                ok = false;
                break;
            }
            match calls.get(&k) {
                Some(t) => {
                    calls_of.extend(t.iter().copied());
                    stack.push(k + 1);
                }
                None => stack.extend(cfg.succ(k).map(|s| s.0)),
            }
        }
        if ok && reached_return {
            nested.insert(e, calls_of);
        }
    }
    loop {
        let drop: Vec<usize> = nested
            .iter()
            .filter(|(_, n)| n.iter().any(|x| !nested.contains_key(x)))
            .map(|(&e, _)| e)
            .collect();
        if drop.is_empty() {
            break;
        }
        for e in drop {
            nested.remove(&e);
        }
    }
    let stepped = calls
        .iter()
        .filter(|(_, t)| !t.is_empty() && t.iter().all(|e| nested.contains_key(e)))
        .map(|(&c, _)| c)
        .collect();
    Regions {
        entries: cfg
            .sub_entries
            .iter()
            .filter(|(e, _)| nested.contains_key(e))
            .map(|(&e, &l)| (e, l))
            .collect(),
        stepped,
        returns,
    }
}

/// The `F:` row names a subroutine at original `k` of `f` may carry: a local label of the
/// original object at its address, or `KERNEL+0xOFFSET` (offset from the kernel's original
/// entry, bytes).
fn names_at(f: &Func, fm: &FuncmapInfo, k: usize) -> Vec<String> {
    let addr = f.orig[k].addr;
    let mut v: Vec<String> = fm.labels.get(&addr).cloned().unwrap_or_default();
    v.push(format!("{}+{:#x}", f.name, addr - f.orig_start));
    v
}

/// Every enter marker of an `F:` row the rewrite named after a subroutine
/// ([`FuncmapInfo::sub_rows`]) stands in the run in front of a separate subroutine entry of
/// this function that the row names: a row naming a wrong label, or a scope entered
/// elsewhere, is rejected. (An entry without its enter marker, or a return without its exit,
/// is [`super::balance`]'s finding.)
pub(super) fn check_sub_enters(
    f: &Func,
    regions: &Regions,
    effects: &BTreeMap<(usize, Option<u64>), Effect>,
    fm: &FuncmapInfo,
    findings: &mut Vec<Finding>,
) {
    if fm.sub_rows.is_empty() {
        return;
    }
    for (&(k, _), e) in effects {
        for &(a, v) in &e.markers {
            let (MarkerKind::Enter(id) | MarkerKind::Fused(id)) = marker_kind(v) else {
                continue;
            };
            let Some(name) = fm.sub_rows.get(&id) else {
                continue;
            };
            let fits = regions.entries.contains_key(&k) && names_at(f, fm, k).contains(name);
            if !fits {
                let o = &f.orig[k];
                findings.push(f.finding(
                    Check::Markers,
                    Some(o.addr),
                    Some(a),
                    format!(
                        "enter marker {v:#x} (id {id}) names the F: row {name:?}, which is not the in-kernel subroutine entered here"
                    ),
                ));
            }
        }
    }
}
