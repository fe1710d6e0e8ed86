//! Who can enter each device function (issue 39 item 6): code outside the object's visible call
//! graph, nobody at all, or only the call sites the analysis resolved.
//!
//! A device function can be entered from outside when its symbol is exported (binding not
//! `STB_LOCAL` and visibility `STV_DEFAULT` or `STV_PROTECTED`: clang >= 21's
//! `__clang_ocl_kern_imp_<kernel>` twins of OpenCL kernels) or when a relocation points into it
//! (its address is stored in data: rocFFT's load/store callbacks, `R_AMDGPU_RELATIVE64`
//! addends that other code objects read as function pointers). Such callers follow the AMDGPU
//! function calling convention ([`crate::regs::CALLEE_SAVED`]).
//!
//! A device function is unreachable when none of that holds, no call or tail call the analysis
//! resolved reaches it and no `s_getpc` address builder targets it: it is local or hidden and
//! its address is never taken, so it never runs. Its sites are reported apart
//! ([`UNREACHABLE`]).
//!
//! [`skip_cause`] names why a site found no scratch SGPR.

use crate::analysis::{Callee, Exit, Program};
use hsaco::elf::{SHT_DYNSYM, STB_LOCAL};
use hsaco::CodeObject;

/// What is known about the callers of each function of a [`Program`].
#[derive(Debug, Clone, Default)]
pub struct Callers {
    /// Per function: a device function that code outside the object may enter (an exported
    /// symbol or a relocation pointing into it). `true` for every device function when the
    /// relocations cannot be read. Kernels: `false`.
    pub outside: Vec<bool>,
    /// Per function: a device function nothing can enter (see the module docs).
    pub unreachable: Vec<bool>,
}

/// Prefix of the skip reason of a site in an unreachable function whose snippet found no
/// register (counted apart: [`crate::report::Coverage::in_unreachable`]).
pub const UNREACHABLE: &str =
    "function cannot be entered (local or hidden, never called, its address never taken)";

/// ELF `STV_HIDDEN` and `STV_INTERNAL` (`st_other & 3`, System V gABI "Symbol Visibility").
const STV_INTERNAL: u8 = 1;
const STV_HIDDEN: u8 = 2;

/// The callers of every function of `prog`, from `co`'s symbols, relocations and the address
/// builders and calls the analysis found.
pub fn callers(prog: &Program, co: &CodeObject) -> Callers {
    let n = prog.funcs.len();
    let index_of = |a: u64| {
        let i = prog.funcs.partition_point(|f| f.spec.start <= a);
        (i > 0 && a < prog.funcs[i - 1].spec.end).then(|| i - 1)
    };
    let mut outside = vec![false; n];
    for s in &co.symbols {
        let sym = &s.symbol;
        let vis = sym.other & 3;
        if sym.st_type == hsaco::elf::STT_FUNC
            && sym.shndx != hsaco::elf::SHN_UNDEF
            && sym.bind != STB_LOCAL
            && vis != STV_HIDDEN
            && vis != STV_INTERNAL
        {
            if let Some(fi) = prog.funcs.iter().position(|f| f.spec.start == sym.value) {
                outside[fi] = true;
            }
        }
    }
    match co.elf.relas(&co.bytes) {
        Ok(relas) => {
            for r in relas {
                let base = if r.r_sym == 0 {
                    0
                } else {
                    let dynamic = co
                        .elf
                        .sections
                        .get(r.link as usize)
                        .is_some_and(|s| s.sh_type == SHT_DYNSYM);
                    let table = if dynamic {
                        hsaco::elf::SymbolTable::Dynsym
                    } else {
                        hsaco::elf::SymbolTable::Symtab
                    };
                    match co
                        .symbols
                        .iter()
                        .find(|s| s.symbol.table == table && s.symbol.index == r.r_sym as usize)
                    {
                        Some(s) => s.symbol.value,
                        None => continue,
                    }
                };
                if let Some(fi) = index_of(base.wrapping_add(r.addend as u64)) {
                    outside[fi] = true;
                }
            }
        }
        Err(_) => outside.iter_mut().for_each(|o| *o = true),
    }
    let mut entered = outside.clone();
    for f in &prog.funcs {
        for (_, c) in &f.calls {
            if let Callee::Direct(g) = c {
                entered[*g] = true;
            }
        }
        for (_, e) in &f.exits {
            if let Exit::TailCall(g) = e {
                entered[*g] = true;
            }
        }
    }
    for p in &prog.pcrels {
        if let Some(fi) = index_of(p.target) {
            entered[fi] = true;
        }
    }
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.spec.kernel.is_some() {
            outside[fi] = false;
            entered[fi] = true;
        }
    }
    Callers {
        outside,
        unreachable: entered.iter().map(|e| !e).collect(),
    }
}

/// Why no register was found, with its named cause (issue 39 item 6), for a skip reason `why`
/// of a site of function `fi` that says no SGPR is provably free: the function cannot be
/// entered ([`UNREACHABLE`], counted apart), it uses its whole SGPR budget
/// ([`WHOLE_BUDGET`]: fewer of the SGPRs inserted code may use in it than the snippet needs are
/// left untouched by its own instructions, and no VGPR lane could hold a saved one), or the object has an unresolved call
/// ([`UNRESOLVED`]). Other reasons are returned unchanged.
pub fn skip_cause(
    callers: &Callers,
    sgprs: &crate::regs::SgprFacts,
    fi: usize,
    why: String,
) -> String {
    if !why.starts_with("no SGPR") {
        return why;
    }
    if callers.unreachable.get(fi).copied().unwrap_or(false) {
        return format!("{}: {why}", UNREACHABLE);
    }
    // The number of SGPRs the snippet asked for, as its reason states it (`(2 SGPRs)`).
    let need = why
        .rsplit_once('(')
        .and_then(|(_, t)| t.strip_suffix(" SGPRs)"))
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(1);
    if (sgprs.allowed(fi) & !sgprs.touched(fi)).count_ones() < need {
        return format!("{WHOLE_BUDGET}: {why}");
    }
    if sgprs.unresolved() {
        return format!("{UNRESOLVED}: {why}");
    }
    why
}

/// Prefix of the skip reason of a site that found no SGPR in an object with a call the analysis
/// cannot resolve ([`skip_cause`]): every SGPR is live at its calls of unknown code and at
/// every return (`-O0` code keeping callee addresses in VGPR lanes, calls through pointers).
pub const UNRESOLVED: &str = "the object has an unresolved call";

/// Prefix of the skip reason of a site in a function that uses every SGPR inserted code may
/// use ([`skip_cause`]).
pub const WHOLE_BUDGET: &str = "the function uses its whole SGPR budget";
