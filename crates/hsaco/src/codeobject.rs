//! An HSA code object (AMDGPUUsage "Code Object"): ELF64, `EM_AMDGPU`, OS ABI 64, ABI version
//! 2/3/4 (code object v4/v5/v6), kernels found through `name.kd` descriptor symbols.

use crate::elf::{self, Elf, Section, Symbol, SymbolTable};
use crate::error::{Error, Result};
use crate::kd::{KernelDescriptor, KD_SIZE};
use crate::metadata::{parse_notes, Metadata, NT_AMDGPU_METADATA};
use crate::target::{CodeObjectVersion, Target};
use std::collections::{HashMap, HashSet};

/// Classification of a symbol of a code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SymbolKind {
    /// `STT_FUNC` at a kernel entry (the kernel's own symbol).
    KernelEntry,
    /// `STT_OBJECT` `name.kd`: a kernel descriptor.
    KernelDescriptor,
    /// `STT_FUNC` that is not a kernel (device function, local or global).
    Function,
    /// `STT_FUNC` named `__clang_ocl_kern_imp_*`: OpenCL kernel body clone (a function).
    OclKernelClone,
    /// `STT_NOTYPE` inside an executable section (e.g. hand-written `label_XXXX`).
    Label,
    /// `SHN_ABS` symbol (clang 20+ resource symbols such as `k.num_vgpr`).
    Resource,
    /// `STT_OBJECT` data (not a descriptor).
    Data,
    /// Section, file, undefined or other symbol.
    Other,
}

/// A symbol with its classification.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClassifiedSymbol {
    /// The ELF symbol.
    pub symbol: Symbol,
    /// Its kind.
    pub kind: SymbolKind,
}

/// A kernel: descriptor plus entry point.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Kernel {
    /// Kernel name (descriptor symbol without `.kd`).
    pub name: String,
    /// Address of the descriptor (bytes).
    pub kd_address: u64,
    /// File offset of the descriptor (bytes).
    pub kd_offset: u64,
    /// Decoded descriptor.
    pub descriptor: KernelDescriptor,
    /// Entry address = `kd_address + kernel_code_entry_byte_offset`.
    pub entry: u64,
    /// Index of the executable section holding the entry.
    pub section: usize,
    /// Size of the kernel's `STT_FUNC` symbol (bytes), when present.
    pub code_size: Option<u64>,
    /// Where the kernel's metadata is: (index into [`CodeObject::metadata`], index in that
    /// note's `amdhsa.kernels`).
    pub metadata_index: Option<(usize, usize)>,
}

/// A device function (`STT_FUNC` that is not a kernel entry).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceFunction {
    /// Symbol name.
    pub name: String,
    /// Start address (bytes).
    pub address: u64,
    /// `st_size` (bytes).
    pub size: u64,
    /// True for `STB_LOCAL`.
    pub local: bool,
    /// True for `__clang_ocl_kern_imp_*` clones.
    pub ocl_clone: bool,
}

/// A parsed code object. Owns its bytes.
#[derive(Debug, Clone)]
pub struct CodeObject {
    /// The input bytes.
    pub bytes: Vec<u8>,
    /// ELF headers.
    pub elf: Elf,
    /// Target decoded from `e_flags`.
    pub target: Target,
    /// Code object version from `EI_ABIVERSION`.
    pub version: CodeObjectVersion,
    /// Every symbol of `.symtab` and `.dynsym`, classified.
    pub symbols: Vec<ClassifiedSymbol>,
    /// Kernels in descriptor address order (deduplicated across `.symtab`/`.dynsym`).
    pub kernels: Vec<Kernel>,
    /// Device functions in address order (deduplicated across tables).
    pub functions: Vec<DeviceFunction>,
    /// Every `NT_AMDGPU_METADATA` note, in file order: one for a normal link, one per
    /// translation unit for `-fgpu-rdc` links (each lists that unit's kernels).
    pub metadata: Vec<Metadata>,
}

