//! Lay out and encode the new `.text`: every original instruction in its original order, inserted
//! snippets in front of the instructions they belong to, kernel entries re-aligned to 256 bytes,
//! and every PC-relative field recomputed for the new addresses.
//!
//! Relocated fields (docs/background/rewriting.md, "Layout and relocation"):
//! - SOPP branches and `s_call_b64`: simm16 in dwords from the next instruction;
//! - `s_getpc_b64`/`s_get_pc_i64` address builders: the literal(s) of the adds that follow, which
//!   are relative to the address after the `s_getpc` (4 bytes after its start).
//!
//! Landing rule: a branch to an original instruction lands on the first inserted instruction in
//! front of it (so barrier and exit markers run on every path), except for instructions inserted
//! with [`Landing::After`] (function entry markers), which a branch skips: a loop back to a
//! function's first instruction must not enter the scope twice.
//!
//! Parts: the input [`TextPlan`] (`plan.rs`) and the relocations it carries (`reloc.rs`); the
//! two passes of [`lay_out`] (`passes.rs`) over one item per kind of PC-relative code
//! (`item.rs`), with long-branch islands from [`island_code`] (`relaxation.rs`); the output
//! [`Layout`] and its address maps (`positions.rs`).

mod item;
mod passes;
mod plan;
mod positions;
mod relaxation;
mod reloc;

pub use passes::lay_out;
pub use plan::{Piece, TextPlan};
pub use positions::Layout;
pub use relaxation::island_code;
pub use reloc::{PcRel, PcRelUse, Reloc, Relocs};

use amdgpu_isa::{Instruction, Target};
use thiserror::Error;

/// `s_nop 0`: the padding word lld writes between functions (same on gfx9..gfx12; checked with
/// llvm-objdump-22 on the corpus).
pub const PAD_WORD: u32 = 0xbf80_0000;

/// Where branches to the next original instruction land relative to an inserted instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// Branches land on (or before) this inserted instruction: it runs on every path.
    Before,
    /// Branches land after this inserted instruction (function entry markers).
    After,
    /// Runs only on the branch edge of original instruction `.0` (index in its function): the
    /// instruction goes into that SOPP branch's landing block ([`Piece::Island`] with
    /// `markers`), never in front of an instruction.
    Edge(usize),
}

/// Whether inserted code may contain new branches without a wait of their own on `t`: not on
/// gfx1010-gfx1013, which have the LDS → branch → VMEM hazard (LLVM GCNHazardRecognizer
/// `checkLdsBranchVmemWARHazard`). There landing blocks are not added, and long-branch islands
/// carry `s_waitcnt_vscnt null, 0` ([`island_code`]).
pub fn may_add_branches(t: Target) -> bool {
    !matches!(
        t.name(),
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
    )
}

/// Layout failure: the rewrite cannot be encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A relocated branch target is not an original instruction start.
    #[error("branch at {at:#x} targets {target:#x}, which is not an instruction start")]
    BadTarget {
        /// Original address of the branch.
        at: u64,
        /// Its target.
        target: u64,
    },
    /// SOPP branches that no longer reach their targets (simm16, about ±128 KiB): relax them.
    /// Pass 2 goes on past each one (writing zeros in its place) so that one layout names every
    /// such branch of the plan.
    #[error(
        "branch at {:#x} is out of simm16 range after insertion ({} such branch(es))",
        .at.first().copied().unwrap_or_default(),
        .at.len()
    )]
    OutOfRange {
        /// Original addresses of the branches (bytes), sorted, at least one.
        at: Vec<u64>,
    },
    /// Re-encoding failed.
    #[error("cannot re-encode instruction at {at:#x}: {why}")]
    Encode {
        /// Original address.
        at: u64,
        /// Encoder's message.
        why: String,
    },
}

fn code_len(code: &[Instruction]) -> u64 {
    code.iter().map(|i| i.len() as u64).sum()
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

#[cfg(test)]
mod tests;
