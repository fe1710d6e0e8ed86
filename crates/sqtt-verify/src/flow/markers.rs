//! [`Check::Markers`], [`Check::Funcmap`]: marker words have funcmap rows of the kind their
//! site needs ([`super::sites`]), and an `F` row added for a function has its enter marker at
//! the function's entry.

use super::effect::Effect;
use super::sites::LoopEnter;
use super::MarkerCounts;
use crate::program::insn::{marker_kind, MarkerKind};
use crate::program::{Func, FuncmapInfo};
use crate::{Check, Finding};

/// Checks marker word `v` at new address `a` (`(a, v)`), inserted in front of original `k` of `f`: a
/// post-link rewrite's kind of word, an id with a funcmap row of the kind the word needs, and a
/// row that names what stands there ([`super::sites`]).
pub(super) fn check_marker(
    f: &Func,
    k: usize,
    (a, v): (u64, u32),
    fm: &FuncmapInfo,
    counts: &mut MarkerCounts,
    loops: &mut Vec<LoopEnter>,
    findings: &mut Vec<Finding>,
) {
    let o_addr = f.orig[k].addr;
    let kind = marker_kind(v);
    let id = match kind {
        MarkerKind::Enter(id) => {
            counts.enter += 1;
            Some(id)
        }
        MarkerKind::Fused(id) => {
            counts.exit += 1;
            // Exit+enter fusion merges a user exit with the next enter (spec "Marker
            // fusion"); a post-link rewrite inserts no user markers, so it never emits one.
            findings.push(f.finding(
                Check::Markers,
                Some(o_addr),
                Some(a),
                format!("fused exit+enter marker value {v:#x}: a post-link rewrite emits none"),
            ));
            Some(id)
        }
        MarkerKind::Point(id) => {
            counts.point += 1;
            Some(id)
        }
        MarkerKind::Exit => {
            counts.exit += 1;
            None
        }
        MarkerKind::Reserved => {
            findings.push(f.finding(
                Check::Markers,
                Some(o_addr),
                Some(a),
                format!("marker value {v:#x} uses the reserved id 0"),
            ));
            None
        }
    };
    let Some(id) = id else {
        return;
    };
    match fm.new.as_ref().and_then(|m| m.by_id.get(&id)) {
        None => findings.push(f.finding(
            Check::Markers,
            Some(o_addr),
            Some(a),
            format!("marker value {v:#x} (id {id}) has no .sqtt_funcmap row"),
        )),
        // A point event is named by a `P:` row (spec "Funcmap format": "P: markers are
        // point events"); a point word on an `F:`/`U:` id would show a scope's name as an event.
        Some(row) if matches!(kind, MarkerKind::Point(_)) && row.kind != 'P' => {
            findings.push(f.finding(
                Check::Markers,
                Some(o_addr),
                Some(a),
                format!(
                    "point marker value {v:#x} (id {id}) names a {}: row, not a P: row",
                    row.kind
                ),
            ))
        }
        // A kernel scope (`U:`) is entered in its kernel, a loop scope (`U:` named `loop
        // SYMBOL+0x..`) in the function of that symbol; an `F:` row named after a symbol is
        // that function's scope, entered in that function (inlined copies of a function with an
        // out-of-line symbol get no row of their own). Symbols are compared by entry address:
        // aliased kernels share one body.
        Some(row) if matches!(kind, MarkerKind::Point(_)) => {
            let home = |s: &str| fm.symbols.get(s).is_some_and(|e| Some(e.1) == f.new_start);
            if let Some(why) = super::sites::point_misplaced(f, k, &row.name, home) {
                findings.push(f.finding(Check::Markers,
                    Some(o_addr),
                    Some(a),
                    format!(
                        "point marker value {v:#x} (id {id}) names the P: row {:?}, which does not fit here: {why}",
                        row.name
                    ),
                ));
            }
        }
        Some(row) if matches!(kind, MarkerKind::Enter(_)) => {
            let here = |(_, entry): (bool, u64)| Some(entry) == f.new_start;
            let looped = (row.kind == 'U')
                .then(|| crate::program::scope_rows::loop_scope_symbol(&row.name))
                .flatten();
            let symbol = fm.symbols.get(looped.unwrap_or(&row.name)).copied();
            let misplaced = match (row.kind, symbol) {
                ('U', Some(s)) if looped.is_some() => !here(s),
                ('U', Some(s)) => !s.0 || !here(s),
                ('U', None) => true,
                ('F', Some(s)) => !here(s),
                _ => false,
            };
            if misplaced {
                findings.push(f.finding(Check::Markers,
                    Some(o_addr),
                    Some(a),
                    format!(
                        "enter marker value {v:#x} (id {id}) names the {}: row of {}, which is not entered here",
                        row.kind, row.name
                    ),
                ));
            } else if looped.is_some() && row.name.starts_with("loop ") {
                // The right function: the site must be in the loop too (a region's enter is
                // proven by the scope balance)
                // ([`super::sites::check_loop_enters`]).
                let home = |s: &str| fm.symbols.get(s).is_some_and(|e| here(*e));
                let why = match super::sites::loop_header(f, &row.name, home) {
                    Ok(h) => {
                        loops.push(LoopEnter { k, a, v, id, h });
                        None
                    }
                    Err(why) => Some(why),
                };
                if let Some(why) = why {
                    findings.push(super::sites::loop_enter_finding(
                        f, k, a, v, id, &row.name, &why,
                    ));
                }
            }
        }
        Some(_) => {}
    }
}

/// A function with an F row added by the rewrite enters its scope at the entry.
pub(super) fn check_f_entry(
    f: &Func,
    fm: &FuncmapInfo,
    entry: Option<&Effect>,
    findings: &mut Vec<Finding>,
) {
    if fm.new.is_none() {
        return;
    }
    // The F rows the rewrite added for this function (indexed by name once, not a scan of every
    // row per function).
    for &id in fm
        .added_f
        .get(&f.name)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let first = entry.and_then(|e| e.markers.first()).map(|(_, v)| *v);
        if first != Some((id << 2) | 2) {
            findings.push(f.finding(
                Check::Markers,
                Some(f.orig_start),
                f.new_start,
                format!(
                    "F row id {id}: the entry has no enter marker {:#x} (first marker {first:?})",
                    (id << 2) | 2
                ),
            ));
        }
    }
}
