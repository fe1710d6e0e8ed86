//! [`Check::Segments`]: the program headers of the rewritten object load the same sections the
//! same way as the original's. The loader maps segments, not sections (gABI "Program Loading"),
//! so a `PT_LOAD` shrunk below the end of `.text`, a segment that lost its execute permission or
//! one that grew over a neighbouring section changes what runs although every section is intact.
//!
//! Rules, per program header index (the rewriter keeps every program header and its order,
//! `docs/background/rewriting.md` "Layout"):
//! 1. same `p_type`, `p_flags` and `p_align`, and as many program headers; `p_paddr` moves
//!    with `p_vaddr`;
//! 2. the same allocated, non-empty sections lie wholly inside the segment's memory image
//!    (`[p_vaddr, p_vaddr + p_memsz)`), matched by name;
//! 3. a section the original backs with file bytes (wholly inside `p_filesz`, not `SHT_NOBITS`)
//!    is backed in the rewrite too, at the file offset its address implies;
//! 4. the segment starts the same number of bytes before its first section, and its memory and
//!    file images end the same number of bytes after its last (file-backed) section, with
//!    `p_filesz` within `p_memsz`;
//! 5. a segment that maps no section (`PT_PHDR`, a headers-only `PT_LOAD`) is unchanged, and so
//!    is `PT_GNU_STACK` whatever sections its (meaningless) address range covers;
//! 6. except when `.text` is kept in place (docs/left-alone.md): then `PT_GNU_STACK`'s slot,
//!    after every `PT_LOAD`, holds the new segment: a read + execute `PT_LOAD` aligned to 4 KiB
//!    that loads exactly the new code section, from file bytes, above every other `PT_LOAD`
//!    (ROCr's loader sizes its allocation by the last `PT_LOAD` in table order).

use hsaco::elf::{self, Section, Segment};
use hsaco::CodeObject;

use crate::program::KEPT_TEXT_SECTION;
use crate::{Check, Finding};

/// Rule 6: why the program header `np` (original `PT_GNU_STACK` at index `i`) is not the new
/// code segment of a rewrite that kept `.text` in place; `None` when it is.
fn not_the_kept_segment(n: &CodeObject, i: usize, np: &Segment) -> Option<String> {
    let Some(sec) = n.section(KEPT_TEXT_SECTION) else {
        return Some(format!(
            "the rewrite has no {KEPT_TEXT_SECTION} section for it to load"
        ));
    };
    let first_slot = n
        .elf
        .segments
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD && (p.vaddr, p.memsz) == (sec.addr, sec.size));
    if first_slot != Some(i) {
        return Some(format!("another program header loads {KEPT_TEXT_SECTION}"));
    }
    if n.elf
        .segments
        .iter()
        .skip(i + 1)
        .any(|p| p.p_type == elf::PT_LOAD)
    {
        return Some("a PT_LOAD follows the new code segment".into());
    }
    let others_end = n
        .elf
        .segments
        .iter()
        .take(i)
        .filter(|p| p.p_type == elf::PT_LOAD)
        .map(|p| p.vaddr.saturating_add(p.memsz))
        .max()
        .unwrap_or(0);
    let exact = (
        np.p_flags, np.align, np.vaddr, np.paddr, np.memsz, np.filesz, np.offset,
    ) == (
        5, 0x1000, sec.addr, sec.addr, sec.size, sec.size, sec.offset,
    );
    if !exact || !np.vaddr.is_multiple_of(0x1000) {
        return Some(format!(
            "the new code segment must load exactly {KEPT_TEXT_SECTION} (read + execute, 4 KiB aligned)"
        ));
    }
    (np.vaddr < others_end).then(|| {
        format!(
            "the new code segment at {:#x} lies below the end of another PT_LOAD ({others_end:#x})",
            np.vaddr
        )
    })
}

/// The allocated, non-empty sections wholly inside `p`'s memory image, in section order.
fn mapped<'a>(co: &'a CodeObject, p: &Segment) -> Vec<&'a Section> {
    co.elf
        .sections
        .iter()
        .filter(|s| s.is_alloc() && s.size > 0)
        .filter(|s| {
            s.addr >= p.vaddr
                && s.addr
                    .checked_add(s.size)
                    .is_some_and(|end| end <= p.vaddr.saturating_add(p.memsz))
        })
        .collect()
}

/// How far `p`'s memory image extends past the end of its last mapped section, and its file
/// image past the end of the last section it backs (the whole `p_filesz` when it backs none),
/// in bytes; signed, as a mutated header may end before its sections.
fn tails(p: &Segment, sections: &[&Section]) -> (i128, i128) {
    let mem_end = i128::from(p.vaddr) + i128::from(p.memsz);
    let last = sections
        .iter()
        .map(|s| i128::from(s.addr) + i128::from(s.size))
        .max()
        .unwrap_or(i128::from(p.vaddr));
    let file_end = i128::from(p.offset) + i128::from(p.filesz);
    let backed_end = sections
        .iter()
        .filter(|s| backed(p, s))
        .map(|s| i128::from(s.offset) + i128::from(s.size))
        .max()
        .unwrap_or(i128::from(p.offset));
    (mem_end - last, file_end - backed_end)
}

