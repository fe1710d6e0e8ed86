//! Section header fields a code object's loader reads through but [`crate::elf::Elf::read`]
//! does not check: the string table a symbol table names, the size of a symbol table, and a
//! section of size 0 that is all a program header maps. Each used to reach the rewrite, which
//! then failed our own verifier (exit 1) or read wrong symbol names (session-23 fresh tester);
//! now each is bad input, named with the section, the field and the field's file offset. So is
//! a `PT_GNU_RELRO` range that no loaded segment contains (session-25 fresh tester).

use crate::elf::{self, Elf, Section};
use crate::error::{Error, Result};

/// `SHT_STRTAB` (gABI "Sections").
const SHT_STRTAB: u32 = 3;
/// Size of an `Elf64_Sym` (bytes, gABI "Symbol Table").
const SYM_SIZE: u64 = 24;
/// Offsets of fields inside a 64-byte section header (gABI "Sections").
const SH_TYPE: u64 = 4;
/// `sh_flags`.
const SH_FLAGS: u64 = 8;
/// `sh_size`.
const SH_SIZE: u64 = 32;
/// `sh_link`.
const SH_LINK: u64 = 40;

/// File offset of field `at` (bytes into the header) of section `s`'s header.
fn field_offset(e: &Elf, s: &Section, at: u64) -> u64 {
    e.header.e_shoff + u64::from(e.header.e_shentsize) * s.index as u64 + at
}

/// A [`Error::Malformed`] about section `s`: `detail` is followed by the file offset of its
/// section header (`field` bytes into it).
fn bad(e: &Elf, s: &Section, field: u64, detail: String) -> Error {
    Error::Malformed {
        what: "section header",
        offset: field_offset(e, s, field),
        detail: format!(
            "{detail} (section header [{}] at file offset {:#x})",
            s.index,
            field_offset(e, s, 0)
        ),
    }
}

/// Checks every rule of this module. Errors: [`Error::Malformed`] at the offending field of
/// the section header (see [`check_symbol_tables`] and [`check_empty_mapped_sections`]) or at
/// the program header ([`check_relro`]).
pub(crate) fn check(e: &Elf) -> Result<()> {
    check_symbol_tables(e)?;
    check_empty_mapped_sections(e)?;
    check_relro(e)
}

/// A `PT_GNU_RELRO` range is memory the loader makes read-only after relocation, so it lies
/// inside one `PT_LOAD` segment (lld puts `.dynamic` and `.relro_padding` there). A range that
/// reaches past every loaded segment would also cover the code the rewriter appends
/// (session-25 fresh tester: the verifier then rejected the output, exit 1). Errors:
/// [`Error::Malformed`] at the program header.
fn check_relro(e: &Elf) -> Result<()> {
    for (i, p) in e.segments.iter().enumerate() {
        if p.p_type != elf::PT_GNU_RELRO || p.memsz == 0 {
            continue;
        }
        let end = p.vaddr.checked_add(p.memsz);
        let inside = e.segments.iter().any(|l| {
            l.p_type == elf::PT_LOAD
                && p.vaddr >= l.vaddr
                && end.is_some_and(|end| Some(end) <= l.vaddr.checked_add(l.memsz))
        });
        if !inside {
            return Err(Error::Malformed {
                what: "program header",
                offset: e.header.phdr_offset(i),
                detail: format!(
                    "[{i}] PT_GNU_RELRO maps {:#x}..{} (p_vaddr {:#x}, p_memsz {:#x}), which no PT_LOAD segment contains",
                    p.vaddr,
                    end.map_or("past 2^64".to_string(), |x| format!("{x:#x}")),
                    p.vaddr,
                    p.memsz
                ),
            });
        }
    }
    Ok(())
}

