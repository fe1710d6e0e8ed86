//! Where an inserted marker naming a given funcmap row may stand (issue 32 item 17): a marker
//! word's id selects a row, and the row's name says what the marker times, so the site has to
//! be that event. The funcmap names are the ones a post-link rewrite gives its rows (spec
//! `docs/markers/SPEC.md` of rocprof-trace-decoder in ROCm/rocm-systems: "Funcmap format",
//! "Barrier marker placement", "Address Tracing"; loop rows `loop SYMBOL+0xOFFSET` and
//! `iter loop SYMBOL+0xOFFSET`, [`crate::program::scope_rows::loop_scope`]).
//!
//! A site is the original instruction `k` the marker's inserted code runs in front of (a landing
//! block's code runs in front of its branch target). A rewrite may settle a marker earlier or
//! later over straight-line code (an `s_clause` window, an address builder) but never across a
//! branch or another barrier or trace instruction, so the rules scan straight-line code only:
//!
//! - `barrier`: the first barrier or trace instruction from `k` on is `s_barrier`, or it is
//!   `s_barrier_wait` and the last one before `k` is `s_barrier_signal` (a signal/wait pair);
//! - `barrier_wait`: the first one from `k` on is `s_barrier_wait`;
//! - `barrier_signal`: the last one before `k` is `s_barrier_signal` (the marker follows it);
//! - `vmem_load` / `vmem_store`: the next global, flat or buffer operation is a load (a store or
//!   atomic), before any barrier, trace instruction or branch (past an `s_clause`, `s_delay_alu`
//!   or `s_getpc`, whose windows a marker is moved out of, a later one may be it);
//! - `addr_trace_*`: the next traceable memory operation is of the row's class, likewise (table
//!   of the spec's "Address Tracing": global/flat, LDS, buffer, structured buffer,
//!   `ds_permute`/`ds_bpermute`);
//! - `iter loop` points: `k` is the loop's header or a branch to it (the back edge), in the
//!   function the name's symbol starts;
//! - `loop` scope enters: in that function, `k` (or the target of the unconditional branch `k`)
//!   lies in the loop: it and the header reach each other. A scope is entered on every edge into
//!   the loop's body from outside, which need not be an edge into the header (the fall-through of
//!   alignment padding into a body block is one).

use std::collections::BTreeMap;

use amdgpu_isa::{Flow, Format, Instruction, MemKind, MemSpace, Special};

use crate::program::Func;
use crate::{Check, Finding};

/// Barrier and trace instructions: no marker is moved across one.
fn pinned(i: &Instruction) -> bool {
    matches!(
        i.special(),
        Special::SBarrier
            | Special::SBarrierSignal
            | Special::SBarrierSignalIsFirst
            | Special::SBarrierWait
            | Special::TtraceData
            | Special::TtraceDataImm(_)
    )
}

fn is_signal(i: &Instruction) -> bool {
    matches!(
        i.special(),
        Special::SBarrierSignal | Special::SBarrierSignalIsFirst
    )
}

/// The straight-line instructions of `f` from original `k` on: up to and including the first
/// that does not fall through.
fn ahead<'f>(f: &'f Func, k: usize) -> impl Iterator<Item = Instruction> + 'f {
    let mut open = true;
    f.orig
        .get(k..)
        .unwrap_or_default()
        .iter()
        .map_while(move |o| {
            let i = f.inst(o);
            let this = open.then_some(i);
            open = i.flow() == Flow::Fallthrough;
            this
        })
}

/// The first barrier or trace instruction of the straight-line code from `k` on.
fn next_pinned(f: &Func, k: usize) -> Option<Instruction> {
    ahead(f, k).find(pinned)
}

/// The last barrier or trace instruction of the straight-line code ending before `k`.
fn last_pinned(f: &Func, k: usize) -> Option<Instruction> {
    f.orig
        .get(..k)
        .unwrap_or_default()
        .iter()
        .rev()
        .map(|o| f.inst(o))
        .take_while(|i| i.flow() == Flow::Fallthrough)
        .find(pinned)
}

