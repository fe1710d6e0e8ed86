//! [`Check::Sections`]: non-text sections are unchanged except the ones a rewrite may edit, and
//! the rewritten object has exactly one `.sqtt_patch` run record.

use hsaco::elf::{self, Section};
use hsaco::CodeObject;

use crate::program::{counterpart, KEPT_TEXT_SECTION};
use crate::{Check, Finding};

/// `SHT_STRTAB`.
const SHT_STRTAB: u32 = 3;
/// `SHT_PROGBITS`.
const SHT_PROGBITS: u32 = 1;

fn is_skipped_content(s: &Section) -> bool {
    s.is_exec()
        || matches!(
            s.sh_type,
            elf::SHT_SYMTAB | elf::SHT_DYNSYM | elf::SHT_RELA | SHT_STRTAB
        )
        || s.name.starts_with(".debug_")
        || s.name == ".sqtt_funcmap"
        || s.name == PATCH_SECTION
}

/// Name of the section recording a sqtt-patch run.
const PATCH_SECTION: &str = ".sqtt_patch";

/// The `.sqtt_patch` section of a rewrite (written by `sqtt-rewrite`'s encode stage): exactly
/// one, `SHT_PROGBITS` without `SHF_ALLOC` (never loaded), holding one JSON line with exactly the
/// keys `tool` (`"sqtt-patch"`), `version` and `options` (strings; `options` is the rewriter's
/// `Debug` text, which has no stable format, so only its kind is checked). The original may have
/// one too (re-instrumentation with `--force` replaces it). A rewritten file byte-identical to the
/// original (an empty rewrite) is not checked.
pub(crate) fn check_patch_record(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    if o.bytes == n.bytes {
        return;
    }
    let records: Vec<&Section> = n
        .elf
        .sections
        .iter()
        .skip(1)
        .filter(|s| s.name == PATCH_SECTION)
        .collect();
    let [s] = records[..] else {
        findings.push(Finding::global(
            Check::Sections,
            format!(
                "the rewritten object has {} {PATCH_SECTION} sections; a rewrite has exactly one",
                records.len()
            ),
        ));
        return;
    };
    if s.sh_type != SHT_PROGBITS || s.flags != 0 {
        findings.push(Finding::global(
            Check::Sections,
            format!(
                "{PATCH_SECTION} has type {:#x} and flags {:#x}; a rewrite writes a non-allocated SHT_PROGBITS section without flags",
                s.sh_type, s.flags
            ),
        ));
    }
    if !is_patch_record(n.section_data(s)) {
        findings.push(Finding::global(
            Check::Sections,
            format!(
                "{PATCH_SECTION} is not the run record a rewrite writes (one JSON line with the strings tool \"sqtt-patch\", version and options)"
            ),
        ));
    }
}

/// `data` is one line (ending in a newline) holding a JSON object with exactly the string keys
/// `tool` (`"sqtt-patch"`), `version` and `options`.
fn is_patch_record(data: &[u8]) -> bool {
    let Some(line) = data.strip_suffix(b"\n").filter(|l| !l.contains(&b'\n')) else {
        return false;
    };
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(line) else {
        return false;
    };
    m.len() == 3
        && m.get("tool").and_then(|v| v.as_str()) == Some("sqtt-patch")
        && m.get("version").is_some_and(|v| v.is_string())
        && m.get("options").is_some_and(|v| v.is_string())
}

/// How messages name section `s`: its name, or its index when the name is empty (session-17
/// fresh tester: "section  type/flags changed").
fn shown(s: &Section) -> String {
    match s.name.as_str() {
        "" => format!("[{}] (empty name)", s.index),
        name => name.to_string(),
    }
}

/// Checks every section of `o` against its counterpart in `n` (type, flags, contents unless a
/// rewrite may edit them) and that `n` adds only the sections a rewrite adds.
pub(crate) fn check_sections(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    for s in o.elf.sections.iter().skip(1) {
        let Some(ns) = counterpart(n, s) else {
            findings.push(Finding::global(
                Check::Sections,
                format!("section {} is missing", shown(s)),
            ));
            continue;
        };
        if s.sh_type != ns.sh_type || s.flags != ns.flags {
            findings.push(Finding::global(
                Check::Sections,
                format!("section {} type/flags changed", shown(s)),
            ));
        }
        if is_skipped_content(s) {
            continue;
        }
        if s.sh_type == elf::SHT_NOBITS {
            if s.size != ns.size {
                findings.push(Finding::global(
                    Check::Sections,
                    format!(
                        "section {} size changed from {:#x} to {:#x}",
                        shown(s),
                        s.size,
                        ns.size
                    ),
                ));
            }
            continue;
        }
        let (a, b) = (o.section_data(s), n.section_data(ns));
        if s.sh_type == elf::SHT_NOTE {
            let notes = |co: &CodeObject, sec: &Section| {
                hsaco::metadata::parse_notes(co.section_data(sec), sec.offset).map(|v| {
                    v.into_iter()
                        .filter(|x| x.n_type != hsaco::metadata::NT_AMDGPU_METADATA)
                        .map(|x| (x.name, x.n_type, x.desc))
                        .collect::<Vec<_>>()
                })
            };
            if notes(o, s).ok() != notes(n, ns).ok() {
                findings.push(Finding::global(
                    Check::Sections,
                    format!(
                        "notes other than the AMDGPU metadata changed in {}",
                        shown(s)
                    ),
                ));
            }
            continue;
        }
        // Kernel descriptors inside this section are checked field by field.
        let kd_ranges: Vec<(usize, usize)> = o
            .kernels
            .iter()
            .filter(|k| k.kd_offset >= s.offset && k.kd_offset < s.offset + s.size)
            .map(|k| {
                (
                    (k.kd_offset - s.offset) as usize,
                    (k.kd_offset - s.offset) as usize + 64,
                )
            })
            .collect();
        let in_kd = |i: usize| kd_ranges.iter().any(|(x, y)| i >= *x && i < *y);
        if a.len() != b.len() {
            findings.push(Finding::global(
                Check::Sections,
                format!(
                    "section {} size changed from {:#x} to {:#x}",
                    shown(s),
                    a.len(),
                    b.len()
                ),
            ));
        } else if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i] && !in_kd(i)) {
            findings.push(Finding::global(
                Check::Sections,
                format!("section {} contents changed at offset {i:#x}", shown(s)),
            ));
        }
    }
    for s in n.elf.sections.iter().skip(1) {
        // `.text` kept in place: the instrumented functions' section (docs/left-alone.md).
        if s.name == KEPT_TEXT_SECTION && counterpart(o, s).is_none() {
            if s.sh_type != SHT_PROGBITS || s.flags != elf::SHF_ALLOC | elf::SHF_EXECINSTR {
                findings.push(Finding::global(
                    Check::Sections,
                    format!(
                        "{KEPT_TEXT_SECTION} has type {:#x} and flags {:#x}; a rewrite that keeps .text in place writes SHT_PROGBITS with SHF_ALLOC | SHF_EXECINSTR",
                        s.sh_type, s.flags
                    ),
                ));
            }
            continue;
        }
        if counterpart(o, s).is_none() && s.name != ".sqtt_funcmap" && s.name != PATCH_SECTION {
            findings.push(Finding::global(
                Check::Sections,
                format!("unexpected new section {}", shown(s)),
            ));
        }
    }
}
