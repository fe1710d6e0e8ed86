//! [`Check::Symbols`], [`Check::Relocations`]: symbol values and sizes and
//! `R_AMDGPU_RELATIVE64` addends follow the moved code.

use hsaco::elf::{self, Section};
use hsaco::CodeObject;

use crate::program::{Program, KEPT_TEXT_SECTION};
use crate::{Check, Finding};

/// `R_AMDGPU_RELATIVE64` (AMDGPUUsage "Relocation Records").
const R_AMDGPU_RELATIVE64: u32 = 13;

fn section_name(co: &CodeObject, idx: u16) -> Option<&str> {
    co.elf
        .sections
        .get(usize::from(idx))
        .map(|s| s.name.as_str())
}

/// Maps an original code address: function entries to the rewritten entry (so the entry run
/// executes), other instructions to their allowed landings, the end of a body to the new end.
fn code_targets(p: &Program, a: u64) -> Option<Vec<u64>> {
    // The end of `.text` (kernels without code sit there) stays its end; kept in place, it
    // stays where it is.
    if a == p.otext.end() {
        return Some(vec![p.kept.map_or(p.ntext.end(), |k| k.end())]);
    }
    if p.opaque_at(a).is_some() {
        return Some(vec![a]);
    }
    if let Some(f) = p.func_at(a).and_then(|fi| p.funcs.get(fi)) {
        return f.new_start.map(|s| vec![s]);
    }
    if let Some((_, _, v)) = p.landing(a) {
        return Some(v);
    }
    // Bodies ascend and do not overlap, so their ends ascend too: the first function ending at
    // or after `a` is the only one that can end there (a binary search, not a scan per symbol).
    let i = p.funcs.partition_point(|f| f.orig_end < a);
    p.funcs
        .get(i)
        .filter(|f| f.orig_end == a)
        .and_then(|f| f.new_body_end())
        .map(|e| vec![e])
}