impl CodeObject {
    /// Parses a code object. Errors: every [`Elf::parse`] error, [`Error::WrongMachine`],
    /// [`Error::WrongOsAbi`], [`Error::LegacyAbi0`], [`Error::UnsupportedAbiVersion`],
    /// [`Error::Malformed`] (unknown machine, descriptor outside its section or in one that is
    /// not an allocated `SHT_PROGBITS`, a symbol table naming a wrong string table, a section of
    /// size 0 that is all a program header maps, a symbol whose value lies outside the code
    /// section it names or in code while it names another section, a `PT_GNU_RELRO` range
    /// outside every `PT_LOAD`),
    /// [`Error::BadKernelEntry`], [`Error::Metadata`].
    pub fn parse(bytes: &[u8]) -> Result<CodeObject> {
        let mut co = CodeObject::parse_borrowed(bytes)?;
        co.bytes = bytes.to_vec();
        Ok(co)
    }

    /// [`CodeObject::parse`] of bytes the caller gives away: they become
    /// [`CodeObject::bytes`] without a copy (a whole file is not held twice). Errors: as
    /// [`CodeObject::parse`].
    pub fn parse_owned(bytes: Vec<u8>) -> Result<CodeObject> {
        let mut co = CodeObject::parse_borrowed(&bytes)?;
        co.bytes = bytes;
        Ok(co)
    }