/// Whether the operation a marker in front of `k` stands for follows: the first of the
/// operations `counted` in the straight-line code from `k` on (before a barrier or trace
/// instruction) is one that `want` accepts. Past an `s_clause`, `s_delay_alu` or `s_getpc` (the
/// windows a rewrite moves a marker out of, to their front) a later operation may be the one.
fn memory_ahead(
    f: &Func,
    k: usize,
    counted: impl Fn(&Instruction) -> bool,
    want: impl Fn(&Instruction) -> bool,
) -> bool {
    let mut window = false;
    for i in ahead(f, k).take_while(|i| !pinned(i)) {
        window |= matches!(
            i.special(),
            Special::Clause | Special::DelayAlu | Special::GetPc
        );
        if want(&i) {
            return true;
        }
        if counted(&i) && !window {
            return false;
        }
    }
    false
}

/// The kind of a global, flat or buffer load, store or atomic (what memory-op markers count).
fn vmem(i: &Instruction) -> Option<MemKind> {
    let m = i.memory()?;
    let space = matches!(
        m.space,
        MemSpace::Global | MemSpace::Flat | MemSpace::Buffer { .. }
    );
    let access = matches!(m.kind, MemKind::Load | MemKind::Store | MemKind::Atomic);
    (space && access).then_some(m.kind)
}

/// An operation of some address-trace class.
fn traced(i: &Instruction) -> bool {
    crate::program::ADDR_TRACE_NAMES
        .iter()
        .any(|n| traces(n, i) == Some(true))
}

/// `kind` of a load, store or atomic (`MemKind::Store` stands for both store and atomic).
fn kind_is(k: MemKind, want: MemKind) -> bool {
    match want {
        MemKind::Store => matches!(k, MemKind::Store | MemKind::Atomic),
        w => k == w,
    }
}

/// The memory operations an `addr_trace_*` row of name `name` traces (the spec's name table:
/// `load`/`store`/`atomic` for global and flat, `lds_*` for DS on LDS, `buffer_*` and
/// `struct_buffer_*` for buffers without and with an index VGPR, `ds_permute`, `ds_bpermute`);
/// `None` for another name.
fn traces(name: &str, i: &Instruction) -> Option<bool> {
    let kind = name.strip_prefix("addr_trace_")?;
    let m = i.memory();
    let (space, mk) = (m.map(|m| m.space), m.map(|m| m.kind));
    let access = |want: &str| match want {
        "load" => mk == Some(MemKind::Load),
        "store" => mk == Some(MemKind::Store),
        "atomic" => mk == Some(MemKind::Atomic),
        _ => false,
    };
    let lds = space == Some(MemSpace::Lds) && i.format() == Format::Ds;
    Some(match kind {
        "ds_permute" => lds && i.mnemonic() == "ds_permute_b32",
        "ds_bpermute" => lds && i.mnemonic().starts_with("ds_bpermute"),
        _ => match kind.split_once('_') {
            Some(("lds", a)) => lds && access(a),
            Some(("buffer", a)) => {
                matches!(space, Some(MemSpace::Buffer { idxen: false, .. })) && access(a)
            }
            Some(("struct", rest)) => match rest.split_once('_') {
                Some(("buffer", a)) => {
                    matches!(space, Some(MemSpace::Buffer { idxen: true, .. })) && access(a)
                }
                _ => return None,
            },
            None => matches!(space, Some(MemSpace::Global | MemSpace::Flat)) && access(kind),
            _ => return None,
        },
    })
}

