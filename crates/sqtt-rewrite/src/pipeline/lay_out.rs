//! Lay out: the text plan (functions re-aligned, snippets in front of their instructions,
//! islands after branches) and its layout by [`crate::layout`]; branches pushed out of simm16
//! range by inserted code are relaxed through long-branch islands and the layout is redone.

use super::{is_padding, Instrumented};
use crate::analysis::{Func, Program};
use crate::layout::{Landing, Layout, LayoutError, Piece, Reloc, TextPlan};
use crate::plan::MarkerKey;
use crate::regs::{SgprFacts, SiteRegs};
use crate::report::{Report, Status};
use amdgpu_isa::{Family, Instruction, Target};
use std::collections::{BTreeMap, BTreeSet};

/// Output of [`lay_out`].
pub(crate) struct LaidOut {
    /// The instrumented program; `used_by_func` includes the SGPR pairs of long-branch islands.
    /// Its functions' instructions are freed ([`crate::analysis::Program::drop_instructions`]):
    /// the layout, `verbatim_pairs` and `trace_addrs` hold what encode needs of them.
    pub ins: Instrumented,
    /// The new `.text`: bytes and the map from old to new addresses (the targets of address
    /// builders of data may still move at encode: [`Layout::retarget_data`]).
    pub layout: Layout,
    /// Every instruction of the left-alone functions: original address and its place in the
    /// verbatim block (bytes; [`crate::verbatim::address_pairs`]).
    pub verbatim_pairs: Vec<(u64, u64)>,
    /// Original address (bytes) of every address-traced instruction with a marker id, by
    /// (function index, instruction index).
    pub trace_addrs: BTreeMap<(usize, usize), u64>,
}

/// Why [`lay_out`] produced no layout.
pub(crate) enum NotLaidOut {
    /// The object fails closed (a layout error); `reasons` of the report say why.
    FailedClosed,
    /// Branches of these functions are out of range and cannot be relaxed: the functions, by
    /// original entry address (bytes), with the reason. The object is rewritten again with them
    /// left alone (nothing inserted in them, so their branches keep their distances).
    LeaveAlone(BTreeMap<u64, String>),
}

/// Lays out the new `.text`, relaxing out-of-range branches (at most 10,000; every branch one
/// layout finds out of range is relaxed before the next layout, which gives the same set of
/// relaxed branches as one at a time: inserted bytes only lengthen distances). Fills
/// `relaxed_branches` and, when the object fails closed, `reasons`.
pub(crate) fn lay_out(mut ins: Instrumented, report: &mut Report) -> Result<LaidOut, NotLaidOut> {
    let target = ins.prog.target;
    // Kept in place: the new code goes to a new segment after everything the input loads.
    let out_addr = if ins.verbatim.kept_in_place {
        let taken = ins
            .src
            .co
            .section(crate::report::KEPT_TEXT_SECTION)
            .map(|_| {
                format!(
                    "the input already has a section named {}",
                    crate::report::KEPT_TEXT_SECTION
                )
            });
        match taken.map_or_else(
            || {
                hsaco::editor::append_address(&ins.src.co).map_err(|e| match e {
                    hsaco::Error::InvalidEdit(why) => why,
                    e => e.to_string(),
                })
            },
            Err,
        ) {
            Ok(a) => a,
            Err(why) => {
                report.status = Status::FailedClosed;
                report
                    .reasons
                    .push(format!(".text cannot be kept in place: {why}"));
                return Err(NotLaidOut::FailedClosed);
            }
        }
    } else {
        ins.src.text_addr
    };
    let mut relax: BTreeMap<u64, Relaxed> = BTreeMap::new();
    let layout = loop {
        let laid = crate::layout::lay_out(&text_plan(&ins, &relax, out_addr));
        match laid {
            Ok(l) => break l,
            Err(LayoutError::OutOfRange { at })
                if at.iter().all(|a| !relax.contains_key(a))
                    && relax.len() + at.len() <= 10_000 =>
            {
                let mut leave = BTreeMap::new();
                for a in at {
                    let (entry, why) =
                        match relaxable(&ins.prog, &ins.scc_live, &mut ins.sgprs, a, target) {
                            Ok(r) => {
                                if let Some(p) = r.pair {
                                    ins.used_by_func[r.func] |= 3u128 << p;
                                }
                                relax.insert(a, r);
                                continue;
                            }
                            Err(e) => e,
                        };
                    let why = format!("branch at {a:#x} is out of range after insertion and cannot be relaxed: {why}");
                    let Some(entry) = entry else {
                        report.status = Status::FailedClosed;
                        report.reasons.push(why);
                        return Err(NotLaidOut::FailedClosed);
                    };
                    leave.entry(entry).or_insert(why);
                }
                if !leave.is_empty() {
                    return Err(NotLaidOut::LeaveAlone(leave));
                }
            }
            Err(e) => {
                report.status = Status::FailedClosed;
                report.reasons.push(e.to_string());
                return Err(NotLaidOut::FailedClosed);
            }
        }
    };
    report.relaxed_branches = relax.len();
    // What encode needs of the instructions, then the instructions themselves are freed: the
    // program keeps its functions, calls and exits.
    let verbatim_pairs =
        crate::verbatim::address_pairs(&ins.prog, &ins.verbatim, |a| layout.map_addr(a));
    let trace_addrs = ins
        .ids
        .keys()
        .filter_map(|k| match *k {
            MarkerKey::AddrTrace { func, inst, .. } => {
                let a = ins.prog.funcs.get(func)?.insts.checked_addr(inst)?;
                Some(((func, inst), a))
            }
            _ => None,
        })
        .collect();
    ins.prog.drop_instructions();
    Ok(LaidOut {
        ins,
        layout,
        verbatim_pairs,
        trace_addrs,
    })
}

