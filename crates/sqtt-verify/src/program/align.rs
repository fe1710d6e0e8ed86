//! Alignment of an original function body against its rewritten region: which rewritten
//! instruction is the copy of which original, and which are inserted.

use amdgpu_isa::{decode, Instruction, Target};

use super::landing::{island_at, landing_after};
use super::{Func, NInst, OInst};
use crate::program::insn::{allowed, insertable, is_padding, Allowed};
use crate::{Check, Finding};

/// Whether rewritten `n` is original `o` up to its PC-relative field: the simm16 of a direct
/// branch or call, or the literal when `pcrel_literal` (an add of an `s_getpc` address builder)
/// or for `s_add_pc_i64`. Every other byte must be equal.
pub(crate) fn same(o: &Instruction, n: &Instruction, pcrel_literal: bool) -> bool {
    if o.len() != n.len() || o.target() != n.target() {
        return false;
    }
    if o.branch_target(0).is_some() {
        return o.bytes().get(2..) == n.bytes().get(2..);
    }
    if pcrel_literal || o.special() == amdgpu_isa::Special::AddPcI64 {
        if let (Ok(a), Ok(b)) = (o.with_literal(0), n.with_literal(0)) {
            return a.bytes() == b.bytes();
        }
    }
    o.bytes() == n.bytes()
}

pub(super) fn hex(b: &[u8]) -> String {
    b.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            format!("{:08x}", u32::from_le_bytes(w))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Address windows of a stretch: the original instructions `[first, end]` and the rewritten
/// instructions `[first, end]` (ends inclusive: an inserted branch may target the end of its run).
#[derive(Clone, Copy)]
pub(super) struct Windows<'a> {
    orig: (u64, u64),
    new: (u64, u64),
    /// Start addresses of long-branch islands and landing blocks in the rewritten region: a
    /// relaxed original branch, or one with a landing block, targets one of them.
    islands: &'a std::collections::BTreeSet<u64>,
    /// Per rewritten instruction of the stretch (indexed like the `new` slice the matchers get):
    /// whether it lies inside an island or landing block, which never holds an original (an
    /// island's `s_wait_alu depctr_sa_sdst(0)` has the bytes of an original wait: rocRAND 7.2.4
    /// gfx1201 under `--shader-clock-bits 12`, session 20).
    in_island: &'a [bool],
}

impl Windows<'_> {
    /// Whether an original may be matched to rewritten instruction `q` of the stretch.
    fn may_hold_original(&self, q: usize) -> bool {
        !self.in_island.get(q).copied().unwrap_or(false)
    }
}

/// Whether original `o` (at `o_addr`) and rewritten `n` can be the same instruction: equal up to
/// PC-relative fields, and a branch whose rewritten target stays inside the inserted stretch
/// (an instrumentation-internal branch) is not taken for an original branch whose target lies
/// outside the original stretch.
pub(super) fn matches(
    o_addr: u64,
    o: &Instruction,
    n: &NInst,
    w: Windows,
    pcrel_literal: bool,
) -> bool {
    if !same(o, &n.inst, pcrel_literal) {
        return false;
    }
    let (Some(to), Some(tn)) = (o.branch_target(o_addr), n.inst.branch_target(n.addr)) else {
        return true;
    };
    // A relaxed branch targets its long-branch island, a branch with a landing block that block;
    // both trail it: forward, whatever the original direction (their own destination is checked
    // by the flow check).
    if w.islands.contains(&tn) {
        return true;
    }
    // Relocation keeps the order of instructions, so a branch keeps its direction.
    if (to > o_addr) != (tn > n.addr) {
        return false;
    }
    let inside = |t: u64, (a, b): (u64, u64)| t >= a && t <= b;
    !inside(tn, w.new) || inside(to, w.orig)
}

/// Positions in `new` of a subsequence equal to `orig`, each matched as late as possible.
pub(super) fn match_late(
    orig: &[(u64, Instruction)],
    new: &[NInst],
    w: Windows,
) -> Option<Vec<usize>> {
    match_late_where(orig, new, w, |_| true)
}