/// Why a point marker naming the `P:` row `name` may not stand in front of original `k` of `f`
/// (rules of the module documentation); `None` when it may. `home`: whether a symbol names the
/// function `f` (its entry is `f`'s), for the `iter loop` rows.
pub(crate) fn point_misplaced(
    f: &Func,
    k: usize,
    name: &str,
    home: impl Fn(&str) -> bool,
) -> Option<String> {
    let vmem_of = |want: MemKind| {
        memory_ahead(
            f,
            k,
            |i| vmem(i).is_some(),
            |i| vmem(i).is_some_and(|m| kind_is(m, want)),
        )
    };
    let next = || next_pinned(f, k).map(|i| i.special());
    let ok = match name {
        "barrier" => match next() {
            Some(Special::SBarrier) => true,
            Some(Special::SBarrierWait) => last_pinned(f, k).is_some_and(|i| is_signal(&i)),
            _ => false,
        },
        "barrier_wait" => next() == Some(Special::SBarrierWait),
        "barrier_signal" => last_pinned(f, k).is_some_and(|i| is_signal(&i)),
        "vmem_load" => vmem_of(MemKind::Load),
        "vmem_store" => vmem_of(MemKind::Store),
        _ if name.starts_with("addr_trace_") => {
            memory_ahead(f, k, traced, |i| traces(name, i) == Some(true))
        }
        _ if name.starts_with("point ") => return user_point_misplaced(f, k, name, home),
        _ => match name.strip_prefix("iter ") {
            Some(scope) => return loop_misplaced(f, k, scope, home),
            None => return Some("no post-link rewrite inserts a point of that name".into()),
        },
    };
    (!ok).then(|| {
        match name {
            "barrier" => "no s_barrier (or signal/wait pair) follows in straight-line code",
            "barrier_wait" => "no s_barrier_wait follows in straight-line code",
            "barrier_signal" => "it does not follow an s_barrier_signal in straight-line code",
            "vmem_load" => "the next global, flat or buffer operation is no load",
            "vmem_store" => "the next global, flat or buffer operation is no store or atomic",
            _ => "the next traced memory operation is not of that class",
        }
        .to_string()
    })
}

/// The header (original instruction index) of the loop row `name` (`loop SYMBOL+0xOFFSET`)
/// in `f`, when `home(SYMBOL)`. Errors: why no header of `f` is named.
pub(crate) fn loop_header(
    f: &Func,
    name: &str,
    home: impl Fn(&str) -> bool,
) -> Result<usize, String> {
    let Some((symbol, offset)) = crate::program::scope_rows::loop_scope(name) else {
        return Err("the row names no loop (loop SYMBOL+0xOFFSET)".into());
    };
    if !home(symbol) {
        return Err(format!("{symbol} is not this function"));
    }
    let header = f.orig_start.saturating_add(offset);
    f.orig
        .binary_search_by_key(&header, |o| o.addr)
        .map_err(|_| format!("no instruction of this function starts at its header {header:#x}"))
}

/// Why the iteration point of loop row `name` may not stand in front of original `k` of `f`;
/// `None` when it may: `k` is the header (the back edge falls into it, or a landing block on
/// the back edge is keyed at it) or a branch to the header (the back edge's own branch).
fn loop_misplaced(f: &Func, k: usize, name: &str, home: impl Fn(&str) -> bool) -> Option<String> {
    let h = match loop_header(f, name, home) {
        Ok(h) => h,
        Err(why) => return Some(why),
    };
    (k != h && branch_target(f, k) != Some(h)).then(|| {
        format!(
            "it is neither at the loop header {:#x} nor at a branch to it",
            f.orig[h].addr
        )
    })
}

/// Why the user-named point of row `name` (`point NAME SYMBOL+0xOFFSET`, issue 34) may not
/// stand in front of original `k` of `f`; `None` when it may: `f` is SYMBOL's function and `k`
/// is the instruction at that offset, or a branch to it (a landing on the branch edge).
fn user_point_misplaced(
    f: &Func,
    k: usize,
    name: &str,
    home: impl Fn(&str) -> bool,
) -> Option<String> {
    let Some((symbol, offset)) = crate::program::scope_rows::point_scope(name) else {
        return Some("the row names no point (point NAME SYMBOL+0xOFFSET)".into());
    };
    if !home(symbol) {
        return Some(format!("{symbol} is not this function"));
    }
    let at = f.orig_start.saturating_add(offset);
    let target = f.orig.binary_search_by_key(&at, |o| o.addr).ok();
    let here = target.is_some_and(|t| t == k || branch_target(f, k) == Some(t));
    (!here).then(|| format!("it is neither at {at:#x} nor at a branch to it"))
}

