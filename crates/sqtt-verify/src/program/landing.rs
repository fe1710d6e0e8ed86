//! Landing blocks and long-branch islands in inserted code.

use std::collections::BTreeMap;

use amdgpu_isa::{Instruction, RegSet};
use rayon::prelude::*;

use super::{Func, NInst, Program, Regs};

/// A landing block the rewriter emits for a branch edge that needs markers of its own (issue
/// 16): the original conditional SOPP branch is retargeted to inserted code right after it and
/// an `s_branch` over the block, `{marker code; s_branch D}` or
/// `{marker code; long-branch island to D}`, where `D` must be a landing of the original target.
#[derive(Clone, Debug)]
pub(crate) struct LandingBlock {
    /// End of the marker code (exclusive; start of the jump).
    pub body_end: u64,
    /// End of the block (exclusive).
    pub end: u64,
    /// Where the jump lands.
    pub dest: u64,
}

/// Recognises a landing block starting at `run[j]`: at least one contiguous instruction
/// `is_body` accepts (a relaxed branch's bare island is not a landing block), then an `s_branch`
/// out of the block or a long-branch island. Returns the block and its tail island, if any.
pub(super) fn landing_at(
    run: &[NInst],
    j: usize,
    is_body: impl Fn(&Instruction) -> bool,
) -> Option<(LandingBlock, Option<Island>)> {
    let start = run.get(j)?.addr;
    let mut next = start;
    for i in j..run.len() {
        let n = &run[i];
        if n.addr != next {
            return None;
        }
        let tail = i > j;
        if let Some(isl) = island_at(run, i).filter(|_| tail) {
            let block = LandingBlock {
                body_end: n.addr,
                end: isl.end,
                dest: isl.dest,
            };
            return Some((block, Some(isl)));
        }
        if tail && n.inst.mnemonic() == "s_branch" {
            let t = n.inst.branch_target(n.addr)?;
            if t >= start && t <= n.addr {
                return None;
            }
            let block = LandingBlock {
                body_end: n.addr,
                end: n.addr + 4,
                dest: t,
            };
            return Some((block, None));
        }
        if !is_body(&n.inst) {
            return None;
        }
        next = n.addr + n.inst.len() as u64;
    }
    None
}

/// The landing block a conditional SOPP branch at `new[q]` (the instructions after it follow in
/// `new`) was retargeted to, with its tail island: the block starts right after an `s_branch` to
/// the block's end, which follows the branch.
pub(super) fn landing_after(
    new: &[NInst],
    q: usize,
    is_body: impl Fn(&Instruction) -> bool,
) -> Option<(u64, LandingBlock, Option<Island>)> {
    let b = new.get(q)?;
    if b.inst.flow() != (amdgpu_isa::Flow::Branch { conditional: true }) {
        return None;
    }
    let t = b.inst.branch_target(b.addr)?;
    let j = new.binary_search_by_key(&t, |n| n.addr).ok()?;
    let after = b.addr + b.inst.len() as u64;
    let s = new.get(j.checked_sub(1)?)?;
    let over = (s.addr == after && s.inst.mnemonic() == "s_branch" && t == after + 4)
        .then(|| s.inst.branch_target(s.addr))??;
    let (block, isl) = landing_at(new, j, is_body)?;
    (over == block.end).then_some((t, block, isl))
}

/// A long-branch island the rewriter emits for a relaxed branch: `s_getpc_b64 s[p:p+1]`,
/// optional `s_wait_alu`, `s_add_u32`/`s_add_co_u32 sp, sp, lit`, `s_addc_u32`/
/// `s_add_co_ci_u32 sp+1, sp+1, lit`, optional `s_wait_alu` or (gfx1010-gfx1013)
/// `s_waitcnt_vscnt`, `s_setpc_b64 s[p:p+1]` (offset
/// from the getpc address + 4), or one gfx1250 `s_add_pc_i64 lit64` (offset from the next
/// instruction).
#[derive(Clone, Debug)]
pub(crate) struct Island {
    /// End address (exclusive).
    pub end: u64,
    /// Where it jumps.
    pub dest: u64,
    /// Registers it writes (the pair and SCC; nothing on gfx1250).
    pub writes: RegSet,
}