/// [`match_late`] that never matches an original to a closing wait right after a marker
/// ([`closes_marker`]): the third candidate when a stretch holds several guarded markers, each
/// closed by the same wait as an original in front of them (gfx1010's
/// `s_waitcnt_vscnt null, 0` after scope guards: neither the latest nor the earliest such wait
/// is the original; MAGMA sparse and rocRAND under `--scope`, session 19).
pub(super) fn match_late_past_closers(
    orig: &[(u64, Instruction)],
    new: &[NInst],
    w: Windows,
) -> Option<Vec<usize>> {
    match_late_where(orig, new, w, |q| !closes_marker(new, q))
}

/// [`match_late`] over the positions `usable` allows.
fn match_late_where(
    orig: &[(u64, Instruction)],
    new: &[NInst],
    w: Windows,
    usable: impl Fn(usize) -> bool,
) -> Option<Vec<usize>> {
    let mut pos = vec![0usize; orig.len()];
    let mut hi = new.len();
    for (t, (a, o)) in orig.iter().enumerate().rev() {
        let p = (0..hi)
            .rev()
            .find(|&q| usable(q) && w.may_hold_original(q) && matches(*a, o, &new[q], w, false))?;
        pos[t] = p;
        hi = p;
    }
    Some(pos)
}

/// Whether `new[q]` is a wait that closes the marker right before it (`s_waitcnt_vscnt` or
/// `s_wait_alu` after `s_ttracedata` / `s_ttracedata_imm`): inserted code ends guarded markers
/// with such waits (docs/hazards.md), and originals go after inserted runs, not inside them.
fn closes_marker(new: &[NInst], q: usize) -> bool {
    matches!(new[q].inst.mnemonic(), "s_waitcnt_vscnt" | "s_wait_alu")
        && q.checked_sub(1)
            .is_some_and(|p| new[p].inst.mnemonic().starts_with("s_ttracedata"))
}

/// Positions in `new` of a subsequence equal to `orig`, each matched as early as possible.
pub(super) fn match_early(
    orig: &[(u64, Instruction)],
    new: &[NInst],
    w: Windows,
) -> Option<Vec<usize>> {
    let mut pos = Vec::with_capacity(orig.len());
    let mut lo = 0usize;
    for (a, o) in orig {
        let p = (lo..new.len())
            .find(|&q| w.may_hold_original(q) && matches(*a, o, &new[q], w, false))?;
        pos.push(p);
        lo = p + 1;
    }
    Some(pos)
}

/// How many original branches of a stretch, matched at `pos` in `new`, reach a place other than
/// the one their target was matched to: a branch to an original of the same stretch must land
/// in the inserted run in front of that original's match, or on the match itself (what the flow
/// check allows); a branch to the original that ends the stretch, in the run in front of the
/// rewritten instruction that ends it. Branches into islands and landing blocks (`w.islands`),
/// and branches leaving the stretch, are not counted. A late match once took a scope guard's `s_cbranch_scc0` (over
/// its marker) for the original `s_cbranch_scc0` right before it (MAGMA sparse `bajac`
/// kernels under `--scope`, session 19).
fn stray_branches(pos: &[usize], orig: &[(u64, Instruction)], new: &[NInst], w: Windows) -> usize {
    let mut bad = 0;
    for (t, (a, o)) in orig.iter().enumerate() {
        let Some(to) = o.branch_target(*a) else {
            continue;
        };
        // The target's index among the stretch's originals; `orig.len()` for the original that
        // ends the stretch (`w.orig.1`), whose match is the rewritten one ending it (`w.new.1`).
        let k = match orig.binary_search_by_key(&to, |(x, _)| *x) {
            Ok(k) => k,
            Err(_) if to == w.orig.1 => orig.len(),
            Err(_) => continue,
        };
        let n = &new[pos[t]];
        let Some(tn) = n.inst.branch_target(n.addr) else {
            continue;
        };
        if w.islands.contains(&tn) {
            continue;
        }
        let lo = match k.checked_sub(1) {
            Some(b) => new[pos[b]].addr + new[pos[b]].inst.len() as u64,
            None => new[0].addr,
        };
        let hi = pos.get(k).map_or(w.new.1, |&p| new[p].addr);
        if tn < lo || tn > hi {
            bad += 1;
        }
    }
    bad
}

