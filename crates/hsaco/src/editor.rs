//! Writing code objects back: [`CodeObjectEditor`] replaces section contents (any size), patches
//! bytes, sets symbol values/sizes, kernel entries and metadata, adds non-alloc sections, and lays
//! the ELF out again.
//!
//! Layout rules (gABI "Program Loading"): alloc sections keep their order; a section never moves
//! backwards. Inside one `PT_LOAD` the address-minus-offset relation stays constant; where a section
//! starts a `PT_LOAD`, its address moves by a multiple of `p_align` only when it must, and its file
//! offset is the first one `>= the previous end` congruent to the address modulo `p_align`.
//! Growth of `.text` therefore first consumes the address gap lld leaves after it (the file offset
//! of later segments moves by whole pages); only beyond the gap do later sections change address,
//! and then program headers, `.dynamic` pointers, `.rela.dyn` offsets and `R_AMDGPU_RELATIVE64`
//! addends, symbols and kernel descriptor entry offsets are all updated. Non-alloc sections follow
//! the last alloc byte in their original order, then the section header table. With no edits the
//! output equals the input byte for byte.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

mod append;
pub use append::{append_address, APPEND_ALIGN};

use crate::codeobject::CodeObject;
use crate::elf::{self, SymbolTable, SHT_NOBITS};
use crate::error::{Error, Result};
use crate::kd::KernelDescriptor;
use crate::metadata::{encode_notes, parse_notes, Metadata, NT_AMDGPU_METADATA};

/// `R_AMDGPU_RELATIVE64` (AMDGPUUsage "Relocation Records").
pub const R_AMDGPU_RELATIVE64: u32 = 13;

/// Placement of one section in the output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placement {
    /// Section index (new sections get indices after the input's last).
    pub index: usize,
    /// Section name.
    pub name: String,
    /// Address in the input (bytes; 0 for new sections).
    pub old_addr: u64,
    /// Address in the output (bytes).
    pub new_addr: u64,
    /// File offset in the input.
    pub old_offset: u64,
    /// File offset in the output.
    pub new_offset: u64,
    /// Size in the input (bytes).
    pub old_size: u64,
    /// Size in the output (bytes).
    pub new_size: u64,
    /// True for `SHF_ALLOC` sections of the input (false for every new section, also a new
    /// code segment's, which no input address maps to).
    pub alloc: bool,
}

/// The output layout computed from the current edits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Layout {
    /// One entry per section (index 0, the null section, included).
    pub sections: Vec<Placement>,
    /// Output `e_shoff` (bytes).
    pub shoff: u64,
    /// Output file size (bytes).
    pub file_size: u64,
}

impl Layout {
    /// Shift (new minus old address) of the alloc section of the input holding `addr`
    /// (`[start, end]`, end inclusive so end-of-section symbols map too; the earliest section wins),
    /// or of the last alloc section starting below `addr`.
    pub fn shift_of(&self, addr: u64) -> i64 {
        let mut best: Option<&Placement> = None;
        for p in self.sections.iter().filter(|p| p.index != 0 && p.alloc) {
            if p.old_addr <= addr && best.is_none_or(|b| p.old_addr > b.old_addr) {
                best = Some(p);
            }
        }
        best.map_or(0, |p| p.new_addr.wrapping_sub(p.old_addr) as i64)
    }

    /// Maps an input address through the section shifts (no `.text` internal map applied).
    pub fn map_address(&self, addr: u64) -> u64 {
        addr.wrapping_add(self.shift_of(addr) as u64)
    }
}

struct NewSection {
    name: String,
    sh_type: u32,
    flags: u64,
    align: u64,
    data: Vec<u8>,
    /// Output address of a new alloc section ([`CodeObjectEditor::add_code_segment`]); `None`
    /// for a non-alloc one.
    addr: Option<u64>,
}

/// Builder of an output code object from a parsed [`CodeObject`]. See the module documentation for
/// the layout rules. Addresses given to the editor (kernel entries, symbol values, text map) are
/// OUTPUT addresses; `.text` keeps its address unless an earlier alloc section outgrows its gap.
pub struct CodeObjectEditor<'a> {
    co: &'a CodeObject,
    contents: Vec<Option<Vec<u8>>>,
    new_sections: Vec<NewSection>,
    symbol_values: HashMap<(SymbolTable, usize), u64>,
    symbol_sizes: HashMap<(SymbolTable, usize), u64>,
    symbol_shndx: HashMap<(SymbolTable, usize), u16>,
    /// Every (table, index) of the input's symbols, built on the first [`Self::set_symbol`]
    /// (a search of the list per call was quadratic: hipBLASLt objects hold ~16,000 labels).
    symbol_keys: Option<HashSet<(SymbolTable, usize)>>,
    kernel_entries: HashMap<String, u64>,
    text_map: Option<TextMap<'a>>,
    metadata: Vec<Metadata>,
}