/// Recognises an island starting at `run[i]` (instructions must be contiguous).
pub(super) fn island_at(run: &[NInst], i: usize) -> Option<Island> {
    let first = run.get(i)?;
    let m = first.inst.mnemonic();
    if m == "s_add_pc_i64" && first.inst.len() == 12 {
        let lit = first.inst.literal()?;
        let end = first.addr + 12;
        return Some(Island {
            end,
            dest: end.wrapping_add(lit),
            writes: RegSet::new(),
        });
    }
    if m != "s_getpc_b64" && m != "s_get_pc_i64" {
        return None;
    }
    let pair = first.inst.writes().max_sgpr()?.checked_sub(1)?;
    let mut j = i + 1;
    let mut next = first.addr + 4;
    // Next contiguous instruction if its mnemonic is one of `want`.
    fn step(run: &[NInst], j: &mut usize, next: &mut u64, want: &[&str]) -> Option<NInst> {
        let n = *run.get(*j)?;
        if n.addr != *next || !want.contains(&n.inst.mnemonic()) {
            return None;
        }
        *j += 1;
        *next = n.addr + n.inst.len() as u64;
        Some(n)
    }
    let _ = step(run, &mut j, &mut next, &["s_wait_alu"]);
    let lo = step(run, &mut j, &mut next, &["s_add_u32", "s_add_co_u32"])?;
    let hi = step(run, &mut j, &mut next, &["s_addc_u32", "s_add_co_ci_u32"])?;
    // gfx12's SALU wait, or gfx1010-gfx1013's LDS/branch/VMEM wait.
    let _ = step(run, &mut j, &mut next, &["s_wait_alu", "s_waitcnt_vscnt"]);
    let set = step(run, &mut j, &mut next, &["s_setpc_b64", "s_set_pc_i64"])?;
    let (lw, hw) = (lo.inst.writes(), hi.inst.writes());
    let ok = lw.contains_sgpr(pair)
        && !lw.contains_sgpr(pair + 1)
        && hw.contains_sgpr(pair + 1)
        && set.inst.reads().contains_sgpr(pair)
        && set.inst.reads().contains_sgpr(pair + 1);
    if !ok {
        return None;
    }
    let off = (hi.inst.literal()? << 32) | (lo.inst.literal()? & 0xffff_ffff);
    let mut writes = RegSet::new();
    writes.add_sgpr(pair);
    writes.add_sgpr(pair + 1);
    writes.add(amdgpu_isa::SpecialReg::Scc);
    Some(Island {
        end: next,
        dest: (first.addr + 4).wrapping_add(off),
        writes,
    })
}

/// Every landing block in the inserted code of `funcs` (an original branch whose target is not
/// the next original instruction, retargeted to inserted code after it), and the islands at
/// their tails, by start address.
/// Functions are searched in parallel and their blocks entered in function order.
pub(super) fn find_landings(
    funcs: &[Func<'_>],
) -> (BTreeMap<u64, LandingBlock>, BTreeMap<u64, Island>) {
    let found: Vec<Vec<(u64, LandingBlock, Option<Island>)>> = funcs
        .par_iter()
        .map(|f| {
            let mut found = Vec::new();
            for (k, o) in f.orig.iter().enumerate() {
                // The run of the next original (where the block sits); without one the branch
                // has no block after it.
                let run = f.orig.get(k + 1).map_or(&[][..], |_| {
                    f.inserted.get(f.run(k + 1)).unwrap_or_default()
                });
                if run.is_empty() {
                    continue;
                }
                let (Some(n), Some(to)) = (f.copy(o), f.inst(o).branch_target(o.addr)) else {
                    continue;
                };
                if f.orig.get(k + 1).is_some_and(|x| x.addr == to) {
                    continue;
                }
                // The branch, then that run.
                let mut seq = vec![n];
                seq.extend_from_slice(run);
                found.extend(landing_after(&seq, 0, |_| true));
            }
            found
        })
        .collect();
    let mut out = BTreeMap::new();
    let mut tails = BTreeMap::new();
    for (t, block, isl) in found.into_iter().flatten() {
        if let Some(isl) = isl {
            tails.insert(block.body_end, isl);
        }
        out.insert(t, block);
    }
    (out, tails)
}

/// Every island in the inserted code of `funcs` that a relocated original branch targets.
/// Functions are searched in parallel (a function without inserted code has none).
pub(super) fn find_islands(funcs: &[Func<'_>]) -> BTreeMap<u64, Island> {
    let found: Vec<Vec<(u64, Island)>> = funcs
        .par_iter()
        .filter(|f| !f.inserted.is_empty())
        .map(|f| {
            let targeted: std::collections::BTreeSet<u64> = f
                .orig
                .iter()
                // A copy of the original's shape has a target only where the original has one
                // (not `Regs::PLAIN`).
                .filter(|o| !f.regs(o).has(Regs::PLAIN) || o.copy_reshaped())
                .filter_map(|o| f.copy(o).and_then(|n| n.inst.branch_target(n.addr)))
                .collect();
            (0..f.inserted.len())
                .filter(|&i| targeted.contains(&f.inserted[i].addr))
                .filter_map(|i| island_at(&f.inserted, i).map(|isl| (f.inserted[i].addr, isl)))
                .collect()
        })
        .collect();
    found.into_iter().flatten().collect()
}

impl Program<'_> {
    /// The landing block containing new address `a`, with its start, if any.
    pub(crate) fn landing_containing(&self, a: u64) -> Option<(u64, &LandingBlock)> {
        self.landings
            .range(..=a)
            .next_back()
            .map(|(s, b)| (*s, b))
            .filter(|(_, b)| a < b.end)
    }

    /// The island containing new address `a`, if any.
    pub(crate) fn island_containing(&self, a: u64) -> Option<&Island> {
        self.islands
            .range(..=a)
            .next_back()
            .map(|(_, isl)| isl)
            .filter(|isl| a < isl.end)
    }
}
