//! Device functions that code outside the object may enter (issue 39 item 6), from the
//! ORIGINAL object's symbols and relocations alone (written apart from the rewriter's
//! `callers` module): an exported function symbol (not `STB_LOCAL`, visibility default or
//! protected: System V gABI "Symbol Visibility"), or a relocation whose target address (symbol
//! value plus addend; the addend alone for `R_AMDGPU_RELATIVE64` and other symbol-less
//! relocations) lies inside the function. Such callers follow the AMDGPU function calling
//! convention (AMDGPUUsage "Calling Conventions"), so the SGPRs it preserves are live at the
//! function's returns and any SGPR may await an SMEM result at its entry ([`crate::flow`]`::sgprs`).

use crate::program::Program;
use crate::FunctionKind;

/// Per function of `p`: a device function code outside the object may enter. Every device
/// function when the relocations of `orig` cannot be read.
pub(crate) fn entered_from_outside(orig: &hsaco::CodeObject, p: &Program) -> Vec<bool> {
    let device: Vec<bool> = p
        .funcs
        .iter()
        .map(|f| f.kind == FunctionKind::Function)
        .collect();
    let holding = |addr: u64| {
        p.funcs
            .iter()
            .position(|f| f.orig_start <= addr && addr < f.orig_end.max(f.orig_start + 1))
    };
    let mut out = vec![false; p.funcs.len()];
    for s in orig.symbols.iter().map(|c| &c.symbol) {
        let exported = s.bind != hsaco::elf::STB_LOCAL && matches!(s.other & 3, 0 | 3);
        if s.st_type == hsaco::elf::STT_FUNC && s.shndx != hsaco::elf::SHN_UNDEF && exported {
            for (fi, f) in p.funcs.iter().enumerate() {
                if f.orig_start == s.value {
                    out[fi] = true;
                }
            }
        }
    }
    let Ok(relas) = orig.elf.relas(&orig.bytes) else {
        return device;
    };
    for r in &relas {
        let value = if r.r_sym == 0 {
            Some(0)
        } else {
            let table = match orig.elf.sections.get(r.link as usize).map(|s| s.sh_type) {
                Some(hsaco::elf::SHT_DYNSYM) => hsaco::elf::SymbolTable::Dynsym,
                _ => hsaco::elf::SymbolTable::Symtab,
            };
            orig.symbols
                .iter()
                .map(|c| &c.symbol)
                .find(|s| s.table == table && s.index == r.r_sym as usize)
                .map(|s| s.value)
        };
        if let Some(fi) = value.and_then(|v| holding(v.wrapping_add(r.addend as u64))) {
            out[fi] = true;
        }
    }
    out.iter().zip(&device).map(|(o, d)| *o && *d).collect()
}