/// Exact map from INPUT addresses in executable sections to OUTPUT addresses
/// ([`CodeObjectEditor::set_text_address_map`]): `None` for an address it does not map.
pub type TextMap<'a> = Box<dyn Fn(u64) -> Option<u64> + 'a>;

/// The output contents of one section: borrowed from the input or the edits, or built for the
/// output (a rewritten note, the grown section name table).
type Contents<'e> = Cow<'e, [u8]>;

/// Alignment padding the writer may add beyond the input and edited contents (bytes): far above
/// what page-aligned (4 KiB) segments of real code objects need.
pub const MAX_LAYOUT_SLACK: u64 = 16 << 20;

fn align_up(x: u64, a: u64) -> Option<u64> {
    if a <= 1 {
        Some(x)
    } else {
        x.div_ceil(a).checked_mul(a)
    }
}

/// Smallest `x >= min` with `x % p == target % p`.
fn congruent_at_least(min: u64, target: u64, p: u64) -> Option<u64> {
    if p <= 1 {
        return Some(min);
    }
    let want = target % p;
    let base = (min - min % p).checked_add(want)?;
    if base >= min {
        Some(base)
    } else {
        base.checked_add(p)
    }
}

impl<'a> CodeObjectEditor<'a> {
    /// Starts an edit of `co` (no changes yet: [`CodeObjectEditor::write`] returns the input bytes).
    pub fn new(co: &'a CodeObject) -> Self {
        CodeObjectEditor {
            co,
            contents: vec![None; co.elf.sections.len()],
            new_sections: Vec::new(),
            symbol_values: HashMap::new(),
            symbol_sizes: HashMap::new(),
            symbol_shndx: HashMap::new(),
            symbol_keys: None,
            kernel_entries: HashMap::new(),
            text_map: None,
            metadata: Vec::new(),
        }
    }

    /// Index of the first section named `name`. Errors: [`Error::NotFound`].
    pub fn section_index(&self, name: &str) -> Result<usize> {
        self.co
            .section(name)
            .map(|s| s.index)
            .ok_or_else(|| Error::NotFound(format!("section {name}")))
    }

    /// Current contents of section `index` (edited or original).
    pub fn section_contents(&self, index: usize) -> Result<&[u8]> {
        match self.contents.get(index) {
            Some(Some(v)) => Ok(v),
            Some(None) => Ok(self.co.section_data(&self.co.elf.sections[index])),
            None => Err(Error::NotFound(format!("section index {index}"))),
        }
    }

    /// Replaces the contents of section `index` with `data` of any size (alloc sections keep their
    /// start address unless an earlier section grows past its gap). Errors: [`Error::NotFound`],
    /// [`Error::InvalidEdit`] for `SHT_NOBITS` or the null section.
    pub fn set_section_data(&mut self, index: usize, data: Vec<u8>) -> Result<()> {
        let s = self
            .co
            .elf
            .sections
            .get(index)
            .ok_or_else(|| Error::NotFound(format!("section index {index}")))?;
        if index == 0 || s.sh_type == SHT_NOBITS {
            return Err(Error::InvalidEdit(format!(
                "section [{index}] {} has no file contents",
                s.name
            )));
        }
        self.contents[index] = Some(data);
        Ok(())
    }

    /// Replaces `.text`. Errors: as [`CodeObjectEditor::set_section_data`]; [`Error::NotFound`].
    pub fn set_text(&mut self, data: Vec<u8>) -> Result<()> {
        let i = self.section_index(".text")?;
        self.set_section_data(i, data)
    }