/// Builds the output order of `.text`: each function re-aligned, snippets in front of their
/// instructions, relaxed branches (`relax`) and branches with a landing block followed by their
/// island ([`Piece::Island`]); left-alone functions as one raw block `[start, end)`. The plan
/// borrows the instructions, snippets and bytes of `ins`: the original instructions between
/// two insertion points are one [`Piece::Run`]. `out_addr`: address of the first output byte
/// (`.text`'s own, or the new segment's when `.text` is kept in place: then the plan holds the
/// instrumented functions only, and every other byte of `.text` is a kept range).
fn text_plan<'a>(
    ins: &'a Instrumented,
    relax: &BTreeMap<u64, Relaxed>,
    out_addr: u64,
) -> TextPlan<'a> {
    let (prog, snippets) = (&ins.prog, &ins.snippets);
    let (text_bytes, text_addr, text_end) =
        (ins.src.text_bytes(), ins.src.text_addr, ins.src.text_end);
    let target = prog.target;
    let verbatim = &ins.verbatim.blocks[..];
    let keep = ins.verbatim.kept_in_place;
    let mut tp = TextPlan {
        text_addr,
        out_addr,
        kept: Vec::new(),
        pieces: Vec::new(),
        pcrels: prog.pcrels.clone(),
    };
    if keep {
        tp.kept = kept_ranges(prog, verbatim, text_addr, text_end);
    }
    let mut cursor = text_addr;
    if let Some(first) = prog.funcs.first().filter(|_| !keep) {
        if first.spec.start > text_addr {
            // Leading padding (older compilers put `s_code_end` words first): kept verbatim.
            tp.pieces.push(Piece::Raw {
                addr: text_addr,
                bytes: &text_bytes[..(first.spec.start - text_addr) as usize],
            });
            cursor = first.spec.start;
        }
    }
    let mut islands = 0usize;
    for (fi, f) in prog.funcs.iter().enumerate() {
        if keep && verbatim.get(fi).copied().flatten().is_some() {
            continue; // stays in `.text` (a kept range)
        }
        if f.spec.start > cursor && !keep {
            let gap =
                &text_bytes[(cursor - text_addr) as usize..(f.spec.start - text_addr) as usize];
            if !is_padding(gap, target) {
                tp.pieces.push(Piece::Align(alignment_of(cursor, false)));
                tp.pieces.push(Piece::Raw {
                    addr: cursor,
                    bytes: gap,
                });
            }
        }
        tp.pieces.push(Piece::Align(alignment_of(
            f.spec.start,
            f.spec.kernel.is_some(),
        )));
        if let Some(end) = verbatim.get(fi).copied().flatten() {
            // Left alone: one block, its original instructions as they are but for their
            // PC-relative fields, then the bytes up to `end` (crate::verbatim).
            push_run(&mut tp, f, 0, f.insts.len());
            if end > f.spec.end {
                tp.pieces.push(Piece::Raw {
                    addr: f.spec.end,
                    bytes: &text_bytes
                        [(f.spec.end - text_addr) as usize..(end - text_addr) as usize],
                });
            }
            cursor = end;
            continue;
        }
        // Landing blocks: the markers of a branch edge, by branch (the sites of point `k`
        // marked `Landing::Edge(p)` belong to the edge from `p` into `k`).
        let mut edges: BTreeMap<usize, (u64, Vec<Instruction>)> = BTreeMap::new();
        let here = snippets.range((fi, 0)..(fi + 1, 0));
        for ((_, k), list) in here.clone() {
            for (s, code) in list {
                if let Landing::Edge(p) = s.landing {
                    let e = edges.entry(p).or_insert((f.insts.addr(*k), Vec::new()));
                    e.1.extend_from_slice(code);
                }
            }
        }
        // The instructions where the run of originals breaks: inserted code in front of them,
        // or an island after them.
        let n = f.insts.len();
        let relaxed = relax
            .range(f.spec.start..f.spec.end)
            .filter_map(|(a, _)| f.insts.index_of(*a));
        let breaks: BTreeSet<usize> = here
            .map(|((_, k), _)| *k)
            .chain(edges.keys().copied())
            .chain(relaxed)
            .filter(|&i| i < n)
            .collect();
        let mut from = 0;
        for i in breaks {
            push_run(&mut tp, f, from, i);
            from = i;
            if let Some(list) = snippets.get(&(fi, i)) {
                for (s, code) in list {
                    if matches!(s.landing, Landing::Edge(_)) || code.is_empty() {
                        continue;
                    }
                    tp.pieces.push(Piece::Insert {
                        code,
                        landing: s.landing,
                    });
                }
            }
            let (a, inst) = f.insts.at(i);
            let edge = edges.remove(&i);
            let r = relax.get(&a);
            match f.relocs[i] {
                Reloc::Branch { target: t } if r.is_some() || edge.is_some() => {
                    tp.pieces.push(Piece::Orig {
                        insts: &f.insts,
                        i,
                        reloc: Reloc::ToIsland { island: islands },
                    });
                    tp.pieces.push(Piece::Island {
                        from: a,
                        target: edge.as_ref().map_or(t, |e| e.0),
                        markers: edge.map(|e| e.1).unwrap_or_default(),
                        long: r.is_some(),
                        pair: r.and_then(|r| r.pair).unwrap_or(0),
                        isa: target,
                        skip: matches!(inst.flow(), amdgpu_isa::Flow::Branch { conditional: true }),
                    });
                    islands += 1;
                    from = i + 1;
                }
                _ => {}
            }
        }
        push_run(&mut tp, f, from, n);
        cursor = f.spec.end;
    }
    if cursor < text_end && !keep {
        tp.pieces.push(Piece::Raw {
            addr: cursor,
            bytes: &text_bytes[(cursor - text_addr) as usize..],
        });
    }
    tp
}