    /// [`CodeObject::parse`] with [`CodeObject::bytes`] left empty.
    fn parse_borrowed(bytes: &[u8]) -> Result<CodeObject> {
        let elf = Elf::parse(bytes)?;
        let h = &elf.header;
        if h.e_machine != elf::EM_AMDGPU {
            return Err(Error::WrongMachine {
                found: h.e_machine,
                expected: elf::EM_AMDGPU,
            });
        }
        if h.os_abi != 64 {
            return Err(Error::WrongOsAbi(h.os_abi));
        }
        if h.e_type == elf::ET_REL {
            return Err(Error::Malformed {
                what: "ELF header",
                offset: 0x10,
                detail: "e_type is ET_REL: a relocatable object, not a code object (link it with ld.lld -shared)".into(),
            });
        }
        let version = CodeObjectVersion::from_abi_version(h.abi_version, h.e_flags)?;
        let target = Target::from_e_flags(h.e_flags)?;
        check_address_space(&elf, bytes.len() as u64)?;
        check_dynamic_pointers(&elf, bytes)?;
        crate::sections::check(&elf)?;
        let raw_syms = elf.symbols(bytes)?;

        let mut metadata = Vec::new();
        for s in elf.sections.iter().filter(|s| s.sh_type == elf::SHT_NOTE) {
            for n in parse_notes(elf.section_data(bytes, s), s.offset)? {
                if n.name == b"AMDGPU" && n.n_type == NT_AMDGPU_METADATA {
                    metadata.push(Metadata::decode(&n.desc, n.desc_offset)?);
                }
            }
        }

        // Lookups by name and address instead of a scan per kernel (objects have tens of
        // thousands of kernels): kernel indexes of every metadata note, `STT_FUNC` symbols by
        // name and by address (in symbol order, so the first match is the scan's).
        let md_index = crate::metadata::NotesIndex::new(&metadata);
        let mut funcs_by_name: HashMap<&str, Vec<&Symbol>> = HashMap::new();
        let mut funcs_by_addr: HashMap<u64, Vec<&Symbol>> = HashMap::new();
        for f in raw_syms.iter().filter(|f| f.st_type == elf::STT_FUNC) {
            funcs_by_name.entry(&f.name).or_default().push(f);
            funcs_by_addr.entry(f.value).or_default().push(f);
        }
        let mut kd_addresses: HashSet<u64> = HashSet::new();
        let mut kernels: Vec<Kernel> = Vec::new();
        for s in &raw_syms {
            if s.st_type != elf::STT_OBJECT || !s.name.ends_with(".kd") || s.shndx == elf::SHN_UNDEF
            {
                continue;
            }
            if kd_addresses.contains(&s.value) {
                continue;
            }
            let name = s.name[..s.name.len() - 3].to_string();
            let sec = elf.sections.get(usize::from(s.shndx)).filter(|sec| {
                s.value >= sec.addr
                    && s.value.checked_add(KD_SIZE as u64) <= Some(sec.addr + sec.size)
            });
            let Some(sec) = sec else {
                return Err(Error::Malformed {
                    what: "kernel descriptor symbol",
                    offset: s.entry_offset,
                    detail: format!(
                        "{} at {:#x} is not inside a section with 64 bytes of contents",
                        s.name, s.value
                    ),
                });
            };
            // Allocated SHT_PROGBITS (so not SHT_NOBITS): the descriptor has contents.
            crate::sections::check_descriptor_section(&elf, sec, &s.name, s.value)?;
            let kd_offset = sec.offset + (s.value - sec.addr);
            let descriptor = KernelDescriptor::decode(
                crate::error::slice_at(bytes, kd_offset, 64, "kernel descriptor")?,
                kd_offset,
            )?;
            let entry = descriptor.entry_address(s.value);
            let named = funcs_by_name.get(name.as_str()).map_or(&[][..], |v| &v[..]);
            let code_size = named.iter().find(|f| f.value == entry).map(|f| f.size);
            // The kernel's own symbol elsewhere and another function at the entry: the
            // descriptor's entry offset is corrupt (it would run that function as the kernel).
            let own = named.first();
            let other = funcs_by_addr
                .get(&entry)
                .and_then(|v| v.iter().find(|f| f.name != name));
            if let (None, Some(own), Some(other)) = (code_size, own, other) {
                return Err(Error::Malformed {
                    what: "kernel descriptor",
                    offset: kd_offset,
                    detail: format!(
                        "{}: kernel_code_entry_byte_offset {:#x} points at {entry:#x}, the function {}, not at the kernel's own symbol {name} ({:#x})",
                        s.name, descriptor.kernel_code_entry_byte_offset, other.name, own.value
                    ),
                });
            }
            // A kernel without code (its symbol has size 0) may sit at the very end of its
            // section: rocPRIM's "trampoline" kernels compiled out for other targets do.
            let exec = elf.sections.iter().find(|x| {
                x.is_alloc()
                    && x.is_exec()
                    && (x.contains_addr(entry)
                        || (code_size == Some(0) && x.addr.checked_add(x.size) == Some(entry)))
            });
            let Some(exec) = exec else {
                return Err(Error::BadKernelEntry {
                    name: s.name.clone(),
                    offset: kd_offset,
                    entry,
                    entry_offset: descriptor.kernel_code_entry_byte_offset,
                });
            };
            let metadata_index = md_index.get(&s.name);
            kd_addresses.insert(s.value);
            kernels.push(Kernel {
                name,
                kd_address: s.value,
                kd_offset,
                descriptor,
                entry,
                section: exec.index,
                code_size,
                metadata_index,
            });
        }
        kernels.sort_by_key(|k| k.kd_address);

        let entries: HashSet<(u64, &str)> =
            kernels.iter().map(|k| (k.entry, k.name.as_str())).collect();
        let is_entry = |s: &Symbol| entries.contains(&(s.value, s.name.as_str()));
        let mut seen_functions: HashSet<(String, u64)> = HashSet::new();
        let mut symbols = Vec::with_capacity(raw_syms.len());
        let mut functions: Vec<DeviceFunction> = Vec::new();
        for s in raw_syms {
            let section = elf.sections.get(usize::from(s.shndx));
            let in_exec = section.is_some_and(Section::is_exec);
            // A defined function (kernel entry or device function) lives in code: an ordinary
            // section index (below SHN_LORESERVE) naming any other section is corrupt, and a
            // rewrite would move the symbol with that section instead of with the code.
            if let Some(sec) = section.filter(|sec| {
                s.st_type == elf::STT_FUNC
                    && s.shndx != elf::SHN_UNDEF
                    && s.shndx < 0xff00
                    && !sec.is_exec()
            }) {
                return Err(Error::Malformed {
                    what: "symbol",
                    offset: s.entry_offset + 6,
                    detail: format!(
                        "{}: st_shndx {} names {}, not an executable section",
                        s.name, s.shndx, sec.name
                    ),
                });
            }
            // A symbol naming code lies in it (or at its end), and a symbol naming another
            // allocated section does not lie in code (gABI "Symbol Values": an address in
            // executables): the rewriter moves a symbol with the code at its value, so either
            // disagreement would move it into another section (session-25 fresh tester: exit 1
            // from our verifier). Data symbols outside their section are left to the writer.
            let outside =
                |sec: &Section| s.value < sec.addr || s.value > sec.addr.saturating_add(sec.size);
            let in_code = |v: u64| {
                elf.sections
                    .iter()
                    .any(|x| x.is_exec() && x.contains_addr(v))
            };
            if let Some(sec) = section.filter(|sec| {
                s.shndx != elf::SHN_UNDEF
                    && s.shndx < 0xff00
                    && sec.is_alloc()
                    && s.st_type != elf::STT_SECTION
                    && outside(sec)
                    && (sec.is_exec() || in_code(s.value))
            }) {
                return Err(Error::Malformed {
                    what: "symbol",
                    offset: s.entry_offset + 8,
                    detail: format!(
                        "{}: st_value {:#x} lies outside section [{}] {} ({:#x}..{:#x}) that its st_shndx names",
                        s.name,
                        s.value,
                        sec.index,
                        sec.name,
                        sec.addr,
                        sec.addr.saturating_add(sec.size)
                    ),
                });
            }
            let kind = if s.shndx == elf::SHN_ABS {
                SymbolKind::Resource
            } else if s.st_type == elf::STT_FUNC && is_entry(&s) {
                SymbolKind::KernelEntry
            } else if s.st_type == elf::STT_FUNC && s.name.starts_with("__clang_ocl_kern_imp_") {
                SymbolKind::OclKernelClone
            } else if s.st_type == elf::STT_FUNC {
                SymbolKind::Function
            } else if s.st_type == elf::STT_OBJECT
                && s.name.ends_with(".kd")
                && kd_addresses.contains(&s.value)
            {
                SymbolKind::KernelDescriptor
            } else if s.st_type == elf::STT_OBJECT {
                SymbolKind::Data
            } else if s.st_type == elf::STT_NOTYPE && in_exec && s.shndx != elf::SHN_UNDEF {
                SymbolKind::Label
            } else {
                SymbolKind::Other
            };
            if matches!(kind, SymbolKind::Function | SymbolKind::OclKernelClone)
                && s.shndx != elf::SHN_UNDEF
                && seen_functions.insert((s.name.clone(), s.value))
            {
                functions.push(DeviceFunction {
                    name: s.name.clone(),
                    address: s.value,
                    size: s.size,
                    local: s.bind == elf::STB_LOCAL,
                    ocl_clone: kind == SymbolKind::OclKernelClone,
                });
            }
            symbols.push(ClassifiedSymbol { symbol: s, kind });
        }
        functions.sort_by(|a, b| (a.address, &a.name).cmp(&(b.address, &b.name)));
        Ok(CodeObject {
            bytes: Vec::new(),
            elf,
            target,
            version,
            symbols,
            kernels,
            functions,
            metadata,
        })
    }

