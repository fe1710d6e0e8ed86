//! A new executable segment after everything the input loads (the "kept in place" layout of
//! the rewriter: the input image stays where it is and new code goes after it).
//!
//! The segment gets one `SHF_ALLOC | SHF_EXECINSTR` section and a `PT_LOAD` program header. lld
//! leaves no room after the program header table, so the new header takes the slot of
//! `PT_GNU_STACK`, which maps nothing in a GPU code object. ROCr's loader
//! (`ExecutableImpl::LoadSegmentsV2`, rocr-runtime `loader/executable.cpp`) allocates one
//! block from the first `PT_LOAD`'s address to the end of the LAST `PT_LOAD` in table order
//! and copies each segment into it, so the slot must come after every other `PT_LOAD` and the
//! new segment must lie above all of them.

use super::{align_up, CodeObjectEditor, NewSection};
use crate::codeobject::CodeObject;
use crate::elf::{self, SymbolTable};
use crate::error::{Error, Result};

/// Alignment of the new segment, in memory and in the file (bytes): lld's page size for
/// AMDGPU, the `p_align` of its `PT_LOAD`s.
pub const APPEND_ALIGN: u64 = 0x1000;

/// `PF_X | PF_R`.
const PF_RX: u32 = 5;

/// Where a new executable segment would start in `co` (bytes): the first page boundary above
/// every `PT_LOAD` and every alloc section. Errors ([`Error::InvalidEdit`], naming why): no
/// `PT_GNU_STACK` slot after the last `PT_LOAD` to turn into the new program header.
pub fn append_address(co: &CodeObject) -> Result<u64> {
    let segs = &co.elf.segments;
    let last_load = segs.iter().rposition(|p| p.p_type == elf::PT_LOAD);
    match (new_segment_slot(co), last_load) {
        (Some(s), Some(l)) if s > l => {}
        _ => {
            return Err(Error::InvalidEdit(
                "no PT_GNU_STACK program header after the last PT_LOAD to hold a new segment"
                    .into(),
            ))
        }
    }
    let loads = segs
        .iter()
        .filter(|p| p.p_type == elf::PT_LOAD)
        .map(|p| p.vaddr.saturating_add(p.memsz));
    let sections = co
        .elf
        .sections
        .iter()
        .filter(|s| s.is_alloc())
        .map(|s| s.addr.saturating_add(s.size));
    let end = loads.chain(sections).max().unwrap_or(0);
    align_up(end, APPEND_ALIGN)
        .ok_or_else(|| Error::InvalidEdit(format!("no address above {end:#x} for a new segment")))
}

/// Index of the program header that becomes the new segment's: the first `PT_GNU_STACK` (any
/// other stays as it is).
pub(super) fn new_segment_slot(co: &CodeObject) -> Option<usize> {
    co.elf
        .segments
        .iter()
        .position(|p| p.p_type == elf::PT_GNU_STACK)
}

impl CodeObjectEditor<'_> {
    /// Adds the executable section `name` at OUTPUT address `addr` (from [`append_address`])
    /// holding `data`, in a new `PT_LOAD` (read + execute) that takes `PT_GNU_STACK`'s program
    /// header. Returns its section index. Errors: [`Error::InvalidEdit`] when one was added
    /// already or there is no slot; at write time when earlier sections grew past `addr`.
    pub fn add_code_segment(&mut self, name: &str, addr: u64, data: Vec<u8>) -> Result<usize> {
        if self.new_sections.iter().any(|n| n.addr.is_some()) {
            return Err(Error::InvalidEdit(
                "a new code segment was added already".into(),
            ));
        }
        append_address(self.co)?;
        self.new_sections.push(NewSection {
            name: name.to_string(),
            sh_type: elf::SHT_PROGBITS,
            flags: elf::SHF_ALLOC | elf::SHF_EXECINSTR,
            align: 256,
            data,
            addr: Some(addr),
        });
        Ok(self.co.elf.sections.len() + self.new_sections.len() - 1)
    }

    /// Sets `st_shndx` of symbol `index` of `table` (a function moved to a new section).
    /// Errors: [`Error::NotFound`].
    pub fn set_symbol_section(
        &mut self,
        table: SymbolTable,
        index: usize,
        shndx: u16,
    ) -> Result<()> {
        self.set_symbol(table, index, None, None)?;
        self.symbol_shndx.insert((table, index), shndx);
        Ok(())
    }
}

/// The program header of the new segment: (offset, vaddr, size) in bytes.
pub(super) fn load_header(out: &mut [u8], at: usize, offset: u64, vaddr: u64, size: u64) {
    let mut h = Vec::with_capacity(56);
    h.extend_from_slice(&elf::PT_LOAD.to_le_bytes());
    h.extend_from_slice(&PF_RX.to_le_bytes());
    for v in [offset, vaddr, vaddr, size, size, APPEND_ALIGN] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    out[at..at + 56].copy_from_slice(&h);
}

impl CodeObjectEditor<'_> {
    /// Placement of the new code segment's section in `layout`, if one was added.
    pub(super) fn code_segment_placement<'l>(
        &self,
        layout: &'l super::Layout,
    ) -> Option<&'l super::Placement> {
        let j = self.new_sections.iter().position(|n| n.addr.is_some())?;
        layout.sections.get(self.co.elf.sections.len() + j)
    }

    /// Errors ([`Error::InvalidEdit`]) when an input alloc section ends above the new code
    /// segment's address in `layout` (a grown section moved into it).
    pub(super) fn check_code_segment(&self, layout: &super::Layout) -> Result<()> {
        let Some(seg) = self.code_segment_placement(layout) else {
            return Ok(());
        };
        let top = layout
            .sections
            .iter()
            .filter(|p| p.alloc)
            .map(|p| p.new_addr.saturating_add(p.new_size))
            .max()
            .unwrap_or(0);
        if top > seg.new_addr {
            return Err(Error::InvalidEdit(format!(
                "the loaded sections end at {top:#x}, above the new code segment at {:#x}",
                seg.new_addr
            )));
        }
        Ok(())
    }
}