/// The ranges of `.text` that stay where they are when it is kept in place, as (start, length)
/// in bytes, ascending: everything but the instrumented functions (`verbatim[fi]` is `None`).
fn kept_ranges(
    prog: &Program,
    verbatim: &[Option<u64>],
    text_addr: u64,
    text_end: u64,
) -> Vec<(u64, u64)> {
    let mut kept = Vec::new();
    let mut from = text_addr;
    for (fi, f) in prog.funcs.iter().enumerate() {
        if verbatim.get(fi).copied().flatten().is_some() {
            continue;
        }
        if f.spec.start > from {
            kept.push((from, f.spec.start - from));
        }
        from = from.max(f.spec.end);
    }
    if text_end > from {
        kept.push((from, text_end - from));
    }
    kept
}

/// Appends the original instructions `from..to` of `f` as one run (nothing when empty).
fn push_run<'a>(tp: &mut TextPlan<'a>, f: &'a Func, from: usize, to: usize) {
    if from < to {
        tp.pieces.push(Piece::Run {
            insts: &f.insts,
            range: from..to,
            relocs: f.relocs.within(from, to),
        });
    }
}

/// A branch relaxed through a long-branch island.
#[derive(Debug, Clone, Copy)]
struct Relaxed {
    /// Function of the branch (index into [`Program::funcs`]).
    func: usize,
    /// Even-aligned SGPR pair the island clobbers (`None` on gfx1250: `s_add_pc_i64`).
    pair: Option<u8>,
}

/// Whether the branch at original address `at` can be relaxed: an SGPR pair is free at its
/// target, where the island jumps (not needed on gfx1250), and SCC is dead there (the island's
/// adds clobber SCC; gfx1250's `s_add_pc_i64` does not). Errors: the reason, with the original
/// entry address (bytes) of the branch's function when it is in one.
fn relaxable(
    prog: &Program,
    scc: &[Vec<bool>],
    sgprs: &mut SgprFacts,
    at: u64,
    target: Target,
) -> Result<Relaxed, (Option<u64>, String)> {
    for (fi, f) in prog.funcs.iter().enumerate() {
        let Some(i) = f.insts.index_of(at) else {
            continue;
        };
        let fail = |why: &str| (Some(f.spec.start), why.to_string());
        let inst = f.insts.get(i);
        let Reloc::Branch { target: t } = f.relocs[i] else {
            return Err(fail(&format!("{} is not a SOPP branch", inst.mnemonic())));
        };
        let mut pair = None;
        if target.family() != Family::Gfx1250 {
            let ti = f
                .insts
                .index_of(t)
                .ok_or_else(|| fail("target is not an instruction"))?;
            if scc[fi][ti] {
                return Err(fail(
                    "SCC is live at the branch target (the long branch clobbers it)",
                ));
            }
            pair = Some(
                SiteRegs::new(sgprs.free_at(prog, fi, ti))
                    .pair("a long branch")
                    .map_err(|why| fail(&why))?,
            );
        }
        return Ok(Relaxed { func: fi, pair });
    }
    Err((None, "not an instruction of any function".into()))
}

/// Alignment to keep for a function starting at `addr` (kernels: 256, AMDGPUUsage "Kernel
/// Descriptor": entries 256-byte aligned; others: the largest power of two dividing the original
/// address, between 4 and 256).
fn alignment_of(addr: u64, kernel: bool) -> u64 {
    if kernel {
        return 256;
    }
    let tz = addr.trailing_zeros().min(8);
    (1u64 << tz).max(4)
}