/// How implausible an alignment is: the number of inserted runs (maximal stretches of
/// unmatched rewritten instructions) that begin in the middle of a snippet. Every snippet the
/// rewriter inserts starts with `s_ttracedata_imm`, `s_mov_b32 m0, K`, an M0 save or an SCC
/// save or a scope guard (`s_cmp_lg_u32 sFLAG, 0` then `s_cbranch_scc*`), never with `s_nop 0`,
/// `s_ttracedata`, an M0 restore, an SCC restore (`s_cmp_lg_u32 sR, 0` not followed by an SCC
/// branch) or a closing wait (`s_waitcnt_vscnt`, `s_wait_alu`), and never at the head of one of
/// its own loops (an address-trace loop is entered after its lane counter is set: a run that
/// begins where a later branch of `new` jumps back to starts inside a snippet; fastllm's
/// `FastllmGemv*MultiRow` kernels for gfx1100, where the original right before a site was
/// `s_mov_b32 s1, 0`, the bytes of the loop's counter init, issue 29).
pub(super) fn misaligned_runs(pos: &[usize], new: &[NInst]) -> usize {
    let loop_heads: std::collections::BTreeSet<u64> = new
        .iter()
        .filter_map(|n| n.inst.branch_target(n.addr).filter(|&t| t < n.addr))
        .collect();
    let closing = |q: usize, i: &Instruction| match i.mnemonic() {
        "s_cmp_lg_u32" => {
            i.field("ssrc1") == Some(128)
                && !new
                    .get(q + 1)
                    .is_some_and(|n| n.inst.mnemonic().starts_with("s_cbranch_scc"))
        }
        "s_waitcnt_vscnt" | "s_wait_alu" => true,
        _ => false,
    };
    let mut bad = 0;
    let mut prev_matched = true;
    for (q, n) in new.iter().enumerate() {
        // `pos` is strictly increasing (a subsequence's positions).
        let matched = pos.binary_search(&q).is_ok();
        // An original taken for the wait that closes an inserted marker.
        if matched && !prev_matched && closes_marker(new, q) {
            bad += 1;
        }
        if !matched
            && prev_matched
            && (matches!(
                allowed(&n.inst),
                Some(Allowed::Nop0 | Allowed::Ttrace | Allowed::RestoreM0(_))
            ) || closing(q, &n.inst)
                || loop_heads.contains(&n.addr))
        {
            bad += 1;
        }
        prev_matched = matched;
    }
    bad
}

/// How many of the next originals the decoder of the rewritten text compares the next bytes
/// with (a copy with a relocated PC-relative field does not match its original's bytes; the
/// cursor steps over up to this many such copies in a row).
pub(super) const CURSOR_WINDOW: usize = 4;