    /// The metadata note of kernel `k` and the kernel's index in its `amdhsa.kernels`.
    pub fn kernel_metadata(&self, k: &Kernel) -> Option<(&Metadata, usize)> {
        let (note, i) = k.metadata_index?;
        Some((self.metadata.get(note)?, i))
    }

    /// First section named `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.elf.section_by_name(name)
    }

    /// Contents of a section (empty for `SHT_NOBITS`).
    pub fn section_data(&self, section: &Section) -> &[u8] {
        self.elf.section_data(&self.bytes, section)
    }

    /// Contents of a section as its readers see them: decompressed when it has
    /// `SHF_COMPRESSED` (with the compression header, [`crate::compressed`]), borrowed
    /// otherwise. Errors: a compressed section that does not decompress within `limit` bytes.
    pub fn section_contents(
        &self,
        section: &Section,
        limit: u64,
    ) -> Result<(Option<crate::compressed::Chdr>, std::borrow::Cow<'_, [u8]>)> {
        let data = self.section_data(section);
        if section.flags & crate::compressed::SHF_COMPRESSED == 0 {
            return Ok((None, std::borrow::Cow::Borrowed(data)));
        }
        let (h, plain) = crate::compressed::decompress(&section.name, section.offset, data, limit)?;
        Ok((Some(h), std::borrow::Cow::Owned(plain)))
    }

    /// Every `.debug_*` section by name, as DWARF readers see it ([`Self::section_contents`]:
    /// decompressed when `SHF_COMPRESSED`, borrowed otherwise). Errors: the first compressed
    /// section that does not decompress within `limit` bytes.
    pub fn debug_sections(&self, limit: u64) -> Result<HashMap<&str, std::borrow::Cow<'_, [u8]>>> {
        self.elf
            .sections
            .iter()
            .filter(|s| s.name.starts_with(".debug_"))
            .map(|s| Ok((s.name.as_str(), self.section_contents(s, limit)?.1)))
            .collect()
    }

    /// Every executable section (`SHF_EXECINSTR`), `.text` normally the only one.
    pub fn exec_sections(&self) -> impl Iterator<Item = &Section> {
        self.elf.sections.iter().filter(|s| s.is_exec())
    }

    /// The `.text` section.
    pub fn text(&self) -> Option<&Section> {
        self.section(".text")
    }

    /// True when a `.debug_info` section is present.
    pub fn has_dwarf(&self) -> bool {
        self.section(".debug_info").is_some()
    }

    /// Contents of the first `.sqtt_funcmap` section, when present.
    pub fn funcmap(&self) -> Option<&[u8]> {
        self.section(".sqtt_funcmap").map(|s| self.section_data(s))
    }

    /// Symbols of one table with a given name.
    pub fn find_symbols<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a ClassifiedSymbol> + 'a {
        self.symbols.iter().filter(move |s| s.symbol.name == name)
    }

    /// Symbols of a given table.
    pub fn table_symbols(&self, table: SymbolTable) -> impl Iterator<Item = &ClassifiedSymbol> {
        self.symbols.iter().filter(move |s| s.symbol.table == table)
    }
}