/// Checks that every symbol of `o` is in `n` with its value and size following the moved code.
pub(crate) fn check_symbols(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    findings: &mut Vec<Finding>,
) {
    for table in [elf::SymbolTable::Symtab, elf::SymbolTable::Dynsym] {
        let os: Vec<_> = o.table_symbols(table).map(|s| &s.symbol).collect();
        let ns: Vec<_> = n.table_symbols(table).map(|s| &s.symbol).collect();
        if os.len() != ns.len() {
            findings.push(Finding::global(
                Check::Symbols,
                format!(
                    "{table:?} has {} symbols, the original {}",
                    ns.len(),
                    os.len()
                ),
            ));
            continue;
        }
        for (a, b) in os.iter().zip(&ns) {
            let sym = |message: String| Finding {
                check: Check::Symbols,
                function: Some(a.name.clone()),
                original_address: Some(a.value),
                new_address: Some(b.value),
                message,
            };
            // Kept in place, a function copied to the new code section names it.
            let moved_to_kept_text = p.kept.is_some()
                && section_name(o, a.shndx) == Some(".text")
                && section_name(n, b.shndx) == Some(KEPT_TEXT_SECTION)
                && p.ntext.contains(b.value);
            if a.name != b.name
                || a.st_type != b.st_type
                || a.bind != b.bind
                || a.other != b.other
                || (section_name(o, a.shndx) != section_name(n, b.shndx) && !moved_to_kept_text)
            {
                findings.push(sym(format!(
                    "{table:?} entry {} changed name, type, binding, visibility or section",
                    a.index
                )));
                continue;
            }
            if a.shndx == elf::SHN_ABS || a.shndx == elf::SHN_UNDEF {
                continue;
            }
            // Kept in place, a symbol's value lies in the code section it names: `.text` (kept)
            // or the new section.
            if let Some(kept) = p.kept {
                let named = section_name(n, b.shndx);
                let inside = |t: &crate::program::Text| t.contains(b.value) || b.value == t.end();
                let wrong =
                    (named == Some(".text") && !inside(&kept) && a.st_type != elf::STT_SECTION)
                        || (named == Some(KEPT_TEXT_SECTION) && !inside(&p.ntext));
                if wrong {
                    findings.push(sym(format!(
                        "value {:#x} lies outside the section it names ({})",
                        b.value,
                        named.unwrap_or_default()
                    )));
                    continue;
                }
            }
            let in_text = p.otext.contains(a.value) || (a.value == p.otext.end() && a.value > 0);
            let in_exec = o
                .elf
                .sections
                .get(usize::from(a.shndx))
                .is_some_and(Section::is_exec);
            if !in_exec {
                if b.value != p.map_data(a.value) || a.size != b.size {
                    findings.push(sym(format!(
                        "data symbol should be at {:#x} size {:#x}, is size {:#x}",
                        p.map_data(a.value),
                        a.size,
                        b.size
                    )));
                }
                continue;
            }
            if a.st_type == elf::STT_SECTION {
                if b.value != p.kept.map_or(p.ntext.addr, |k| k.addr) {
                    findings.push(sym("section symbol does not point at .text".into()));
                }
                continue;
            }
            if !in_text {
                continue;
            }
            match code_targets(p, a.value) {
                Some(v) if v.contains(&b.value) => {}
                Some(v) => findings.push(sym(format!(
                    "value should be {:#x}",
                    v.first().copied().unwrap_or_default()
                ))),
                None => findings.push(sym("value is not an original instruction address".into())),
            }
            if a.st_type == elf::STT_FUNC && a.size > 0 {
                if let Some(f) = p.func_at(a.value).map(|fi| &p.funcs[fi]) {
                    let (Some(start), Some(end)) = (f.new_start, f.new_body_end()) else {
                        continue;
                    };
                    if b.value.saturating_add(b.size) < end
                        || start.saturating_add(b.size) > f.new_region_end
                    {
                        findings.push(sym(format!(
                            "size {:#x} does not cover the rewritten body {:#x}..{end:#x}",
                            b.size, start
                        )));
                    }
                }
            }
        }
    }
}

/// Checks that every `R_AMDGPU_RELATIVE64` addend of `.rela.dyn` follows the moved code.
pub(crate) fn check_relocations(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    findings: &mut Vec<Finding>,
) {
    let (Ok(or), Ok(nr)) = (o.elf.relas(&o.bytes), n.elf.relas(&n.bytes)) else {
        findings.push(Finding::global(
            Check::Relocations,
            "relocation sections do not parse".into(),
        ));
        return;
    };
    if or.len() != nr.len() {
        findings.push(Finding::global(
            Check::Relocations,
            format!("{} relocations, the original has {}", nr.len(), or.len()),
        ));
        return;
    }
    for (a, b) in or.iter().zip(&nr) {
        let rel = |message: String| Finding {
            check: Check::Relocations,
            function: None,
            original_address: Some(a.r_offset),
            new_address: Some(b.r_offset),
            message,
        };
        if a.r_type != b.r_type || a.r_sym != b.r_sym || b.r_offset != p.map_data(a.r_offset) {
            findings.push(rel(format!(
                "relocation at file offset {:#x} changed type, symbol or offset",
                b.entry_offset
            )));
            continue;
        }
        if a.r_type != R_AMDGPU_RELATIVE64 {
            if a.addend != b.addend {
                findings.push(rel("addend changed".into()));
            }
            continue;
        }
        let (x, y) = (a.addend as u64, b.addend as u64);
        let ok = if p.otext.contains(x) {
            code_targets(p, x).is_some_and(|v| v.first() == Some(&y))
        } else {
            y == p.map_data(x)
        };
        if !ok {
            findings.push(rel(format!(
                "R_AMDGPU_RELATIVE64 addend {x:#x} not mapped: found {y:#x}"
            )));
        }
    }
}