/// Forward greedy alignment of the original body against the rewritten region. Inserted
/// instructions go in front of originals, so an original is matched at the first rewritten
/// instruction equal to it.
/// `index_of`: parallel to `body`, its shapes and register summaries (indices into
/// `f.shapes` and `f.regs_table`); `body_ins`: parallel to `body`, whether each is insertable
/// (`insertable_regs`).
pub(super) fn align(
    f: &mut Func,
    body: Vec<(u64, Instruction)>,
    index_of: Vec<(u32, u32)>,
    body_ins: &[bool],
    isa: Target,
    findings: &mut Vec<Finding>,
) {
    let ntext = f.ntext;
    // Inserted code may write any SGPR that is dead where it runs (checked per run by `flow`),
    // so the aligner accepts SGPR writes anywhere.
    let free = crate::program::insn::every_sgpr();
    let ins = |i: &Instruction| insertable(i, &free);
    let pcrel: Vec<usize> = f
        .builders
        .iter()
        .flat_map(|b| b.parts.iter().copied())
        .collect();
    let unplaced = |f: &mut Func, from: usize| {
        let run_end = f.inserted.len();
        f.orig.extend(
            body[from..]
                .iter()
                .zip(&index_of[from..])
                .map(|(&(addr, _), &(s, r))| OInst::unplaced(addr, s, r, run_end)),
        );
    };
    f.orig = Vec::with_capacity(body.len());
    let Some(start) = f.new_start else {
        unplaced(f, 0);
        return;
    };
    if !ntext.contains(start) {
        findings.push(f.finding(
            Check::Functions,
            Some(f.orig_start),
            Some(start),
            "rewritten entry is outside .text".into(),
        ));
        unplaced(f, 0);
        return;
    }
    // Decode the rewritten region; stop at the first word that does not decode. Most of it is
    // copies of the originals in order: a cursor follows them along the text, and where the
    // next bytes are those of one of the next originals, that original's instruction is taken
    // instead of a second decode (`same_as`: its index). `decode` reads only the instruction's
    // own bytes (its format's fields, literal and NSA dwords), except for an 8-byte VOP3P
    // word pair, where it looks at the next 8 bytes for a gfx950/gfx1250 two-part instruction
    // (`amdgpu_isa` `decode_at`): those are always decoded here.
    let bytes = ntext.slice(start, f.new_region_end);
    let mut new = Vec::with_capacity(bytes.len() / 4);
    let mut same_as: Vec<u32> = Vec::with_capacity(bytes.len() / 4);
    let mut cur = 0usize;
    let mut off = 0usize;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let addr = start + off as u64;
        let copy = (cur..(cur + CURSOR_WINDOW).min(body.len())).find(|&t| {
            let o = &body[t].1;
            rest.starts_with(o.bytes())
                && !(o.format() == amdgpu_isa::Format::Vop3p && o.len() == 8)
        });
        if let Some(t) = copy {
            cur = t + 1;
            off += body[t].1.len();
            new.push(NInst {
                addr,
                inst: body[t].1,
            });
            same_as.push(t as u32);
            continue;
        }
        match decode(rest, isa) {
            Ok(i) => {
                off += i.len();
                new.push(NInst { addr, inst: i });
                same_as.push(u32::MAX);
            }
            Err(e) => {
                findings.push(f.finding(
                    Check::Decode,
                    None,
                    Some(addr),
                    format!("rewritten text does not decode: {}", e.kind),
                ));
                break;
            }
        }
    }
    // An island is only a recognised sequence entered from the relaxed branch right before it
    // (`branch; island`, or `conditional branch; s_branch over the island; island`): that is
    // how the rewriter lays them out. The compiler's own long branches (LLVM's branch
    // relaxation) are entered by fall-through or from a branch elsewhere, and stay originals.
    let jumps_to = |p: Option<usize>, a: u64| {
        p.and_then(|p| new.get(p))
            .is_some_and(|b| b.inst.branch_target(b.addr) == Some(a))
    };
    let island_ranges: Vec<(u64, u64)> = (0..new.len())
        .filter_map(|q| island_at(&new, q).map(|isl| (q, isl)))
        .filter(|(q, isl)| {
            let (before, a) = (q.checked_sub(1), new[*q].addr);
            let over = before.is_some_and(|p| new[p].inst.mnemonic() == "s_branch")
                && jumps_to(before, isl.end);
            jumps_to(before, a) || (over && jumps_to(q.checked_sub(2), a))
        })
        .map(|(q, isl)| (new[q].addr, isl.end))
        .collect();
    // Landing blocks: inserted code a branch right before it was retargeted to.
    let landing_ranges: Vec<(u64, u64)> = (0..new.len())
        .filter_map(|q| landing_after(&new, q, ins).map(|(t, b, _)| (t, b.end)))
        .collect();
    let island_starts: std::collections::BTreeSet<u64> = island_ranges
        .iter()
        .chain(&landing_ranges)
        .map(|&(a, _)| a)
        .collect();
    let mut island_ranges: Vec<(u64, u64)> =
        island_ranges.into_iter().chain(landing_ranges).collect();
    island_ranges.sort_unstable();
    // Classified once per instruction (the loop below asks several times per position): an
    // address is in some range `[s, e)` when the largest end of the ranges starting at or before
    // it lies after it (one walk along both ascending lists, not a scan of the ranges per
    // instruction).
    let (mut r, mut reach) = (0usize, 0u64);
    let new_island: Vec<bool> = new
        .iter()
        .map(|n| {
            while let Some(&(_, e)) = island_ranges.get(r).filter(|x| x.0 <= n.addr) {
                reach = reach.max(e);
                r += 1;
            }
            n.addr < reach
        })
        .collect();
    // An instruction with an original's bytes (`same_as`, found while decoding) has that
    // original's answer; only the other instructions are classified.
    let new_ins: Vec<bool> = new
        .iter()
        .zip(&new_island)
        .zip(&same_as)
        .map(|((n, &isl), &t)| {
            isl || body_ins
                .get(t as usize)
                .copied()
                .unwrap_or_else(|| ins(&n.inst))
        })
        .collect();
    drop(same_as);
    let ins_new = |q: usize| new_ins[q];
    let (mut i, mut j) = (0usize, 0usize);
    while i < body.len() && j < new.len() {
        // A stretch of insertable instructions in front of a non-insertable one holds every
        // insertable-looking original up to that point: match them as late as possible (inserted
        // code goes in front of originals), so an inserted `s_nop 0` is not taken for an
        // original one.
        let e = (j..new.len()).find(|&x| !ins_new(x)).unwrap_or(new.len());
        let m = body_ins[i..].iter().take_while(|&&x| x).count();
        let w = Windows {
            orig: (body[i].0, body.get(i + m).map_or(f.orig_end, |(a, _)| *a)),
            new: (new[j].addr, new.get(e).map_or(f.new_region_end, |n| n.addr)),
            islands: &island_starts,
            in_island: &new_island[j..e],
        };
        if ins_new(j) && e < new.len() {
            let orig = &body[i..i + m];
            let score = |p: &[usize]| {
                (
                    stray_branches(p, orig, &new[j..e], w),
                    misaligned_runs(p, &new[j..e]),
                )
            };
            // The latest match, else the earliest, else the latest past closing waits: the first
            // with the fewest stray branches, then the fewest runs starting mid-snippet.
            let pick = [
                match_late(orig, &new[j..e], w),
                match_early(orig, &new[j..e], w),
                match_late_past_closers(orig, &new[j..e], w),
            ]
            .into_iter()
            .flatten()
            .min_by_key(|p| score(p));
            if let Some(pos) = pick {
                for (q, n) in new[j..e].iter().enumerate() {
                    // `pos` is strictly increasing: a binary search, not a scan per instruction.
                    if let Ok(t) = pos.binary_search(&q) {
                        let (oa, oi) = &body[i + t];
                        f.place(*oa, oi, index_of[i + t], n);
                    } else {
                        f.inserted.push(*n);
                    }
                }
                i += m;
                j = e;
                continue;
            }
        }
        let (oa, oi) = body[i];
        let n = new[j];
        // Islands and landing blocks are never original code, even where no original follows
        // them (a landing block right before a function's last branch: its own `s_branch` must
        // not be taken for that branch).
        if new_island[j] {
            f.inserted.push(n);
            j += 1;
            continue;
        }
        let lit = pcrel.contains(&i);
        if matches(oa, &oi, &n, w, lit) {
            f.place(oa, &oi, index_of[i], &n);
            i += 1;
            j += 1;
            continue;
        }
        if ins_new(j) {
            f.inserted.push(n);
            j += 1;
            continue;
        }
        if new.get(j + 1).is_some_and(|m| same(&oi, &m.inst, lit)) {
            // A foreign instruction inserted in front of the original: `check_inserted` reports it.
            f.inserted.push(n);
            j += 1;
            continue;
        }
        findings.push(f.finding(
            Check::Alignment,
            Some(oa),
            Some(n.addr),
            format!(
                "original instruction changed: expected {} [{}], found {} [{}]",
                oi.mnemonic(),
                hex(oi.bytes()),
                n.inst.mnemonic(),
                hex(n.inst.bytes())
            ),
        ));
        f.place(oa, &oi, index_of[i], &n);
        i += 1;
        j += 1;
    }
    if i < body.len() {
        let (oa, oi) = body[i];
        findings.push(f.finding(
            Check::Alignment,
            Some(oa),
            new.get(j).map(|n| n.addr),
            format!(
                "{} original instructions missing from the rewritten function, first {}",
                body.len() - i,
                oi.mnemonic()
            ),
        ));
        unplaced(f, i);
    }
    // The bytes that followed a function execution falls off are compared by `verbatim::check`.
    let copied_end = f
        .falls_off
        .zip(f.orig.last().and_then(|o| f.copy(o)))
        .map_or(0, |(gap, n)| n.addr + n.inst.len() as u64 + gap);
    for (q, n) in new.iter().enumerate().skip(j) {
        if new_island[q] {
            // A relaxed last branch's long form trails it inside the function (its extent runs
            // to the next function); checked as an island like any other.
            f.inserted.push(*n);
        } else if is_padding(&n.inst) {
            f.padding.push(*n);
        } else if n.addr < copied_end {
            continue;
        } else {
            findings.push(f.finding(
                Check::Padding,
                None,
                Some(n.addr),
                format!(
                    "{} after the end of the function (padding must be s_nop, s_code_end or zero words)",
                    n.inst.mnemonic()
                ),
            ));
        }
    }
}