/// A symbol table (`SHT_SYMTAB`, `SHT_DYNSYM`) holds whole `Elf64_Sym` entries, and its
/// `sh_link` names the `SHT_STRTAB` holding its symbol names (gABI "Sections", `sh_link`
/// table). For `.symtab` that table is neither the section name table (`e_shstrndx`) nor the
/// string table of `.dynsym`: lld writes `.strtab` for it, and names read from another table
/// are wrong (an empty name made the object fail closed; names that happened to be in range
/// reached the funcmap).
fn check_symbol_tables(e: &Elf) -> Result<()> {
    let dynamic_names: Vec<u32> = e
        .sections
        .iter()
        .filter(|s| s.sh_type == elf::SHT_DYNSYM)
        .map(|s| s.link)
        .collect();
    for s in e
        .sections
        .iter()
        .filter(|s| matches!(s.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM))
    {
        if s.size % SYM_SIZE != 0 {
            return Err(bad(
                e,
                s,
                SH_SIZE,
                format!(
                    "`{}` sh_size {:#x} is not a whole number of {SYM_SIZE}-byte symbols",
                    s.name, s.size
                ),
            ));
        }
        let target = e.sections.get(s.link as usize).filter(|t| t.index != 0);
        let why = match target {
            None => Some("is not a section".to_string()),
            Some(t) if t.sh_type != SHT_STRTAB => {
                Some(format!("names `{}`, of type {:#x}", t.name, t.sh_type))
            }
            Some(t)
                if s.sh_type == elf::SHT_SYMTAB && t.index == usize::from(e.header.e_shstrndx) =>
            {
                Some(format!(
                    "names `{}`, the section name table (e_shstrndx)",
                    t.name
                ))
            }
            Some(t) if s.sh_type == elf::SHT_SYMTAB && dynamic_names.contains(&s.link) => {
                Some(format!("names `{}`, the string table of `.dynsym`", t.name))
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            return Err(bad(
                e,
                s,
                SH_LINK,
                format!(
                    "`{}` sh_link {} {why}, not a SHT_STRTAB holding its symbol names",
                    s.name, s.link
                ),
            ));
        }
    }
    Ok(())
}

/// A program header (other than `PT_GNU_STACK`, which maps nothing) that maps memory but holds
/// no allocated section of non-zero size, only one or more of size 0 (`.bss` or `.dynamic` with
/// `sh_size` 0 under a `PT_LOAD` or `PT_DYNAMIC` of non-zero `p_memsz`): the segment maps bytes
/// no section accounts for. The writer would move the segment with its empty section, and our
/// verifier requires a segment without sections to stay where it is, so such an input ended in
/// a verifier rejection (exit 1).
fn check_empty_mapped_sections(e: &Elf) -> Result<()> {
    for (i, p) in e.segments.iter().enumerate() {
        if p.p_type == elf::PT_GNU_STACK || p.memsz == 0 {
            continue;
        }
        let end = p.vaddr.saturating_add(p.memsz);
        let inside: Vec<&Section> = e
            .sections
            .iter()
            .filter(|s| {
                s.index != 0
                    && s.is_alloc()
                    && s.addr >= p.vaddr
                    && s.addr < end
                    && s.addr.saturating_add(s.size) <= end
            })
            .collect();
        if inside.iter().any(|s| s.size > 0) {
            continue;
        }
        if let Some(s) = inside.first() {
            return Err(bad(
                e,
                s,
                SH_SIZE,
                format!(
                    "`{}` sh_size is 0, but program header [{i}] (p_type {:#x}, at file offset {:#x}) maps {:#x} bytes at its address {:#x} that no section accounts for",
                    s.name,
                    p.p_type,
                    e.header.phdr_offset(i),
                    p.memsz,
                    s.addr
                ),
            ));
        }
    }
    Ok(())
}

/// A kernel descriptor lies in an allocated `SHT_PROGBITS` section (lld's `.rodata`): the
/// loader reads descriptors from loaded memory, and the writer re-aims the entry offset of a
/// descriptor only inside such a section. `kd` names the descriptor symbol (`name.kd`) and
/// `address` its address. Errors: [`Error::Malformed`] at the section's `sh_flags` or `sh_type`.
pub(crate) fn check_descriptor_section(e: &Elf, s: &Section, kd: &str, address: u64) -> Result<()> {
    if !s.is_alloc() {
        return Err(bad(
            e,
            s,
            SH_FLAGS,
            format!(
                "`{}` holds kernel descriptor {kd} at {address:#x}, but its sh_flags {:#x} lack SHF_ALLOC ({:#x}): the loader does not load it",
                s.name,
                s.flags,
                elf::SHF_ALLOC
            ),
        ));
    }
    if s.sh_type != elf::SHT_PROGBITS {
        return Err(bad(
            e,
            s,
            SH_TYPE,
            format!(
                "`{}` holds kernel descriptor {kd} at {address:#x}, but its sh_type is {:#x}, not SHT_PROGBITS (1)",
                s.name, s.sh_type
            ),
        ));
    }
    Ok(())
}
