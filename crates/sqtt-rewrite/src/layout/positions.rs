//! The output of the layout (part of [`crate::layout`]): the new `.text` bytes and where every
//! original instruction, its block of inserted code and its landing went, with the address
//! maps later stages read.

use super::item::{Item, Part, PcRelPart, Resolver};
use super::{LayoutError, PcRel};
use amdgpu_isa::Instruction;

/// Where one original instruction went: its original and new addresses as byte offsets from the
/// start of `.text` (8 bytes per instruction; `.text` is below 4 GiB, [`lay_out`](super::lay_out)
/// checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Placed {
    /// Original address - `.text` start (bytes).
    pub(super) old: u32,
    /// New address of the instruction itself - `.text` start (bytes).
    pub(super) new: u32,
}

/// An original instruction with inserted code in front of it: where its block starts and where
/// branches to it land, when either differs from the instruction's own new address (offsets
/// from the start of `.text`, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Block {
    /// Original address - `.text` start (bytes).
    pub(super) old: u32,
    /// New address of the first instruction inserted in front of it - `.text` start.
    pub(super) start: u32,
    /// New address where branches to it land - `.text` start.
    pub(super) landing: u32,
}

/// One add of an address builder of data ([`PcRelUse::Data`](super::PcRelUse::Data)), kept so that
/// its offset can be recomputed when the data moves ([`Layout::retarget_data`]).
#[derive(Debug, Clone)]
pub(super) struct DataPart {
    /// New address of the add (bytes).
    pub(super) at: u64,
    /// Original address (bytes).
    pub(super) old: u64,
    /// Decoded original.
    pub(super) inst: Instruction,
    /// Index into [`TextPlan::pcrels`](super::TextPlan::pcrels).
    pub(super) idiom: usize,
    /// Which part of the offset it carries.
    pub(super) part: Part,
}

/// The laid-out `.text`: its bytes and where every original instruction went (about 9 bytes per
/// original instruction, plus 12 per instruction with inserted code in front of it).
#[derive(Debug, Clone)]
pub struct Layout {
    /// New section contents.
    pub bytes: Vec<u8>,
    /// Start address of `.text` (bytes; the same before and after); offsets in the tables below
    /// count from it.
    pub(super) text_addr: u64,
    /// Address of `bytes[0]` ([`TextPlan::out_addr`](super::TextPlan::out_addr)).
    pub(super) out_addr: u64,
    /// Every original instruction, sorted by original address.
    pub(super) placed: Vec<Placed>,
    /// Length in bytes of each instruction of `placed` (parallel).
    pub(super) lens: Vec<u8>,
    /// Instructions of `placed` with inserted code in front of them, sorted by original address.
    pub(super) blocks: Vec<Block>,
    /// Original instructions followed by islands ([`Piece::Island`](super::Piece::Island): a
    /// relaxed branch's long form, a landing block): (original address, new end of the last island)
    /// as offsets from the start of `.text`, sorted by original address. The islands belong to the
    /// instruction's function, so an end that falls right after it maps past them
    /// ([`Layout::map_end`]).
    pub(super) trails: Vec<(u32, u32)>,
    /// Ranges of the input kept in place ([`TextPlan::kept`](super::TextPlan::kept)): (start,
    /// length), ascending.
    pub(super) kept: Vec<(u64, u64)>,
    /// Raw regions: (old start, len, new start).
    pub raws: Vec<(u64, u64, u64)>,
    /// Original end of `.text` mapped to the new end.
    pub new_end: u64,
    /// The adds of address builders of data, in output order.
    pub(super) data_parts: Vec<DataPart>,
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
    /// nothing but these offsets. Errors as [`lay_out`](super::lay_out)'s.
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

/// A new address as a byte offset from the start of `.text` for the layout's tables; errors
/// (naming the original address `old`) beyond 4 GiB.
pub(super) fn text_offset(text_addr: u64, addr: u64, old: u64) -> Result<u32, LayoutError> {
    addr.checked_sub(text_addr)
        .and_then(|o| u32::try_from(o).ok())
        .ok_or_else(|| LayoutError::Encode {
            at: old,
            why: format!("address {addr:#x} is not within 4 GiB after the start of .text"),
        })
}
