//! The input of the layout (part of [`crate::layout`]): the new `.text` as pieces in output
//! order (original instructions, inserted code, islands, alignment, raw bytes).

use super::{Landing, PcRel, Reloc};
use crate::insts::Insts;
use amdgpu_isa::{Instruction, Target};
use std::ops::Range;

/// One element of the new `.text`, in output order. Original instructions and inserted code
/// are borrowed from the program and the snippets: a plan holds a few words per piece, and runs
/// of original instructions are one piece ([`Piece::Run`]), so its size follows the inserted
/// code, not the object.
#[derive(Debug, Clone)]
pub enum Piece<'a> {
    /// Pad with [`PAD_WORD`](super::PAD_WORD) up to a multiple of this many bytes (power of two).
    Align(u64),
    /// New instructions, belonging to the next original instruction.
    Insert {
        /// The instructions, in order.
        code: &'a [Instruction],
        /// Branch landing rule of every instruction of `code`.
        landing: Landing,
    },
    /// One original instruction whose PC-relative field is recomputed as `reloc` says (a SOPP
    /// branch aimed at its island: [`Reloc::ToIsland`]).
    Orig {
        /// The instructions of its function (original addresses and decoded originals).
        insts: &'a Insts,
        /// Its index in `insts`.
        i: usize,
        /// Field to recompute.
        reloc: Reloc,
    },
    /// Consecutive original instructions with their original addresses, and the fields to
    /// recompute in them.
    Run {
        /// The instructions of their function (original addresses and decoded originals).
        insts: &'a Insts,
        /// Their indices in `insts` (the numbering of `relocs`).
        range: Range<usize>,
        /// (instruction index, field to recompute), ascending, for the instructions of `range` that
        /// have one ([`Relocs::within`](super::Relocs::within)); the others have [`Reloc::None`].
        relocs: &'a [(u32, Reloc)],
    },
    /// Code trailing a SOPP branch that now targets it, ending in a jump to the branch's
    /// original address `target` (mapped with the landing rule): a long-branch island for a
    /// relaxed branch (`markers` empty, `long`), or a landing block (`markers` run on the branch
    /// edge only, then `s_branch`, or a long jump when the block's branch was relaxed).
    Island {
        /// Original address of the branch (bytes; names it when the jump is out of range).
        from: u64,
        /// Original absolute target (bytes).
        target: u64,
        /// Marker code of the edge, run before the jump.
        markers: Vec<Instruction>,
        /// Jump through SGPR pair `pair` ([`island_code`](super::island_code)) instead of
        /// `s_branch`.
        long: bool,
        /// First SGPR of the even-aligned pair the long jump may clobber (unused on gfx1250).
        pair: u8,
        /// Target processor (encodings).
        isa: Target,
        /// Start with `s_branch` over the island (the branch is conditional and its
        /// fall-through path must skip the island).
        skip: bool,
    },
    /// Original bytes copied verbatim (padding tails, data islands); addresses inside map by offset.
    Raw {
        /// Original address (bytes).
        addr: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// Everything needed to build the new `.text`.
#[derive(Debug, Clone, Default)]
pub struct TextPlan<'a> {
    /// Start address of `.text` (unchanged by the rewrite).
    pub text_addr: u64,
    /// Address of the first output byte: `text_addr` when the new code replaces `.text`, the
    /// new segment's address when `.text` is kept in place ([`crate::verbatim`]). At or above
    /// `text_addr`, and the output ends less than 4 GiB above `text_addr`.
    pub out_addr: u64,
    /// Ranges of the input `.text` that stay where they are, as (start, length) in bytes
    /// (functions kept in place and the bytes between functions): addresses in them map to
    /// themselves.
    pub kept: Vec<(u64, u64)>,
    /// Output order.
    pub pieces: Vec<Piece<'a>>,
    /// Address builders referenced by [`Reloc`] entries.
    pub pcrels: Vec<PcRel>,
}