/// Largest virtual address (exclusive) a code object section or segment may reach: the 48-bit
/// virtual address space of AMDGPU (AMDGPUUsage "Address Spaces": 64-bit flat pointers whose
/// hardware virtual addresses are 48 bits).
pub const MAX_VIRTUAL_ADDRESS: u64 = 1 << 48;
/// Largest `sh_addralign` / `p_align` accepted (bytes); lld uses at most the page size.
pub const MAX_ALIGN: u64 = 1 << 32;

/// Every address-valued `.dynamic` entry ([`elf::DYNAMIC_POINTER_TAGS`], non-zero) points into
/// an allocated section (`sh_addr ..= sh_addr + sh_size`). A rewrite moves such a pointer with
/// the section it points into; one that points nowhere cannot be moved or kept consistently, and
/// was a verifier rejection (exit 1) rather than bad input (fresh tester, session 12: `DT_HASH`
/// with one bit flipped). None of 3,484 real and fixture objects has one. Errors:
/// [`Error::Malformed`] at the entry's file offset, naming the tag and the address.
fn check_dynamic_pointers(elf: &Elf, bytes: &[u8]) -> Result<()> {
    let alloc: Vec<(u64, u64)> = elf
        .sections
        .iter()
        .filter(|s| s.is_alloc())
        .map(|s| (s.addr, s.addr.saturating_add(s.size)))
        .collect();
    for s in elf
        .sections
        .iter()
        .filter(|s| s.sh_type == elf::SHT_DYNAMIC)
    {
        let data = elf.section_data(bytes, s);
        for (i, e) in data.chunks_exact(16).enumerate() {
            let word = |at: usize| u64::from_le_bytes(e[at..at + 8].try_into().unwrap_or([0; 8]));
            let (tag, value) = (word(0), word(8));
            let Some(&(_, name)) = elf::DYNAMIC_POINTER_TAGS.iter().find(|(t, _)| *t == tag) else {
                continue;
            };
            if value != 0 && !alloc.iter().any(|&(a, b)| a <= value && value <= b) {
                return Err(Error::Malformed {
                    what: ".dynamic entry",
                    offset: s.offset + 16 * i as u64,
                    detail: format!("{name} points at {value:#x}, outside every allocated section"),
                });
            }
        }
    }
    Ok(())
}

