//! Per-function fail-closed: a function the analysis cannot instrument (any [`Problem`]) is
//! "left alone" — not instrumented, moved as one block with nothing inserted in it — when it is
//! movable; otherwise the code object fails closed with the reason.
//!
//! The policy follows BOLT's "non-simple" functions (kept out of optimisation, emitted as they
//! are). A block that moves as a whole keeps every PC-relative reference inside it valid (SOPP
//! branches, `s_call_b64`, `s_getpc` address builders and `s_add_pc_i64` are relative to the
//! instruction's own address, ISA manuals "Branch instructions" / "S_GETPC_B64"); the references
//! that leave it are re-aimed exactly as in instrumented functions (the layout lays its
//! instructions out as one run with their relocations: builder literals to `.rodata` or another
//! function, calls and branches to another function's entry block). So a function may be left
//! alone when:
//! - every word decodes (otherwise its PC-relative uses cannot be seen);
//! - every `s_getpc` belongs to a recognised builder (an unrecognised use of the PC could
//!   compute any address);
//! - every direct branch or call targets an address inside it or a function entry, and every
//!   `s_add_pc_i64` stays inside it.
//!
//! References INTO a left-alone function stay correct: the layout maps every address inside it
//! by its offset ([`crate::layout::Layout::map_addr`]), which is exact because nothing is
//! inserted in it. Calls, descriptors, symbols, builders, DWARF and `R_AMDGPU_RELATIVE64`
//! addends are all mapped that way. A branch from another function into it is a [`Problem`] of
//! that other function.
//!
//! Execution that falls off the end of a left-alone function (rocPRIM "trampoline" kernels
//! compiled out for other targets: one `s_setreg_imm32_b32`, then zero padding, no `s_endpgm`;
//! a function ending in a call to a function that does not return) continues into the bytes
//! that followed it: its block then extends up to the next function (the padding is copied
//! too), and the layout keeps function order, so the same next function follows it (after
//! `s_nop 0` alignment padding at most).
//!
//! A function that is not movable (a word that does not decode, an unrecognised use of the
//! PC, a jump to an address that is no function entry) stays at its address: then the whole
//! input `.text` is kept in place, byte for byte, every left-alone function runs from there,
//! and the instrumented functions are laid out in a new executable segment after everything
//! the input loads ([`Verbatim::kept_in_place`]; docs/left-alone.md). The data and the kept
//! functions do not move, so whatever the unmovable function references, seen or not, is still
//! there; the originals of the instrumented functions stay too, so calls from a kept function
//! run them uninstrumented ([`kept_in_place_notes`] names them in the report).

use crate::analysis::{Func, Problem, Program, JUMP_ELSEWHERE};
use crate::layout::PcRelUse;
use crate::plan::{Site, Skipped};
use amdgpu_isa::{Flow, Special};
use serde::Serialize;
use std::collections::BTreeMap;

/// A function the rewriter did not instrument and copied verbatim (report line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftAlone {
    /// Symbol name.
    pub name: String,
    /// Original entry address (bytes).
    pub address: u64,
    /// Why it cannot be instrumented (its problems, `; `-separated, each with its address).
    pub why: String,
    /// A compiled-out stub ([`is_stub`]): it cannot run to completion, so the host never
    /// launches it on this target. Its sites are counted apart in the coverage.
    pub stub: bool,
    /// Part of its code does not decode, so its sites cannot all be found (lost coverage that
    /// no site count shows; `--strict` counts it). In the JSON report only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub undecodable: bool,
}

/// Start of the skip reason of every site inside a compiled-out stub ([`is_stub`]); coverage
/// counts such sites apart ([`crate::report::Coverage::in_stubs`]).
pub const STUB_SKIP: &str = "function left alone (compiled-out stub that cannot run";

/// Whether a function with problems is a compiled-out stub: its only problem is that execution
/// falls off its end (no `s_endpgm`, return or branch ends it), as in rocPRIM's trampoline
/// kernels built for other targets (one `s_setreg_imm32_b32`, then zero padding). Such code
/// cannot complete, so nothing launches it; every other problem (an undecodable word, an
/// unresolved jump) may sit in code that runs and counts as lost coverage.
pub fn is_stub(f: &Func) -> bool {
    !f.problems.is_empty()
        && f.problems
            .iter()
            .all(|p| p.why == crate::analysis::FALLS_OFF_END)
}