/// The original instruction index a SOPP branch at original `k` of `f` jumps to.
fn branch_target(f: &Func, k: usize) -> Option<usize> {
    let o = f.orig.get(k)?;
    let t = f.inst(o).branch_target(o.addr)?;
    f.orig.binary_search_by_key(&t, |o| o.addr).ok()
}

/// Whether original `t` lies in the loop of header `h`: both reach each other (the natural
/// loop's body is inside the header's strongly connected component). `succ`: successors by
/// original index; `preds`: predecessors (the reverse of `succ`).
fn in_loop(
    n: usize,
    succ: &impl Fn(usize) -> Vec<usize>,
    preds: &[Vec<usize>],
    h: usize,
) -> Vec<bool> {
    let reach = |next: &dyn Fn(usize) -> Vec<usize>| {
        let mut seen = vec![false; n];
        let mut work = vec![h];
        while let Some(k) = work.pop() {
            for s in next(k) {
                if s < n && !seen[s] {
                    seen[s] = true;
                    work.push(s);
                }
            }
        }
        seen
    };
    let fwd = reach(succ);
    let back = reach(&|k| preds.get(k).cloned().unwrap_or_default());
    let mut both: Vec<bool> = fwd.iter().zip(&back).map(|(a, b)| *a && *b).collect();
    if let Some(x) = both.get_mut(h) {
        *x = true;
    }
    both
}

/// A loop scope's enter marker, to be placed by [`check_loop_enters`]: in front of original `k`
/// at new address `a`, word `v` of row `id`, whose loop header is original `h`.
pub(crate) struct LoopEnter {
    pub k: usize,
    pub a: u64,
    pub v: u32,
    pub id: u32,
    pub h: usize,
}

/// The finding of a loop enter in front of original `k` of `f` that is not in its loop `name`.
pub(crate) fn loop_enter_finding(
    f: &Func,
    k: usize,
    a: u64,
    v: u32,
    id: u32,
    name: &str,
    why: &str,
) -> Finding {
    Finding {
        check: Check::Markers,
        function: Some(f.name.clone()),
        original_address: f.orig.get(k).map(|o| o.addr),
        new_address: Some(a),
        message: format!(
            "enter marker value {v:#x} (id {id}) names the U: row {name:?}, which is not entered here: {why}"
        ),
    }
}

/// Every loop enter of `f` stands in its loop: original `k`, or the target of the unconditional
/// branch `k`, and the header reach each other ([`in_loop`]; `succ`: the function's control-flow
/// successors by original index). `names`: row names by id, for the findings.
pub(crate) fn check_loop_enters(
    f: &Func,
    succ: impl Fn(usize) -> Vec<usize>,
    names: &BTreeMap<u32, String>,
    loops: &[LoopEnter],
    findings: &mut Vec<Finding>,
) {
    if loops.is_empty() {
        return;
    }
    let n = f.orig.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for k in 0..n {
        for s in succ(k) {
            if let Some(p) = preds.get_mut(s) {
                p.push(k);
            }
        }
    }
    let mut bodies: BTreeMap<usize, Vec<bool>> = BTreeMap::new();
    for l in loops {
        let body = bodies
            .entry(l.h)
            .or_insert_with(|| in_loop(n, &succ, &preds, l.h));
        let unconditional = f
            .orig
            .get(l.k)
            .is_some_and(|o| f.inst(o).flow() == Flow::Branch { conditional: false });
        let jump = unconditional.then(|| branch_target(f, l.k)).flatten();
        let inside = |t: usize| body.get(t).copied().unwrap_or(false);
        if !inside(l.k) && !jump.is_some_and(inside) {
            let why = format!(
                "neither it nor its branch target lies in the loop of header {:#x}",
                f.orig.get(l.h).map_or(0, |o| o.addr)
            );
            let name = names.get(&l.id).map_or("", String::as_str);
            findings.push(loop_enter_finding(f, l.k, l.a, l.v, l.id, name, &why));
        }
    }
}