/// Rejects file-backed sections overlapping the ELF header or the program or section header
/// tables (the writer re-emits those tables), alloc sections overlapping each other in memory
/// or placed in a `PT_LOAD` at a file offset that disagrees with their address, `PT_LOAD`s whose
/// address and offset are not congruent modulo `p_align` (gABI "Program Header"), section and segment address ranges outside
/// [`MAX_VIRTUAL_ADDRESS`], non-empty segment file ranges past the end of the file (`file_len` bytes),
/// alignments that are not 0 or a power of two up to [`MAX_ALIGN`] (gABI "Sections": "only 0
/// and positive integral powers of two are allowed"), and alloc sections whose address is not a
/// multiple of their `sh_addralign` (same section of the gABI). Errors: [`Error::Malformed`] at the offset of the
/// section or program header.
fn check_address_space(elf: &Elf, file_len: u64) -> Result<()> {
    let bad_align = |a: u64| a != 0 && (!a.is_power_of_two() || a > MAX_ALIGN);
    let past = |addr: u64, size: u64| {
        addr.checked_add(size)
            .is_none_or(|end| end > MAX_VIRTUAL_ADDRESS)
    };
    let h = &elf.header;
    let tables = [
        ("ELF header", 0, 64),
        ("program header table", h.e_phoff, 56 * u64::from(h.e_phnum)),
        ("section header table", h.e_shoff, 64 * u64::from(h.e_shnum)),
    ];
    for s in &elf.sections {
        let offset = elf.header.e_shoff + 64 * s.index as u64;
        let (start, end) = (s.offset, s.offset + s.file_size());
        if let Some((table, ..)) = tables
            .iter()
            .find(|(_, o, n)| end > start && *n > 0 && start < o + n && *o < end)
        {
            return Err(Error::Malformed {
                what: "section header",
                offset,
                detail: format!(
                    "section {} at file offset {start:#x} with size {:#x} overlaps the {table}",
                    s.name,
                    s.file_size()
                ),
            });
        }
        if bad_align(s.addralign) {
            return Err(Error::Malformed {
                what: "section header",
                offset,
                detail: format!(
                    "sh_addralign {:#x} of section {} is not a power of two up to 2^32",
                    s.addralign, s.name
                ),
            });
        }
        // gABI "Sections", sh_addralign: "the value of sh_addr must be congruent to 0, modulo
        // the value of sh_addralign". The writer lays alloc sections out at their alignment, so a
        // misaligned one would move (and drag addresses mapped through it) in an edit-free write.
        if s.is_alloc() && s.addralign > 1 && s.addr % s.addralign != 0 {
            return Err(Error::Malformed {
                what: "section header",
                offset,
                detail: format!(
                    "section {} at address {:#x} is not a multiple of its sh_addralign {:#x}",
                    s.name, s.addr, s.addralign
                ),
            });
        }
        if past(s.addr, s.size) {
            return Err(Error::Malformed {
                what: "section header",
                offset,
                detail: format!("section {} at address {:#x} with size {:#x} is outside the 48-bit address space", s.name, s.addr, s.size),
            });
        }
    }
    let mut alloc: Vec<&Section> = elf
        .sections
        .iter()
        .filter(|s| s.is_alloc() && s.size > 0)
        .collect();
    alloc.sort_by_key(|s| (s.addr, s.index));
    for w in alloc.windows(2) {
        if w[0].addr + w[0].size > w[1].addr {
            return Err(Error::Malformed {
                what: "section header",
                offset: elf.header.e_shoff + 64 * w[1].index as u64,
                detail: format!(
                    "section {} at address {:#x} overlaps section {} ({:#x}..{:#x}) in memory",
                    w[1].name,
                    w[1].addr,
                    w[0].name,
                    w[0].addr,
                    w[0].addr + w[0].size
                ),
            });
        }
    }
    // A loaded section's file offset must match its address within its PT_LOAD (gABI "Program
    // Loading": the segment's file image is mapped at p_vaddr).
    // Empty and SHT_NOBITS sections included: the writer places them by address like the others
    // (lld gives them the offset their address implies).
    for s in elf.sections.iter().filter(|s| s.is_alloc()) {
        let seg = elf.segments.iter().find(|p| {
            p.p_type == elf::PT_LOAD
                && s.addr >= p.vaddr
                && s.addr - p.vaddr < p.memsz
                && s.addr - p.vaddr + s.size <= p.memsz
        });
        if let Some(p) = seg {
            if s.offset.wrapping_sub(p.offset) != s.addr - p.vaddr {
                return Err(Error::Malformed {
                    what: "section header",
                    offset: elf.header.e_shoff + 64 * s.index as u64,
                    detail: format!(
                        "section {} at address {:#x} and file offset {:#x} disagrees with its PT_LOAD (address {:#x}, file offset {:#x})",
                        s.name, s.addr, s.offset, p.vaddr, p.offset
                    ),
                });
            }
        }
    }
    for (i, p) in elf.segments.iter().enumerate() {
        let offset = elf.header.phdr_offset(i);
        if bad_align(p.align) {
            return Err(Error::Malformed {
                what: "program header",
                offset,
                detail: format!("p_align {:#x} is not a power of two up to 2^32", p.align),
            });
        }
        if p.p_type == elf::PT_LOAD && p.align > 1 && p.vaddr % p.align != p.offset % p.align {
            return Err(Error::Malformed {
                what: "program header",
                offset,
                detail: format!(
                    "PT_LOAD address {:#x} and file offset {:#x} are not congruent modulo p_align {:#x}",
                    p.vaddr, p.offset, p.align
                ),
            });
        }
        if past(p.vaddr, p.memsz) {
            return Err(Error::Malformed {
                what: "program header",
                offset,
                detail: format!(
                    "segment at address {:#x} with size {:#x} is outside the 48-bit address space",
                    p.vaddr, p.memsz
                ),
            });
        }
        if p.filesz > 0
            && p.offset
                .checked_add(p.filesz)
                .is_none_or(|end| end > file_len)
        {
            return Err(Error::Malformed {
                what: "program header",
                offset,
                detail: format!(
                    "segment file range at offset {:#x} with size {:#x} extends past the end of the file ({file_len:#x} bytes)",
                    p.offset, p.filesz
                ),
            });
        }
    }
    Ok(())
}