    /// Overwrites `bytes` at `offset` (bytes from the section start) of section `index`.
    /// Errors: [`Error::InvalidEdit`] when the range is outside the current contents.
    pub fn patch_section(&mut self, index: usize, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut cur = self.section_contents(index)?.to_vec();
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|&e| e <= cur.len() as u64);
        let Some(end) = end else {
            return Err(Error::InvalidEdit(format!(
                "patch of {} bytes at {offset:#x} is outside section [{index}] ({} bytes)",
                bytes.len(),
                cur.len()
            )));
        };
        cur[offset as usize..end as usize].copy_from_slice(bytes);
        self.contents[index] = Some(cur);
        Ok(())
    }

    /// Rewrites the descriptor of kernel `name` (64 bytes). Its `kernel_code_entry_byte_offset` is
    /// recomputed at write time from the kernel's output entry (see
    /// [`CodeObjectEditor::set_kernel_entry`]). Errors: [`Error::NotFound`].
    pub fn set_kernel_descriptor(&mut self, name: &str, kd: &KernelDescriptor) -> Result<()> {
        let k = self.kernel(name)?;
        let sec = self
            .co
            .elf
            .section_containing_addr(k.kd_address)
            .ok_or_else(|| Error::NotFound(format!("section of {name}.kd")))?;
        let (idx, off) = (sec.index, k.kd_address - sec.addr);
        self.patch_section(idx, off, &kd.encode())
    }

    fn kernel(&self, name: &str) -> Result<&'a crate::codeobject::Kernel> {
        self.co
            .kernels
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| Error::NotFound(format!("kernel {name}")))
    }

    /// Sets the OUTPUT entry address of kernel `name` (bytes). Without this the entry is mapped
    /// through the text map, else moves with its section. Errors: [`Error::NotFound`].
    pub fn set_kernel_entry(&mut self, name: &str, entry: u64) -> Result<()> {
        self.kernel(name)?;
        self.kernel_entries.insert(name.to_string(), entry);
        Ok(())
    }

    /// Exact map from INPUT addresses in executable sections to OUTPUT addresses (e.g. every
    /// function start). Used for symbols, kernel entries and `R_AMDGPU_RELATIVE64` addends that are
    /// not set explicitly. A function rather than a table, so that a rewriter can answer from
    /// its own layout instead of building one entry per instruction.
    pub fn set_text_address_map(&mut self, map: TextMap<'a>) {
        self.text_map = Some(map);
    }

    /// The text map's answer for `addr` (`None` without a map or for an address it does not map).
    fn text_map_get(&self, addr: u64) -> Option<u64> {
        self.text_map.as_ref().and_then(|m| m(addr))
    }

    /// Sets `st_value` (OUTPUT address) and/or `st_size` (bytes) of symbol `index` of `table`.
    /// Errors: [`Error::NotFound`].
    pub fn set_symbol(
        &mut self,
        table: SymbolTable,
        index: usize,
        value: Option<u64>,
        size: Option<u64>,
    ) -> Result<()> {
        let co = self.co;
        let keys = self.symbol_keys.get_or_insert_with(|| {
            co.symbols
                .iter()
                .map(|s| (s.symbol.table, s.symbol.index))
                .collect()
        });
        if !keys.contains(&(table, index)) {
            return Err(Error::NotFound(format!("symbol {index} of {table:?}")));
        }
        if let Some(v) = value {
            self.symbol_values.insert((table, index), v);
        }
        if let Some(s) = size {
            self.symbol_sizes.insert((table, index), s);
        }
        Ok(())
    }

    /// Sets value and/or size of every symbol named `name` in `.symtab` and `.dynsym`; returns how
    /// many symbols matched. Errors: [`Error::NotFound`] when none did.
    pub fn set_symbol_by_name(
        &mut self,
        name: &str,
        value: Option<u64>,
        size: Option<u64>,
    ) -> Result<usize> {
        let keys: Vec<(SymbolTable, usize)> = self
            .co
            .symbols
            .iter()
            .filter(|s| s.symbol.name == name)
            .map(|s| (s.symbol.table, s.symbol.index))
            .collect();
        if keys.is_empty() {
            return Err(Error::NotFound(format!("symbol {name}")));
        }
        for (t, i) in &keys {
            self.set_symbol(*t, *i, value, size)?;
        }
        Ok(keys.len())
    }

    /// Replaces the metadata map of the note whose descriptor is at `metadata.offset` in the
    /// input (the note is re-encoded; it may change size). Errors at write time:
    /// [`Error::NotFound`] when no metadata note starts there.
    pub fn set_metadata(&mut self, metadata: Metadata) {
        self.metadata.retain(|m| m.offset != metadata.offset);
        self.metadata.push(metadata);
    }

    /// Adds a non-alloc section (appended after the existing section headers), or replaces the
    /// contents of the first section with that name. Errors: [`Error::InvalidEdit`] when an
    /// existing section of that name is `SHT_NOBITS`, or `flags` contains `SHF_ALLOC`.
    pub fn add_or_replace_section(
        &mut self,
        name: &str,
        sh_type: u32,
        flags: u64,
        align: u64,
        data: Vec<u8>,
    ) -> Result<()> {
        if flags & elf::SHF_ALLOC != 0 {
            return Err(Error::InvalidEdit(format!(
                "new section {name} must not be SHF_ALLOC"
            )));
        }
        if let Some(s) = self.co.section(name) {
            return self.set_section_data(s.index, data);
        }
        if let Some(n) = self.new_sections.iter_mut().find(|n| n.name == name) {
            n.data = data;
            return Ok(());
        }
        self.new_sections.push(NewSection {
            name: name.to_string(),
            sh_type,
            flags,
            align,
            data,
            addr: None,
        });
        Ok(())
    }

    /// Final contents of every input section plus new sections (metadata note and `.shstrtab`
    /// rebuilt as needed), borrowed where unchanged by this step (no copy of the sections).
    /// Returns (contents, names of new sections' sh_name).
    fn final_contents(&self) -> Result<(Vec<Contents<'_>>, Vec<u32>)> {
        let co = self.co;
        let mut out: Vec<Contents<'_>> = Vec::with_capacity(co.elf.sections.len());
        for i in 0..co.elf.sections.len() {
            out.push(Cow::Borrowed(self.section_contents(i)?));
        }
        // Each edited map replaces the note whose descriptor offset (in the input) it carries.
        let mut placed = 0;
        for s in co
            .elf
            .sections
            .iter()
            .filter(|s| s.sh_type == elf::SHT_NOTE)
        {
            if self.metadata.is_empty() {
                break;
            }
            let Ok(mut notes) = parse_notes(self.section_contents(s.index)?, s.offset) else {
                continue;
            };
            let mut changed = false;
            for n in notes
                .iter_mut()
                .filter(|n| n.name == b"AMDGPU" && n.n_type == NT_AMDGPU_METADATA)
            {
                if let Some(md) = self.metadata.iter().find(|m| m.offset == n.desc_offset) {
                    n.desc = md.encode()?;
                    changed = true;
                    placed += 1;
                }
            }
            if changed {
                out[s.index] = Cow::Owned(encode_notes(&notes));
            }
        }
        if placed != self.metadata.len() {
            return Err(Error::NotFound(format!(
                "{} of {} edited AMDGPU metadata notes in the input",
                placed,
                self.metadata.len()
            )));
        }
        let mut names = Vec::new();
        if !self.new_sections.is_empty() {
            let shstrndx = usize::from(co.elf.header.e_shstrndx);
            if shstrndx == 0 || shstrndx >= out.len() {
                return Err(Error::InvalidEdit(
                    "no section name table to add section names to".into(),
                ));
            }
            for n in &self.new_sections {
                names.push(out[shstrndx].len() as u32);
                let names_table = out[shstrndx].to_mut();
                names_table.extend_from_slice(n.name.as_bytes());
                names_table.push(0);
            }
            for n in &self.new_sections {
                out.push(Cow::Borrowed(&n.data));
            }
        }
        Ok((out, names))
    }

    /// Computes the output layout for the current edits (see module documentation).
    pub fn layout(&self) -> Result<Layout> {
        let (contents, _) = self.final_contents()?;
        self.layout_for(&contents)
    }

    /// Places every section; [`Error::Malformed`] when the input's addresses, offsets and
    /// alignments make a position overflow 64 bits (only possible for inconsistent input).
    fn layout_for(&self, contents: &[Contents<'_>]) -> Result<Layout> {
        self.try_layout(contents).ok_or_else(|| Error::Malformed {
            what: "section header table",
            offset: self.co.elf.header.e_shoff,
            detail: "section addresses, offsets and alignments overflow 64-bit positions".into(),
        })
    }

    fn try_layout(&self, contents: &[Contents<'_>]) -> Option<Layout> {
        let co = self.co;
        let secs = &co.elf.sections;
        let h = &co.elf.header;
        let size_of = |i: usize| -> u64 {
            if secs[i].sh_type == SHT_NOBITS {
                secs[i].size
            } else {
                contents[i].len() as u64
            }
        };
        let mut place: Vec<Placement> = (0..contents.len())
            .map(|i| {
                let (name, a, o, s, alloc) = match secs.get(i) {
                    Some(s) => (s.name.clone(), s.addr, s.offset, s.size, s.is_alloc()),
                    None => (
                        self.new_sections[i - secs.len()].name.clone(),
                        0,
                        0,
                        0,
                        false,
                    ),
                };
                Placement {
                    index: i,
                    name,
                    old_addr: a,
                    new_addr: a,
                    old_offset: o,
                    new_offset: o,
                    old_size: s,
                    new_size: if i < secs.len() {
                        size_of(i)
                    } else {
                        contents[i].len() as u64
                    },
                    alloc,
                }
            })
            .collect();
        let loads: Vec<&elf::Segment> = co
            .elf
            .segments
            .iter()
            .filter(|p| p.p_type == elf::PT_LOAD)
            .collect();
        let load_of = |s: &elf::Section| {
            loads.iter().position(|p| {
                s.addr >= p.vaddr
                    && s.addr - p.vaddr < p.memsz.max(1)
                    && s.addr + s.size <= p.vaddr + p.memsz
            })
        };
        let mut alloc: Vec<&elf::Section> = secs
            .iter()
            .filter(|s| s.index != 0 && s.is_alloc())
            .collect();
        alloc.sort_by_key(|s| (s.addr, s.index));
        let ph_end = h.e_phoff + 56 * u64::from(h.e_phnum);
        let mut need_addr = 0u64;
        let mut need_off = ph_end.max(64);
        let mut d_addr = 0u64;
        // Page-level shifts applied at segment starts (multiples of p_align).
        let (mut page_addr, mut page_off) = (0u64, 0u64);
        let mut cur_load: Option<usize> = None;
        let mut k_seg: u64 = 0;
        for s in alloc {
            let nobits = s.sh_type == SHT_NOBITS;
            let a = s.addralign.max(1);
            let size = size_of(s.index);
            let load = load_of(s);
            let starts = load.is_none() || load != cur_load;
            let (new_addr, new_off);
            if starts {
                let p = load.map_or(a, |l| loads[l].align.max(1)).max(1);
                let mut na = s.addr.checked_add(page_addr)?;
                if na < need_addr {
                    na = na.checked_add(align_up(need_addr - na, p)?)?;
                }
                na = align_up(na, a)?;
                new_addr = na;
                new_off = congruent_at_least(need_off.max(s.offset.checked_add(page_off)?), na, p)?;
                page_addr = new_addr - s.addr;
                page_off = new_off.saturating_sub(s.offset);
                k_seg = new_addr.wrapping_sub(new_off);
                cur_load = load;
            } else {
                let cand = s.addr.checked_add(d_addr)?;
                let mut req = need_addr;
                if !nobits {
                    req = req.max(need_off.wrapping_add(k_seg));
                }
                new_addr = align_up(cand.max(req), a)?;
                new_off = new_addr.wrapping_sub(k_seg);
            }
            d_addr = new_addr - s.addr;
            need_addr = new_addr.checked_add(size)?;
            if !nobits {
                need_off = need_off.max(new_off.checked_add(size)?);
            }
            place[s.index].new_addr = new_addr;
            place[s.index].new_offset = new_off;
        }
        // A new code segment after everything the input loads (editor::append).
        for (j, n) in self.new_sections.iter().enumerate() {
            if let Some(addr) = n.addr {
                let i = secs.len() + j;
                let no = congruent_at_least(need_off, addr, APPEND_ALIGN)?;
                place[i].new_addr = addr;
                place[i].new_offset = no;
                need_off = no.checked_add(contents[i].len() as u64)?;
            }
        }
        // Non-alloc sections in original file order, then new sections.
        let mut rest: Vec<&elf::Section> = secs
            .iter()
            .filter(|s| s.index != 0 && !s.is_alloc())
            .collect();
        rest.sort_by_key(|s| (s.offset, s.index));
        let mut d_na = 0u64;
        for s in rest {
            let a = s.addralign.max(1);
            let no = align_up(s.offset.checked_add(d_na)?.max(need_off), a)?;
            d_na = no - s.offset;
            place[s.index].new_offset = no;
            if s.sh_type != SHT_NOBITS {
                need_off = no.checked_add(size_of(s.index))?;
            }
        }
        for (j, n) in self.new_sections.iter().enumerate() {
            if n.addr.is_some() {
                continue;
            }
            let i = secs.len() + j;
            let no = align_up(need_off, n.align.max(1))?;
            place[i].new_offset = no;
            need_off = no.checked_add(contents[i].len() as u64)?;
        }
        let shoff = align_up(h.e_shoff.checked_add(d_na)?.max(need_off), 8)?;
        let file_size = shoff
            .checked_add(64 * contents.len() as u64)?
            .max(self.head_len());
        Some(Layout {
            sections: place,
            shoff,
            file_size,
        })
    }

    /// Bytes before the first file-backed section (ELF header, program headers, padding; the
    /// whole input when no section has file contents): copied verbatim to the same offsets.
    /// Sections never move backwards, so nothing else is placed there.
    fn head_len(&self) -> u64 {
        let secs = &self.co.elf.sections;
        let len = self.co.bytes.len() as u64;
        secs.iter()
            .filter(|s| s.index != 0 && s.file_size() > 0)
            .map(|s| s.offset)
            .min()
            .unwrap_or(len)
            .min(len)
    }

    /// Maps an input address to its output address: explicit text map first (exact match), else
    /// the section shift.
    fn map_addr(&self, layout: &Layout, addr: u64) -> u64 {
        if let Some(n) = self.text_map_get(addr) {
            return n;
        }
        layout.map_address(addr)
    }

    /// Writes the output ELF. Errors: [`Error::Metadata`] (encoding), [`Error::InvalidEdit`].
    pub fn write(&self) -> Result<Vec<u8>> {
        let co = self.co;
        let (contents, new_names) = self.final_contents()?;
        let layout = self.layout_for(&contents)?;
        let secs = &co.elf.sections;
        let h = &co.elf.header;
        // Output can only exceed input + new contents by alignment padding (at most MAX_LAYOUT_SLACK
        // bytes); a larger layout comes from inconsistent input addresses, not from the edits.
        let budget = (co.bytes.len() as u64)
            .saturating_add(contents.iter().map(|c| c.len() as u64).sum::<u64>())
            .saturating_add(MAX_LAYOUT_SLACK);
        if layout.file_size > budget {
            let worst = layout
                .sections
                .iter()
                .max_by_key(|p| p.new_offset)
                .map_or(0, |p| p.index as u64);
            return Err(Error::Malformed {
                what: "section header",
                offset: h.e_shoff + 64 * worst,
                detail: format!(
                    "section addresses and alignments would place the output at {} bytes (input {} bytes): inconsistent layout",
                    layout.file_size,
                    co.bytes.len()
                ),
            });
        }
        self.check_code_segment(&layout)?;
        let mut out = vec![0u8; layout.file_size as usize];
        // ELF header, program headers and whatever precedes the first section (the layout
        // makes the output at least this long).
        let head = self.head_len() as usize;
        out[..head].copy_from_slice(&co.bytes[..head]);
        for p in &layout.sections {
            if p.index == 0 || (p.index < secs.len() && secs[p.index].sh_type == SHT_NOBITS) {
                continue;
            }
            let o = p.new_offset as usize;
            out[o..o + contents[p.index].len()].copy_from_slice(&contents[p.index]);
        }
        let w64 = |out: &mut Vec<u8>, o: u64, v: u64| {
            out[o as usize..o as usize + 8].copy_from_slice(&v.to_le_bytes())
        };
        let w32 = |out: &mut Vec<u8>, o: u64, v: u32| {
            out[o as usize..o as usize + 4].copy_from_slice(&v.to_le_bytes())
        };
        // File header.
        w64(
            &mut out,
            0x18,
            if h.e_entry == 0 {
                0
            } else {
                self.map_addr(&layout, h.e_entry)
            },
        );
        w64(&mut out, 0x28, layout.shoff);
        out[0x3c..0x3e].copy_from_slice(&(contents.len() as u16).to_le_bytes());
        // Program headers.
        let mut fixed: Vec<(u64, &elf::Segment)> = Vec::new();
        for (i, p) in co.elf.segments.iter().enumerate() {
            let o = h.phdr_offset(i);
            // `PT_GNU_STACK` maps nothing: copied as it is, whatever its (meaningless) address
            // and sizes say (a corrupted `p_memsz` covering `.text` must not grow with it;
            // fresh tester, session 13).
            if p.p_type == elf::PT_GNU_STACK {
                if let Some(pl) = self
                    .code_segment_placement(&layout)
                    .filter(|_| append::new_segment_slot(co) == Some(i))
                {
                    append::load_header(
                        &mut out,
                        o as usize,
                        pl.new_offset,
                        pl.new_addr,
                        pl.new_size,
                    );
                }
                continue;
            }
            let inside: Vec<&Placement> = layout
                .sections
                .iter()
                .filter(|pl| {
                    pl.index != 0
                        && pl.index < secs.len()
                        && secs[pl.index].is_alloc()
                        && pl.old_addr >= p.vaddr
                        && pl.old_addr + pl.old_size <= p.vaddr + p.memsz
                        && (pl.old_size > 0 || pl.old_addr < p.vaddr + p.memsz)
                })
                .collect();
            let Some(first) = inside.iter().min_by_key(|pl| pl.old_addr) else {
                // No section to move with: the segment stays where it is, checked below.
                if p.filesz > 0 {
                    fixed.push((o, p));
                }
                continue;
            };
            // The segment moves with its first section, address AND file offset: the layout keeps
            // `addr - offset` constant inside a segment (and changes it by multiples of `p_align`
            // at segment starts), so `p_vaddr - p_offset` must follow the first section's
            // `new_addr - new_offset`. (Keeping `p_offset` whenever the address did not move
            // contradicted sections whose file offset moved by whole pages without an address
            // change: fuzz regression `code_object-segment-head-offset.bin`.)
            let da = first.new_addr.wrapping_sub(first.old_addr);
            let dof = first.new_offset.wrapping_sub(first.old_offset);
            let (vaddr, off) = (p.vaddr.wrapping_add(da), p.offset.wrapping_add(dof));
            let old_mem_end = inside
                .iter()
                .map(|pl| pl.old_addr + pl.old_size)
                .max()
                .unwrap_or(p.vaddr);
            let new_mem_end = inside
                .iter()
                .map(|pl| pl.new_addr + pl.new_size)
                .max()
                .unwrap_or(vaddr);
            // Saturating: a segment whose addresses disagree with its sections (mutated input) must not
            // underflow; consistent inputs never reach the saturation.
            let memsz =
                new_mem_end.saturating_sub(vaddr) + (p.vaddr + p.memsz).saturating_sub(old_mem_end);
            // The file image covers the sections inside the segment's address range whose input
            // bytes also lie in its input file range: a section the segment maps by address but
            // whose contents sit elsewhere in the file (only in inconsistent input, e.g. a
            // PT_DYNAMIC with a huge p_memsz) must not stretch p_filesz (fuzz regression
            // `code_object-filesz-foreign-section.bin`).
            let files: Vec<&&Placement> = inside
                .iter()
                .filter(|pl| {
                    secs[pl.index].sh_type != SHT_NOBITS
                        && pl.old_offset >= p.offset
                        && pl.old_offset.saturating_add(pl.old_size)
                            <= p.offset.saturating_add(p.filesz)
                })
                .collect();
            let filesz = if files.is_empty() || p.filesz == 0 {
                p.filesz
            } else {
                let old_end = files
                    .iter()
                    .map(|pl| pl.old_offset + pl.old_size)
                    .max()
                    .unwrap_or(p.offset);
                let new_end = files
                    .iter()
                    .map(|pl| pl.new_offset + pl.new_size)
                    .max()
                    .unwrap_or(off);
                new_end.saturating_sub(off) + (p.offset + p.filesz).saturating_sub(old_end)
            };
            w64(&mut out, o + 8, off);
            w64(&mut out, o + 16, vaddr);
            w64(
                &mut out,
                o + 24,
                p.paddr.wrapping_add(vaddr.wrapping_sub(p.vaddr)),
            );
            w64(&mut out, o + 32, filesz);
            w64(&mut out, o + 40, memsz);
        }
        // Section headers.
        for pl in &layout.sections {
            let o = layout.shoff + 64 * pl.index as u64;
            if pl.index < secs.len() {
                let s = &secs[pl.index];
                let src = h.e_shoff + 64 * pl.index as u64;
                out[o as usize..o as usize + 64]
                    .copy_from_slice(&co.bytes[src as usize..src as usize + 64]);
                if pl.index != 0 {
                    w64(
                        &mut out,
                        o + 16,
                        if s.is_alloc() { pl.new_addr } else { s.addr },
                    );
                    w64(&mut out, o + 24, pl.new_offset);
                    w64(&mut out, o + 32, pl.new_size);
                }
            } else {
                let n = &self.new_sections[pl.index - secs.len()];
                w32(&mut out, o, new_names[pl.index - secs.len()]);
                w32(&mut out, o + 4, n.sh_type);
                w64(&mut out, o + 8, n.flags);
                w64(&mut out, o + 16, n.addr.unwrap_or(0));
                w64(&mut out, o + 24, pl.new_offset);
                w64(&mut out, o + 32, pl.new_size);
                w64(&mut out, o + 48, n.align);
            }
        }
        let out_off = |in_off: u64| -> Option<u64> {
            let s = secs.iter().find(|s| {
                s.index != 0
                    && s.file_size() > 0
                    && in_off >= s.offset
                    && in_off < s.offset + s.size
            })?;
            let pl = &layout.sections[s.index];
            Some(pl.new_offset + (in_off - s.offset))
        };
        // Symbols.
        for cs in &co.symbols {
            let s = &cs.symbol;
            let Some(o) = out_off(s.entry_offset) else {
                continue;
            };
            let key = (s.table, s.index);
            let value = if let Some(&v) = self.symbol_values.get(&key) {
                v
            } else if s.shndx == elf::SHN_UNDEF || s.shndx >= 0xff00 {
                s.value
            } else if let Some(n) = self
                .text_map_get(s.value)
                .filter(|_| secs.get(usize::from(s.shndx)).is_some_and(|x| x.is_exec()))
            {
                n
            } else if let Some(pl) = layout.sections.get(usize::from(s.shndx)) {
                s.value.wrapping_add(pl.new_addr.wrapping_sub(pl.old_addr))
            } else {
                s.value
            };
            w64(&mut out, o + 8, value);
            if let Some(&sz) = self.symbol_sizes.get(&key) {
                w64(&mut out, o + 16, sz);
            }
            if let Some(&ndx) = self.symbol_shndx.get(&key) {
                out[o as usize + 6..o as usize + 8].copy_from_slice(&ndx.to_le_bytes());
            }
        }
        // Dynamic section pointers.
        for s in secs.iter().filter(|s| s.sh_type == elf::SHT_DYNAMIC) {
            let pl = &layout.sections[s.index];
            for i in 0..pl.new_size / 16 {
                let o = pl.new_offset + 16 * i;
                let tag = u64::from_le_bytes(
                    out[o as usize..o as usize + 8].try_into().unwrap_or([0; 8]),
                );
                if elf::DYNAMIC_POINTER_TAGS.iter().any(|&(t, _)| t == tag) {
                    let v = u64::from_le_bytes(
                        out[o as usize + 8..o as usize + 16]
                            .try_into()
                            .unwrap_or([0; 8]),
                    );
                    w64(&mut out, o + 8, layout.map_address(v));
                }
            }
        }
        // Dynamic relocations.
        for r in co.elf.relas(&co.bytes)? {
            let Some(o) = out_off(r.entry_offset) else {
                continue;
            };
            let new_r_offset = layout.map_address(r.r_offset);
            w64(&mut out, o, new_r_offset);
            if r.r_type == R_AMDGPU_RELATIVE64 {
                let new_addend = self.map_addr(&layout, r.addend as u64);
                w64(&mut out, o + 16, new_addend);
                // Location bytes that hold the addend (applied dynamic relocation) follow it.
                if let (Some(src), Some(dst)) = (
                    co.elf.addr_to_offset(r.r_offset),
                    out_off_addr(&layout, secs, new_r_offset),
                ) {
                    if co.bytes.get(src as usize..src as usize + 8)
                        == Some(&r.addend.to_le_bytes()[..])
                    {
                        w64(&mut out, dst, new_addend);
                    }
                }
            }
        }
        // Kernel descriptor entry offsets.
        for k in &co.kernels {
            let new_kd = layout.map_address(k.kd_address);
            let entry = match self.kernel_entries.get(&k.name) {
                Some(&e) => e,
                None => self.map_addr(&layout, k.entry),
            };
            if let Some(o) = out_off_addr(&layout, secs, new_kd) {
                w64(&mut out, o + 0x10, entry.wrapping_sub(new_kd));
            }
        }
        // A segment holding no section kept its program header, so it must still map the same
        // bytes: the head (headers, rewritten in place: PT_PHDR, a headers-only PT_LOAD) or
        // bytes equal to the input's. Otherwise it points at bytes the writer did not keep,
        // possibly past the end of the output (fuzz regression
        // `code_object-segment-without-sections.bin`).
        for (o, p) in fixed {
            let range = p
                .offset
                .checked_add(p.filesz)
                .map(|end| p.offset as usize..end as usize);
            let kept =
                range.is_some_and(|r| r.end <= head || out.get(r.clone()) == co.bytes.get(r));
            if !kept {
                return Err(Error::Malformed {
                    what: "program header",
                    offset: o,
                    detail: format!(
                        "segment at file offset {:#x} with size {:#x} holds no section and the writer does not keep the bytes it maps",
                        p.offset, p.filesz
                    ),
                });
            }
        }
        Ok(out)
    }
}

/// Output file offset of an output address inside a file-backed alloc section.
fn out_off_addr(layout: &Layout, secs: &[elf::Section], addr: u64) -> Option<u64> {
    layout
        .sections
        .iter()
        .filter(|p| {
            p.index != 0
                && p.index < secs.len()
                && secs[p.index].is_alloc()
                && secs[p.index].sh_type != SHT_NOBITS
        })
        .find(|p| addr >= p.new_addr && addr < p.new_addr + p.new_size)
        .map(|p| p.new_offset + (addr - p.new_addr))
}
