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

mod item;

use crate::consteval::OffsetExpr;
use crate::insts::Insts;
use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};
use item::{
    AddPc64, BranchToIsland, CallEntry, Fixed, Island, Item, Part, PcRelPart, Resolver, ShortBranch,
};
use std::ops::Range;
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

/// Whether inserted code may contain new branches (long-branch islands, landing blocks) on `t`:
/// not on gfx1010-gfx1013, which have the LDS → branch → VMEM hazard (LLVM GCNHazardRecognizer
/// `checkLdsBranchVmemWARHazard`): a new branch would need `s_waitcnt_vscnt null, 0` waits.
pub fn may_add_branches(t: Target) -> bool {
    !matches!(
        t.name(),
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
    )
}

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
    /// [`Piece::Island`]), which jumps to the original target.
    ToIsland {
        /// Index of the island among the plan's [`Piece::Island`]s, in output order.
        island: usize,
    },
    /// gfx1250 `s_add_pc_i64` with a 64-bit literal: offset from the next instruction.
    AddPc {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// Low 32 bits of idiom `idiom`'s offset, in this instruction's 32-bit literal.
    PcRelLo {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
    /// High 32 bits of the offset (literal or inline constant 0 / -1 in SOP2 `ssrc1`).
    PcRelHi {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
    /// The whole 64-bit offset in a 64-bit literal (gfx1250 `s_add_nc_u64`).
    PcRel64 {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
    /// The literal an evaluated builder computes its offset from (Tensile's long branch,
    /// [`crate::consteval`]): re-aimed by [`OffsetExpr::solve`].
    PcRelEval {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
        /// The offset as a function of this instruction's literal.
        expr: OffsetExpr,
    },
    /// The last instruction of an evaluated builder: copied unchanged; it ends the stretch
    /// in which nothing is inserted ([`crate::plan::forbidden_points`]).
    PcRelEnd {
        /// Index into [`TextPlan::pcrels`].
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

/// One element of the new `.text`, in output order. Original instructions and inserted code
/// are borrowed from the program and the snippets: a plan holds a few words per piece, and runs
/// of original instructions are one piece ([`Piece::Run`]), so its size follows the inserted
/// code, not the object.
#[derive(Debug, Clone)]
pub enum Piece<'a> {
    /// Pad with [`PAD_WORD`] up to a multiple of this many bytes (power of two).
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
        /// (instruction index, field to recompute), ascending, for the instructions of `range`
        /// that have one ([`Relocs::within`]); the others have [`Reloc::None`].
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
        /// Jump through SGPR pair `pair` ([`island_code`]) instead of `s_branch`.
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

/// Where one original instruction went: its original and new addresses as byte offsets from
/// the start of `.text` (8 bytes per instruction; `.text` is below 4 GiB, [`lay_out`] checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    /// Original address - `.text` start (bytes).
    old: u32,
    /// New address of the instruction itself - `.text` start (bytes).
    new: u32,
}

/// An original instruction with inserted code in front of it: where its block starts and where
/// branches to it land, when either differs from the instruction's own new address (offsets
/// from the start of `.text`, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    /// Original address - `.text` start (bytes).
    old: u32,
    /// New address of the first instruction inserted in front of it - `.text` start.
    start: u32,
    /// New address where branches to it land - `.text` start.
    landing: u32,
}

/// One add of an address builder of data ([`PcRelUse::Data`]), kept so that its offset can be
/// recomputed when the data moves ([`Layout::retarget_data`]).
#[derive(Debug, Clone)]
struct DataPart {
    /// New address of the add (bytes).
    at: u64,
    /// Original address (bytes).
    old: u64,
    /// Decoded original.
    inst: Instruction,
    /// Index into [`TextPlan::pcrels`].
    idiom: usize,
    /// Which part of the offset it carries.
    part: Part,
}

/// The laid-out `.text`: its bytes and where every original instruction went (about 9 bytes per
/// original instruction, plus 12 per instruction with inserted code in front of it).
#[derive(Debug, Clone)]
pub struct Layout {
    /// New section contents.
    pub bytes: Vec<u8>,
    /// Start address of `.text` (bytes; the same before and after); offsets in the tables below
    /// count from it.
    text_addr: u64,
    /// Address of `bytes[0]` ([`TextPlan::out_addr`]).
    out_addr: u64,
    /// Every original instruction, sorted by original address.
    placed: Vec<Placed>,
    /// Length in bytes of each instruction of `placed` (parallel).
    lens: Vec<u8>,
    /// Instructions of `placed` with inserted code in front of them, sorted by original address.
    blocks: Vec<Block>,
    /// Original instructions followed by islands ([`Piece::Island`]: a relaxed branch's long
    /// form, a landing block): (original address, new end of the last island) as offsets from
    /// the start of `.text`, sorted by original address. The islands belong to the instruction's
    /// function, so an end that falls right after it maps past them ([`Layout::map_end`]).
    trails: Vec<(u32, u32)>,
    /// Ranges of the input kept in place ([`TextPlan::kept`]): (start, length), ascending.
    kept: Vec<(u64, u64)>,
    /// Raw regions: (old start, len, new start).
    pub raws: Vec<(u64, u64, u64)>,
    /// Original end of `.text` mapped to the new end.
    pub new_end: u64,
    /// The adds of address builders of data, in output order.
    data_parts: Vec<DataPart>,
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

impl Layout {
    /// `addr` as a byte offset from the start of `.text`, when it fits the tables.
    fn offset(&self, addr: u64) -> Option<u32> {
        addr.checked_sub(self.text_addr)
            .and_then(|o| u32::try_from(o).ok())
    }

    /// Index in `placed` of the original instruction starting at `old`.
    fn find(&self, old: u64) -> Option<usize> {
        let o = self.offset(old)?;
        self.placed.binary_search_by_key(&o, |p| p.old).ok()
    }

    /// Block start and landing address (bytes) of `placed[i]`.
    fn block_of(&self, i: usize) -> (u64, u64) {
        let p = self.placed[i];
        let (s, l) = match self.blocks.binary_search_by_key(&p.old, |b| b.old) {
            Ok(k) => (self.blocks[k].start, self.blocks[k].landing),
            Err(_) => (p.new, p.new),
        };
        (self.text_addr + u64::from(s), self.text_addr + u64::from(l))
    }

    /// Original address, length and new address (bytes) of `placed[i]`.
    fn at(&self, i: usize) -> (u64, u64, u64) {
        let p = self.placed[i];
        (
            self.text_addr + u64::from(p.old),
            u64::from(self.lens[i]),
            self.text_addr + u64::from(p.new),
        )
    }

    /// Index of the last placed instruction whose original address satisfies `before`
    /// (`partition_point` over the original addresses, minus one).
    fn last_where(&self, before: impl Fn(u64) -> bool) -> Option<usize> {
        let base = self.text_addr;
        self.placed
            .partition_point(|p| before(base + u64::from(p.old)))
            .checked_sub(1)
    }

    /// Maps an original code address for calls, symbols, DWARF and relocations: instruction
    /// starts map to their block start, bytes inside an instruction or a raw region keep their
    /// offset. `None` for addresses outside the rewritten code.
    pub fn map_addr(&self, old: u64) -> Option<u64> {
        if let Some(i) = self.find(old) {
            return Some(self.block_of(i).0);
        }
        if let Some(i) = self.last_where(|o| o <= old) {
            let (o, len, new) = self.at(i);
            if old < o + len {
                return Some(new + (old - o));
            }
        }
        if self.kept_holding(old, |s, e| s <= old && old < e) {
            return Some(old);
        }
        for &(start, len, new) in &self.raws {
            if old >= start && old < start + len {
                return Some(new + (old - start));
            }
        }
        None
    }

    /// Address of the first output byte (bytes): `.text`'s own, or the new segment's when
    /// `.text` is kept in place.
    pub fn out_addr(&self) -> u64 {
        self.out_addr
    }

    /// Whether `.text` is kept in place (the output goes to a new segment).
    pub fn keeps_text(&self) -> bool {
        self.out_addr != self.text_addr
    }

    /// Whether the kept range that starts last at or below `a` satisfies `holds(start, end)`.
    fn kept_holding(&self, a: u64, holds: impl Fn(u64, u64) -> bool) -> bool {
        let i = self.kept.partition_point(|k| k.0 <= a);
        let last_start_below = |j: usize| j.checked_sub(1).and_then(|j| self.kept.get(j));
        // An end address may be the end of the range before the one starting at it.
        [i, i.wrapping_sub(1)]
            .into_iter()
            .filter_map(last_start_below)
            .any(|&(s, len)| holds(s, s + len))
    }

    /// Maps an original instruction start to the start of its inserted block (the map of
    /// symbols, kernel entries and relocation addends that name an instruction); `None` when
    /// `old` is not the start of an original instruction.
    pub fn map_inst_start(&self, old: u64) -> Option<u64> {
        self.find(old).map(|i| self.block_of(i).0)
    }

    /// Maps an original branch target with the landing rule; `None` if not an instruction start.
    pub fn map_branch(&self, old: u64) -> Option<u64> {
        self.find(old).map(|i| self.block_of(i).1)
    }

    /// Where the original instruction at `old` now is (the instruction itself).
    pub fn new_inst_addr(&self, old: u64) -> Option<u64> {
        self.find(old).map(|i| self.at(i).2)
    }

    /// Maps the exclusive end address of an original range (a function's or a symbol's end).
    pub fn map_end(&self, old_end: u64, text_old_end: u64) -> Option<u64> {
        // The end of something kept in place (the range holds its last byte).
        if self.kept_holding(old_end, |s, e| s < old_end && old_end <= e) {
            return Some(old_end);
        }
        if old_end == text_old_end {
            return Some(self.new_end);
        }
        if let Some(i) = self.last_where(|o| o < old_end) {
            let (o, len, new) = self.at(i);
            if o + len == old_end {
                // A function whose last instruction is a relaxed branch ends after its island.
                let trail = self
                    .trails
                    .binary_search_by_key(&self.placed[i].old, |t| t.0)
                    .ok()
                    .map(|k| self.text_addr + u64::from(self.trails[k].1));
                return Some(trail.unwrap_or(new + len));
            }
        }
        // The end of a raw region (a verbatim function's end) maps to the end of its copy.
        if let Some(&(_, len, n)) = self.raws.iter().find(|r| r.0 + r.1 == old_end) {
            return Some(n + len);
        }
        self.map_addr(old_end)
    }

    /// Every original instruction's address with the start of its inserted block (bytes), by
    /// original address.
    pub fn block_starts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let base = self.text_addr;
        let mut blocks = self.blocks.iter().peekable();
        self.placed.iter().map(move |p| {
            while blocks.next_if(|b| b.old < p.old).is_some() {}
            let start = blocks
                .next_if(|b| b.old == p.old)
                .map_or(p.new, |b| b.start);
            (base + u64::from(p.old), base + u64::from(start))
        })
    }

    /// Recomputes, in `text` (these new `.text` bytes), the adds of every address builder of
    /// data for the targets in `pcrels` (the plan's builders with data targets moved, as when
    /// the sections after `.text` move). Every other byte is unchanged: a data target decides
    /// nothing but these offsets. Errors as [`lay_out`]'s.
    pub fn retarget_data(&self, text: &mut [u8], pcrels: &[PcRel]) -> Result<(), LayoutError> {
        let r = Resolver {
            layout: self,
            pcrels,
            islands: &[],
        };
        let mut buf = Vec::new();
        for d in &self.data_parts {
            buf.clear();
            let item = PcRelPart {
                old: d.old,
                inst: &d.inst,
                idiom: d.idiom,
                part: d.part,
            };
            item.encode(d.at, &r, &mut buf)?;
            let lo = (d.at - self.out_addr) as usize;
            match text.get_mut(lo..lo + buf.len()) {
                Some(dst) if buf.len() == d.inst.len() => dst.copy_from_slice(&buf),
                _ => {
                    return Err(LayoutError::Encode {
                        at: d.old,
                        why: format!("re-encoded to {} bytes at {:#x}", buf.len(), d.at),
                    })
                }
            }
        }
        Ok(())
    }
}

/// Placeholder that forces a 32-bit literal when an island is first built (inline constants would
/// change the island's size between layout passes).
const FORCE_LITERAL: u32 = 0x1234_5678;

/// Code of a long-branch island at `at` jumping to `dest` (bytes), the same sequences LLVM 22's
/// branch relaxation emits (checked against the corpus' long-branch fixtures):
/// - gfx9/gfx10/gfx11: `s_getpc_b64 s[p:p+1]`, `s_add_u32 sp, sp, lo`, `s_addc_u32 sp+1, sp+1,
///   hi`, `s_setpc_b64 s[p:p+1]` (offset relative to the getpc address + 4);
/// - gfx12: the same with `s_add_co_u32`/`s_add_co_ci_u32`, `s_wait_alu depctr_sa_sdst(0)`
///   after the getpc, and before the setpc `s_wait_alu depctr_sa_sdst(0) depctr_va_sdst(0)
///   depctr_va_vcc(0)`: an island is entered by a branch from code that may leave any SGPR or
///   VCC write uncommitted, and a setpc needs every such write committed (rule `setpc-pending`,
///   `amdgpu_isa::hazard::SETPC_PENDING`; LLVM 22 `AMDGPUWaitSGPRHazards`, IsSetPC);
/// - gfx1250: one `s_add_pc_i64` with a 64-bit literal (offset from the next instruction).
///
/// Clobbers SCC and the pair (not on gfx1250). The size never depends on `at`/`dest`.
pub fn island_code(t: Target, at: u64, dest: u64, pair: u8) -> Result<Vec<Instruction>, String> {
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    if t.family() == Family::Gfx1250 {
        let add = build::s_add_pc_i64(t, 0).map_err(e)?;
        let off = dest.wrapping_sub(at + add.len() as u64);
        return Ok(vec![add.with_literal(off).map_err(e)?]);
    }
    let gfx12 = t.family() == Family::Gfx12;
    // s_wait_alu depctr_sa_sdst(0): SALU SGPR write read by the next SALU (gfx12; llc-22 output).
    const SA_SDST0: u16 = 0xff9e;
    // s_wait_alu depctr_sa_sdst(0) depctr_va_sdst(0) depctr_va_vcc(0) (llvm-mc-22: 0xf19c).
    const ALL_SDST0: u16 = 0xf19c;
    let off = dest.wrapping_sub(at + 4);
    let p = Operand::Sgpr(pair);
    let p1 = Operand::Sgpr(pair + 1);
    let mut code = vec![build::s_getpc_b64(t, pair).map_err(e)?];
    if gfx12 {
        code.push(build::s_wait_alu(t, SA_SDST0).map_err(e)?);
    }
    let lo = build::s_add_u32(t, p, p, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(lo.with_literal(off & 0xffff_ffff).map_err(e)?);
    let hi = build::s_addc_u32(t, p1, p1, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(hi.with_literal(off >> 32).map_err(e)?);
    if gfx12 {
        code.push(build::s_wait_alu(t, ALL_SDST0).map_err(e)?);
    }
    code.push(build::s_setpc_b64(t, pair).map_err(e)?);
    Ok(code)
}

fn code_len(code: &[Instruction]) -> u64 {
    code.iter().map(|i| i.len() as u64).sum()
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// A new address as a byte offset from the start of `.text` for the layout's tables; errors
/// (naming the original address `old`) beyond 4 GiB.
fn text_offset(text_addr: u64, addr: u64, old: u64) -> Result<u32, LayoutError> {
    addr.checked_sub(text_addr)
        .and_then(|o| u32::try_from(o).ok())
        .ok_or_else(|| LayoutError::Encode {
            at: old,
            why: format!("address {addr:#x} is not within 4 GiB after the start of .text"),
        })
}

/// Pass 1 state: where the next byte goes, and the block of inserted code waiting for its
/// original instruction.
struct Pass1 {
    addr: u64,
    run_start: Option<u64>,
    landing: Option<u64>,
}

impl Pass1 {
    /// An inserted instruction of `len` bytes with landing rule `l`.
    fn insert(&mut self, len: u64, l: Landing) {
        self.run_start.get_or_insert(self.addr);
        match l {
            Landing::Before => {
                self.landing.get_or_insert(self.addr);
            }
            Landing::After => self.landing = None,
            // Never in front of an instruction (text plans put them in islands).
            Landing::Edge(_) => {}
        }
        self.addr += len;
    }

    /// The original instruction at `old` of `len` bytes, recorded in `l`.
    fn orig(
        &mut self,
        text_addr: u64,
        old: u64,
        len: usize,
        l: &mut Layout,
    ) -> Result<(), LayoutError> {
        let new = self.addr;
        let block_start = self.run_start.take().unwrap_or(new);
        let land = self.landing.take().unwrap_or(new);
        let off = |a: u64| text_offset(text_addr, a, old);
        let p = Placed {
            old: off(old)?,
            new: off(new)?,
        };
        if block_start != new || land != new {
            l.blocks.push(Block {
                old: p.old,
                start: off(block_start)?,
                landing: off(land)?,
            });
        }
        l.placed.push(p);
        l.lens.push(len as u8);
        self.addr += len as u64;
        Ok(())
    }
}

/// Assigns addresses (pass 1: sizes), then has every piece encode itself at its address (pass
/// 2: [`item`]), giving the new `.text`. Errors name the original address of the instruction
/// that cannot be encoded, or the new address of a piece whose encoding changed size.
pub fn lay_out(plan: &TextPlan) -> Result<Layout, LayoutError> {
    let (text_addr, out_addr) = (plan.text_addr, plan.out_addr);
    // Pass 1: addresses.
    let mut p1 = Pass1 {
        addr: out_addr,
        run_start: None,
        landing: None,
    };
    let mut new_addrs = Vec::with_capacity(plan.pieces.len());
    let mut layout = Layout {
        bytes: Vec::new(),
        text_addr,
        out_addr,
        placed: Vec::new(),
        lens: Vec::new(),
        blocks: Vec::new(),
        trails: Vec::new(),
        kept: plan.kept.clone(),
        raws: Vec::new(),
        new_end: out_addr,
        data_parts: Vec::new(),
    };
    let mut islands: Vec<u64> = Vec::new();
    for piece in &plan.pieces {
        new_addrs.push(p1.addr);
        match piece {
            Piece::Align(a) => p1.addr = align_up(p1.addr, *a),
            Piece::Insert { code, landing } => {
                for inst in *code {
                    p1.insert(inst.len() as u64, *landing);
                }
            }
            Piece::Orig { insts, i, .. } => {
                p1.orig(text_addr, insts.addr(*i), insts.size(*i), &mut layout)?
            }
            Piece::Run { insts, range, .. } => {
                layout.placed.reserve(range.len());
                layout.lens.reserve(range.len());
                for i in range.clone() {
                    p1.orig(text_addr, insts.addr(i), insts.size(i), &mut layout)?;
                }
            }
            Piece::Island { .. } => {
                // Trails its branch: not part of the next instruction's block.
                let island = island_of(piece).ok_or(LayoutError::BadTarget {
                    at: p1.addr,
                    target: 0,
                })?;
                islands.push(island.entry(p1.addr));
                p1.addr += island.size()?;
                // The island trails the last original placed (its branch).
                if let Some(last) = layout.placed.last() {
                    let end = text_offset(text_addr, p1.addr, text_addr + u64::from(last.old))?;
                    match layout.trails.last_mut() {
                        Some(t) if t.0 == last.old => t.1 = end,
                        _ => layout.trails.push((last.old, end)),
                    }
                }
            }
            Piece::Raw { addr: old, bytes } => {
                p1.run_start = None;
                p1.landing = None;
                layout.raws.push((*old, bytes.len() as u64, p1.addr));
                p1.addr += bytes.len() as u64;
            }
        }
    }
    let addr = p1.addr;
    layout.new_end = addr;
    if !layout.placed.is_sorted_by_key(|p| p.old) {
        let mut both: Vec<(Placed, u8)> = layout
            .placed
            .iter()
            .copied()
            .zip(layout.lens.iter().copied())
            .collect();
        both.sort_by_key(|(p, _)| p.old);
        (layout.placed, layout.lens) = both.into_iter().unzip();
        layout.blocks.sort_by_key(|b| b.old);
        layout.trails.sort_by_key(|t| t.0);
    }
    // Pass 2: every item encodes itself at its address, in exactly the size pass 1 gave it.
    let mut p2 = Pass2 {
        r: Resolver {
            layout: &layout,
            pcrels: &plan.pcrels,
            islands: &islands,
        },
        out_addr,
        out: Vec::with_capacity((addr - out_addr) as usize),
        data_parts: Vec::new(),
        out_of_range: Vec::new(),
    };
    let ends = new_addrs.iter().skip(1).chain(std::iter::once(&addr));
    for ((piece, &at), &end) in plan.pieces.iter().zip(&new_addrs).zip(ends) {
        let result = p2.piece(piece, at);
        p2.go_on_if_out_of_range(result, at, end)?;
        p2.check(at, end)?;
    }
    if !p2.out_of_range.is_empty() {
        let mut at = p2.out_of_range;
        at.sort_unstable();
        at.dedup();
        return Err(LayoutError::OutOfRange { at });
    }
    let (bytes, data_parts) = (p2.out, p2.data_parts);
    layout.bytes = bytes;
    layout.data_parts = data_parts;
    Ok(layout)
}

/// Pass 2 state: the bytes so far, the adds of address builders of data seen, and the
/// branches found out of range so far.
struct Pass2<'l> {
    r: Resolver<'l>,
    /// Address of the first output byte.
    out_addr: u64,
    out: Vec<u8>,
    data_parts: Vec<DataPart>,
    out_of_range: Vec<u64>,
}

impl Pass2<'_> {
    /// Passes `result` of encoding what starts at new address `at` and ends at `end` (bytes)
    /// through, except an out-of-range branch: that is recorded, and its bytes become zeros of
    /// the size pass 1 gave them, so that the rest of the plan is checked too (the layout then
    /// fails with every such branch: [`LayoutError::OutOfRange`]).
    fn go_on_if_out_of_range(
        &mut self,
        result: Result<(), LayoutError>,
        at: u64,
        end: u64,
    ) -> Result<(), LayoutError> {
        match result {
            Err(LayoutError::OutOfRange { at: far }) => {
                self.out_of_range.extend(far);
                let (from, to) = (
                    (at - self.out_addr) as usize,
                    (end - self.out_addr) as usize,
                );
                self.out.truncate(from);
                self.out.resize(to, 0);
                Ok(())
            }
            other => other,
        }
    }

    /// Errors when the bytes written since new address `at` do not end at `end` (bytes).
    fn check(&self, at: u64, end: u64) -> Result<(), LayoutError> {
        let now = self.out_addr + self.out.len() as u64;
        if now == end {
            return Ok(());
        }
        Err(LayoutError::Encode {
            at,
            why: format!(
                "encoded {} bytes where the layout has {}",
                now - at,
                end - at
            ),
        })
    }

    /// Appends the bytes of `piece` placed at new address `at` (bytes): padding and raw bytes
    /// as they are, everything else through its [`Item`] kind; each original instruction of a
    /// run is checked to fill exactly its size.
    fn piece(&mut self, piece: &Piece, at: u64) -> Result<(), LayoutError> {
        let (r, out) = (&self.r, &mut self.out);
        match piece {
            Piece::Align(a) => {
                let end = align_up(at, *a);
                for _ in (at..end).step_by(4) {
                    out.extend_from_slice(&PAD_WORD.to_le_bytes());
                }
            }
            Piece::Raw { bytes, .. } => out.extend_from_slice(bytes),
            Piece::Insert { code, .. } => {
                let mut a = at;
                for inst in *code {
                    Fixed(inst).encode(a, r, out)?;
                    a += inst.len() as u64;
                }
            }
            Piece::Island { .. } => island_of(piece)
                .ok_or(LayoutError::BadTarget { at, target: 0 })?
                .encode(at, r, out)?,
            Piece::Orig { insts, i, reloc } => {
                let (old, inst) = insts.at(*i);
                self.orig(old, &inst, *reloc, at)?
            }
            Piece::Run {
                insts,
                range,
                relocs,
            } => {
                let mut a = at;
                let mut rel = relocs.iter().peekable();
                for (i, (old, inst)) in range.clone().zip(insts.range(range.clone())) {
                    while rel.next_if(|(j, _)| (*j as usize) < i).is_some() {}
                    let reloc = rel
                        .next_if(|(j, _)| *j as usize == i)
                        .map_or(Reloc::None, |&(_, r)| r);
                    let end = a + inst.len() as u64;
                    let result = self.orig(old, &inst, reloc, a);
                    self.go_on_if_out_of_range(result, a, end)?;
                    self.check(a, end)?;
                    a = end;
                }
            }
        }
        Ok(())
    }

    /// Appends the original instruction `inst` from `old`, placed at new address `at` (bytes),
    /// with the field `reloc` names recomputed through its [`Item`] kind; an add of an address
    /// builder of data is recorded for [`Layout::retarget_data`].
    fn orig(
        &mut self,
        old: u64,
        inst: &Instruction,
        reloc: Reloc,
        at: u64,
    ) -> Result<(), LayoutError> {
        let (r, out) = (&self.r, &mut self.out);
        match reloc {
            Reloc::None | Reloc::PcRelEnd { .. } => Fixed(inst).encode(at, r, out),
            Reloc::Branch { target } => ShortBranch { old, inst, target }.encode(at, r, out),
            Reloc::ToIsland { island } => BranchToIsland { old, inst, island }.encode(at, r, out),
            Reloc::Call { target } => CallEntry { old, inst, target }.encode(at, r, out),
            Reloc::AddPc { target } => AddPc64 { old, inst, target }.encode(at, r, out),
            Reloc::PcRelLo { idiom }
            | Reloc::PcRelHi { idiom }
            | Reloc::PcRel64 { idiom }
            | Reloc::PcRelEval { idiom, .. } => {
                let part = match reloc {
                    Reloc::PcRelLo { .. } => Part::Lo,
                    Reloc::PcRelHi { .. } => Part::Hi,
                    Reloc::PcRelEval { expr, .. } => Part::Eval(expr),
                    _ => Part::Whole,
                };
                if r.pcrels
                    .get(idiom)
                    .is_some_and(|p| p.use_kind == PcRelUse::Data)
                {
                    self.data_parts.push(DataPart {
                        at,
                        old,
                        inst: *inst,
                        idiom,
                        part,
                    });
                }
                PcRelPart {
                    old,
                    inst,
                    idiom,
                    part,
                }
                .encode(at, r, out)
            }
        }
    }
}

/// The island item of a [`Piece::Island`] (`None` for other pieces).
fn island_of<'p>(piece: &'p Piece) -> Option<Island<'p>> {
    match piece {
        Piece::Island {
            from,
            target,
            markers,
            long,
            pair,
            isa,
            skip,
        } => Some(Island {
            from: *from,
            target: *target,
            markers,
            long: *long,
            pair: *pair,
            isa: *isa,
            skip: *skip,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