/// The names of `sections`, comma-separated.
fn names(sections: &[&Section]) -> String {
    let v: Vec<&str> = sections.iter().map(|s| s.name.as_str()).collect();
    v.join(", ")
}

/// True when `s` has file bytes and `p`'s file image holds all of them at the offset `s`'s
/// address implies.
fn backed(p: &Segment, s: &Section) -> bool {
    s.sh_type != elf::SHT_NOBITS
        && s.addr >= p.vaddr
        && (s.addr - p.vaddr)
            .checked_add(s.size)
            .is_some_and(|end| end <= p.filesz)
        && s.offset.checked_sub(p.offset) == Some(s.addr - p.vaddr)
}

/// Appends a [`Check::Segments`] finding for every program header of `n` (rewritten) that loads
/// differently from the same-index program header of `o` (original); see the module rules.
pub(crate) fn check_segments(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    let mut push = |message: String| {
        findings.push(Finding {
            check: Check::Segments,
            function: None,
            original_address: None,
            new_address: None,
            message,
        })
    };
    let (os, ns) = (&o.elf.segments, &n.elf.segments);
    if os.len() != ns.len() {
        push(format!(
            "{} program headers, the original has {}",
            ns.len(),
            os.len()
        ));
        return;
    }
    for (i, (op, np)) in os.iter().zip(ns).enumerate() {
        let what = format!("program header {i} (p_type {:#x})", op.p_type);
        if op.p_type == elf::PT_GNU_STACK && np.p_type == elf::PT_LOAD {
            if let Some(why) = not_the_kept_segment(n, i, np) {
                push(format!("{what}: PT_GNU_STACK became a PT_LOAD: {why}"));
            }
            continue;
        }
        if (op.p_type, op.p_flags, op.align) != (np.p_type, np.p_flags, np.align) {
            push(format!(
                "{what}: p_type/p_flags/p_align changed from {:#x}/{:#x}/{:#x} to {:#x}/{:#x}/{:#x}",
                op.p_type, op.p_flags, op.align, np.p_type, np.p_flags, np.align
            ));
            continue;
        }
        // Loaders ignore p_paddr, but the rewrite moves it with p_vaddr (hsaco's editor).
        if np.paddr.wrapping_sub(np.vaddr) != op.paddr.wrapping_sub(op.vaddr) {
            push(format!(
                "{what}: p_paddr {:#x} no longer lies where p_vaddr {:#x} puts it (original p_paddr {:#x}, p_vaddr {:#x})",
                np.paddr, np.vaddr, op.paddr, op.vaddr
            ));
        }
        // `PT_GNU_STACK` maps nothing whatever its address and sizes say (rule 5): unchanged.
        if op.p_type == elf::PT_GNU_STACK {
            if (op.offset, op.vaddr, op.filesz, op.memsz)
                != (np.offset, np.vaddr, np.filesz, np.memsz)
            {
                push(format!("{what}: PT_GNU_STACK changed"));
            }
            continue;
        }
        let (om, nm) = (mapped(o, op), mapped(n, np));
        if names(&om) != names(&nm) {
            push(format!(
                "{what}: maps sections [{}], the original's maps [{}]",
                names(&nm),
                names(&om)
            ));
            continue;
        }
        let Some((of, nf)) = om.first().zip(nm.first()) else {
            if (op.offset, op.vaddr, op.filesz, op.memsz)
                != (np.offset, np.vaddr, np.filesz, np.memsz)
            {
                push(format!(
                    "{what} maps no section and changed: offset/vaddr/filesz/memsz {:#x}/{:#x}/{:#x}/{:#x}, was {:#x}/{:#x}/{:#x}/{:#x}",
                    np.offset, np.vaddr, np.filesz, np.memsz, op.offset, op.vaddr, op.filesz, op.memsz
                ));
            }
            continue;
        };
        if of.addr - op.vaddr != nf.addr - np.vaddr {
            push(format!(
                "{what} starts {:#x} bytes before section {}, the original's {:#x} bytes",
                nf.addr - np.vaddr,
                nf.name,
                of.addr - op.vaddr
            ));
        }
        // The images end where they ended relative to the sections: a segment grows only with
        // its sections, so no file bytes appear over `.bss`, no image overlaps a neighbour and
        // `p_filesz` stays within `p_memsz`.
        let (ot, nt) = (tails(op, &om), tails(np, &nm));
        if ot != nt {
            push(format!(
                "{what} ends (memory, file) {:?} bytes after its last section, the original's {:?}",
                nt, ot
            ));
        }
        if np.filesz > np.memsz && op.filesz <= op.memsz {
            push(format!(
                "{what}: p_filesz {:#x} exceeds p_memsz {:#x}",
                np.filesz, np.memsz
            ));
        }
        for (os, ns) in om.iter().zip(&nm) {
            if backed(op, os) && !backed(np, ns) {
                push(format!(
                    "{what} no longer loads the file bytes of section {} (section at address {:#x}, file offset {:#x}; segment address {:#x}, file offset {:#x}, p_filesz {:#x})",
                    ns.name, ns.addr, ns.offset, np.vaddr, np.offset, np.filesz
                ));
            }
        }
    }
}