/// The left-alone decision for a whole program.
#[derive(Debug, Clone, Default)]
pub struct Verbatim {
    /// Parallel to [`Program::funcs`]: `Some(end)` for a left-alone function, whose verbatim
    /// block is `[start, end)` (bytes; past the function's own end up to the next function when
    /// execution can fall off its end).
    pub blocks: Vec<Option<u64>>,
    /// Report lines, by address.
    pub left_alone: Vec<LeftAlone>,
    /// True when some left-alone function cannot move ([`movable`] failed): the whole input
    /// `.text` then stays where it is, every left-alone function runs from its original
    /// address, and the instrumented copies go to a new executable section after the last
    /// segment (docs/left-alone.md, "kept in place").
    pub kept_in_place: bool,
}

impl Verbatim {
    /// Whether function `fi` is left alone.
    pub fn is_left_alone(&self, fi: usize) -> bool {
        self.blocks.get(fi).is_some_and(Option::is_some)
    }
}

fn describe(f: &Func) -> String {
    f.problems
        .iter()
        .map(|p| format!("at {:#x}: {}", p.addr, p.why))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether execution can continue past the last instruction of `f` (its end is reached by
/// fall-through): the last instruction falls through, calls, traps (not `s_trap 2`, which ends
/// the wave: [`crate::analysis::aborts`]) or branches conditionally, and is not `s_code_end`.
pub fn falls_off_end(f: &Func) -> bool {
    f.insts.last().is_some_and(|i| {
        i.special() != Special::CodeEnd
            && !crate::analysis::aborts(&i)
            && matches!(
                i.flow(),
                Flow::Fallthrough | Flow::Call | Flow::Trap | Flow::Branch { conditional: true }
            )
    })
}

/// `Ok` when `f` can move as one block with its PC-relative fields re-aimed; otherwise the first
/// reason it cannot: a word that does not decode (its PC-relative uses cannot be seen), an
/// `s_getpc` that is not a recognised address builder (it could compute any address), a branch
/// or call that leaves the function to an address that is not a function entry, or an
/// `s_add_pc_i64` that leaves it, or an address builder aimed at code in `.text` outside the
/// function that is not a function entry (mapped by offset, such an address could land anywhere
/// in the instrumented code: a Tensile long branch whose literal aims into another kernel, found
/// by the session-22 fresh tester). `pcrels` are the program's recognised address builders by
/// `s_getpc` address, each with its target and whether that target is in `.text`; `is_entry`
/// tells function entries.
fn movable(
    f: &Func,
    pcrels: &BTreeMap<u64, (u64, bool)>,
    is_entry: impl Fn(u64) -> bool,
) -> Result<(), Problem> {
    let (start, end) = (f.spec.start, f.spec.end);
    let inside = |t: u64| t >= start && t < end;
    if let Some(p) = f.first_undecodable() {
        return Err(Problem {
            addr: p.addr,
            why: "a word does not decode, so its PC-relative references cannot be seen".into(),
        });
    }
    if let Some(p) = f
        .problems
        .iter()
        .find(|p| p.why == "function range outside .text")
    {
        return Err(p.clone());
    }
    // A jump through an address builder to neither this function nor a function entry (past
    // the end of `.text`, say): once code moves, the address it keeps holds other code
    // (session-23 fresh tester: a jump past `.text` landed on a kernel of the output).
    if let Some(p) = f
        .problems
        .iter()
        .find(|p| p.why.starts_with(JUMP_ELSEWHERE))
    {
        return Err(p.clone());
    }
    for (a, inst) in f.insts.iter() {
        let out = |what: String| Err(Problem { addr: a, why: what });
        match (inst.special(), inst.flow()) {
            (Special::GetPc, _) => match pcrels.get(&a) {
                None => return out("s_getpc without a recognised address builder".into()),
                Some(&(t, true)) if !inside(t) && !is_entry(t) => {
                    return out(format!(
                        "address builder aimed at {t:#x}, code outside the function that is not a function entry"
                    ))
                }
                Some(_) => {}
            },
            (Special::AddPcI64, _) => {
                let t = inst
                    .literal()
                    .filter(|_| inst.len() == 12)
                    .map(|l| (a + inst.len() as u64).wrapping_add(l));
                match t {
                    Some(t) if inside(t) => {}
                    _ => {
                        return out(format!(
                            "s_add_pc_i64 target {t:x?} is outside the function"
                        ))
                    }
                }
            }
            (_, Flow::Branch { .. } | Flow::Call) => {
                if let Some(t) = inst.branch_target(a) {
                    if !inside(t) && !is_entry(t) {
                        return out(format!(
                            "{} targets {t:#x}, outside the function and not a function entry",
                            inst.mnemonic()
                        ));
                    }
                } else if matches!(inst.flow(), Flow::Branch { .. }) {
                    return out(format!("{} without a decodable target", inst.mnemonic()));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Decides which functions with problems are left alone (see the module docs). `text_end` is
/// the end of `.text` (bytes).
pub fn decide(prog: &Program, text_end: u64) -> Verbatim {
    let pcrels: BTreeMap<u64, (u64, bool)> = prog
        .pcrels
        .iter()
        .map(|p| (p.getpc_addr, (p.target, p.use_kind != PcRelUse::Data)))
        .collect();
    let mut v = Verbatim {
        blocks: vec![None; prog.funcs.len()],
        ..Verbatim::default()
    };
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.problems.is_empty() {
            continue;
        }
        let is_entry = |t: u64| {
            prog.funcs
                .binary_search_by_key(&t, |g| g.spec.start)
                .is_ok()
        };
        match movable(f, &pcrels, is_entry) {
            Ok(()) => {
                let next = prog.funcs.get(fi + 1).map_or(text_end, |n| n.spec.start);
                v.blocks[fi] = Some(if falls_off_end(f) { next } else { f.spec.end });
                v.left_alone.push(LeftAlone {
                    name: f.spec.name.clone(),
                    address: f.spec.start,
                    why: describe(f),
                    stub: is_stub(f),
                    undecodable: false,
                });
            }
            Err(p) => {
                v.kept_in_place = true;
                v.blocks[fi] = Some(f.spec.end);
                v.left_alone.push(LeftAlone {
                    name: f.spec.name.clone(),
                    address: f.spec.start,
                    why: format!(
                        "{}; kept at its address: it cannot move ({})",
                        describe(f),
                        p.why
                    ),
                    stub: is_stub(f),
                    undecodable: f.does_not_decode(),
                });
            }
        }
    }
    v
}

/// Report notes for `.text` kept in place: the left-alone functions keep running the
/// original code, so every instrumented function they call runs uninstrumented from there
/// (named per caller); a function that does not decode calls what it calls unseen.
pub fn kept_in_place_notes(prog: &Program, v: &Verbatim) -> Vec<String> {
    if !v.kept_in_place {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        if !v.is_left_alone(fi) {
            continue;
        }
        let mut callees: Vec<&str> = f
            .calls
            .iter()
            .filter_map(|(_, c)| match c {
                crate::analysis::Callee::Direct(g) if !v.is_left_alone(*g) => {
                    Some(prog.funcs[*g].spec.name.as_str())
                }
                _ => None,
            })
            .collect();
        callees.sort_unstable();
        callees.dedup();
        if !callees.is_empty() {
            notes.push(format!(
                "{} is kept at its address and calls the uninstrumented originals of {}",
                f.spec.name,
                callees.join(", ")
            ));
        }
        // Named with its address and the first word that does not decode (session-28 tester:
        // the note named neither).
        if let Some(p) = f.first_undecodable() {
            notes.push(format!(
                "{} at {:#x} is kept at its address and does not decode at {:#x} ({}): whatever it calls cannot be seen and runs uninstrumented",
                f.spec.name, f.spec.start, p.addr, p.why
            ));
        }
    }
    notes
}

/// Moves every site of a left-alone function from `sites` to `skipped`, with the function's
/// reason, and rewrites the reason of sites of left-alone functions already skipped.
pub fn skip_left_alone(
    prog: &Program,
    v: &Verbatim,
    sites: &mut Vec<Site>,
    skipped: &mut Vec<Skipped>,
) {
    let how = if v.kept_in_place {
        "kept at its address"
    } else {
        "copied verbatim"
    };
    let why = |fi: usize| {
        let f = &prog.funcs[fi];
        if is_stub(f) {
            format!("{STUB_SKIP}, {how}): {}", describe(f))
        } else {
            format!("function left alone ({how}): {}", describe(f))
        }
    };
    for sk in skipped.iter_mut() {
        if let Some(fi) = prog
            .funcs
            .iter()
            .position(|f| {
                f.spec.name == sk.function && sk.addr >= f.spec.start && sk.addr <= f.spec.end
            })
            .filter(|&fi| v.is_left_alone(fi))
        {
            sk.why = why(fi);
        }
    }
    sites.retain(|s| {
        if !v.is_left_alone(s.func) {
            return true;
        }
        skipped.push(Skipped {
            function: prog.funcs[s.func].spec.name.clone(),
            addr: s.addr,
            kind: s.kind,
            why: why(s.func),
        });
        false
    });
}

/// Original instruction addresses of left-alone functions with their new addresses (for the
/// editor's exact text address map: symbols and `R_AMDGPU_RELATIVE64` addends that point into
/// them). `map` maps an original address to its new one.
pub fn address_pairs(
    prog: &Program,
    v: &Verbatim,
    map: impl Fn(u64) -> Option<u64>,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        if !v.is_left_alone(fi) {
            continue;
        }
        for (a, _) in f.insts.iter() {
            if let Some(n) = map(a) {
                out.push((a, n));
            }
        }
    }
    out
}
