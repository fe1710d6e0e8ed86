//! What each original instruction's PC-relative field refers to (part of [`crate::layout`],
//! recorded by the analysis): branch and call targets, address builders and their use.

use crate::consteval::OffsetExpr;

/// What a PC-relative address builder points at, which decides how its target is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcRelUse {
    /// A call or a pointer to code: maps to the start of the target's inserted block.
    Call,
    /// A jump inside a function (long branch): maps with the landing rule.
    Branch,
    /// Data outside `.text`: the address does not move.
    Data,
}

/// One `s_getpc` address builder (a "PC-relative idiom").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcRel {
    /// Original address of the `s_getpc_b64` / `s_get_pc_i64` (bytes).
    pub getpc_addr: u64,
    /// Original absolute target address (bytes).
    pub target: u64,
    /// How the target is mapped.
    pub use_kind: PcRelUse,
}

/// What the layout must recompute in an original instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloc {
    /// Nothing PC-relative.
    None,
    /// SOPP branch / `s_call_b64` to an original address.
    Branch {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// `s_call_b64` to a function entry: lands on the entry's inserted block (entry marker runs).
    /// Also a SOPP branch of a left-alone function to another function's entry
    /// ([`crate::verbatim`]): never relaxed (out of range is an encoding error).
    Call {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// A relaxed SOPP branch: it now targets long-branch island `island` (see
    /// [`Piece::Island`](super::Piece::Island)), which jumps to the original target.
    ToIsland {
        /// Index of the island among the plan's [`Piece::Island`](super::Piece::Island)s, in output
        /// order.
        island: usize,
    },
    /// gfx1250 `s_add_pc_i64` with a 64-bit literal: offset from the next instruction.
    AddPc {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// Low 32 bits of idiom `idiom`'s offset, in this instruction's 32-bit literal.
    PcRelLo {
        /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
        idiom: usize,
    },
    /// High 32 bits of the offset (literal or inline constant 0 / -1 in SOP2 `ssrc1`).
    PcRelHi {
        /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
        idiom: usize,
    },
    /// The whole 64-bit offset in a 64-bit literal (gfx1250 `s_add_nc_u64`).
    PcRel64 {
        /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
        idiom: usize,
    },
    /// The literal an evaluated builder computes its offset from (Tensile's long branch,
    /// [`crate::consteval`]): re-aimed by [`OffsetExpr::solve`].
    PcRelEval {
        /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
        idiom: usize,
        /// The offset as a function of this instruction's literal.
        expr: OffsetExpr,
    },
    /// The last instruction of an evaluated builder: copied unchanged; it ends the stretch
    /// in which nothing is inserted ([`crate::plan::forbidden_points`]).
    PcRelEnd {
        /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
        idiom: usize,
    },
}

/// The relocations of one function's instructions, kept only where there is one (most
/// instructions have [`Reloc::None`]): (instruction index, reloc), ascending by index. Indexing
/// (`relocs[i]`) gives [`Reloc::None`] for the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relocs(Vec<(u32, Reloc)>);

/// What `relocs[i]` answers for an instruction without a relocation.
static NO_RELOC: Reloc = Reloc::None;

impl Relocs {
    /// The relocations set in `set` order as (instruction index, reloc); for an index set more
    /// than once the last one counts, and [`Reloc::None`] entries are dropped.
    pub fn from_set(mut set: Vec<(u32, Reloc)>) -> Relocs {
        // Stable: of equal indices, the last set stays last.
        set.sort_by_key(|&(i, _)| i);
        let mut out: Vec<(u32, Reloc)> = Vec::with_capacity(set.len());
        for (i, r) in set {
            match out.last_mut() {
                Some(last) if last.0 == i => last.1 = r,
                _ => out.push((i, r)),
            }
        }
        out.retain(|(_, r)| *r != Reloc::None);
        Relocs(out)
    }

    /// Every instruction with a relocation: (instruction index, reloc), ascending.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Reloc)> + '_ {
        self.0.iter().map(|&(i, r)| (i as usize, r))
    }

    /// The relocations, mutable (the instruction indices stay).
    pub fn relocs_mut(&mut self) -> impl Iterator<Item = &mut Reloc> + '_ {
        self.0.iter_mut().map(|(_, r)| r)
    }

    /// The entries of the instructions `from..to` (indices stay those of the function).
    pub fn within(&self, from: usize, to: usize) -> &[(u32, Reloc)] {
        let lo = self.0.partition_point(|&(i, _)| (i as usize) < from);
        let hi = self.0.partition_point(|&(i, _)| (i as usize) < to);
        &self.0[lo..hi]
    }
}

impl std::ops::Index<usize> for Relocs {
    type Output = Reloc;

    fn index(&self, i: usize) -> &Reloc {
        match self.0.binary_search_by_key(&i, |&(j, _)| j as usize) {
            Ok(k) => &self.0[k].1,
            Err(_) => &NO_RELOC,
        }
    }
}
