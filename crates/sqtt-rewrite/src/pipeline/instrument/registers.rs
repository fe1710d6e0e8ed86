//! The registers inserted code may take (part of the instrument stage,
//! [`super::instrument`]): the SGPRs of each function (allocation limits, gfx9 occupancy
//! budget), each kernel's VGPR budget, and the scope-filter flag SGPR of each function.

use crate::analysis::Program;
use crate::pipeline::kernel_funcs;
use crate::regs::{SgprFacts, Sgprs, ALL_SGPRS};
use crate::verbatim::Verbatim;
use amdgpu_isa::{Family, Target};
use hsaco::CodeObject;
use std::collections::BTreeMap;

/// SGPRs usable by code: s0..s101 on gfx9 (s102..s107 hold FLAT_SCRATCH, XNACK_MASK, VCC),
/// s0..s105 on gfx10+ (AMDGPUUsage / ISA manuals "SGPR allocation").
fn sgpr_limit(t: Target) -> u16 {
    match t.family() {
        Family::Gfx9 => 102,
        _ => 106,
    }
}

/// Largest SGPR allocation (including the 6 SGPRs of VCC, FLAT_SCRATCH and XNACK_MASK) kernel
/// `k` can have on gfx9 with the same waves per SIMD (hsaco `occupancy`, LLVM
/// `getOccupancyWithNumSGPRs`); at most 112, the gfx9 addressable maximum plus extras.
fn gfx9_sgpr_budget(co: &CodeObject, k: &hsaco::Kernel) -> u32 {
    let regs = k.descriptor.registers(&co.target);
    let now = regs.sgprs.unwrap_or(0);
    let lds = k.descriptor.group_segment_fixed_size;
    let occ = |s: u32| {
        hsaco::kd::occupancy(&co.target, regs.wave32, regs.vgprs_allocated, s, lds).waves_per_simd
    };
    let base = occ(now);
    let mut best = now;
    let mut s = now;
    while s + 8 <= 112 {
        s += 8;
        if occ(s) == base {
            best = s;
        } else {
            break;
        }
    }
    best
}

/// Most architected VGPRs kernel `k` can be given with the same waves per SIMD (hsaco
/// `occupancy`, LLVM `getOccupancyWithNumVGPRs`), at most 256 (the VGPRs `v_writelane_b32`
/// addresses). The gfx90a family keeps its allocation: its granule also covers the AGPRs that
/// follow `accum_offset`, so growing it adds no architected VGPR.
pub(super) fn vgpr_budget(co: &CodeObject, k: &hsaco::Kernel) -> u32 {
    let regs = k.descriptor.registers(&co.target);
    if co.target.has_gfx90a_insts() {
        return regs.arch_vgprs;
    }
    let lds = k.descriptor.group_segment_fixed_size;
    let sgprs = regs.sgprs.unwrap_or(0);
    let occ = |v: u32| hsaco::kd::occupancy(&co.target, regs.wave32, v, sgprs, lds).waves_per_simd;
    let step = hsaco::kd::vgpr_encoding_granule(&co.target, regs.wave32);
    let base = occ(regs.vgprs_allocated);
    let mut best = regs.vgprs_allocated;
    while best + step <= 256 && occ(best + step) == base {
        best += step;
    }
    best
}

/// SGPRs inserted code may use in each function at all (issue 12 item 2): s0..s101 on gfx9 and
/// s0..s105 on gfx10+ ([`sgpr_limit`]: every gfx10+ wave has the full SGPR file); on gfx9 also
/// below every reaching kernel's [`gfx9_sgpr_budget`] minus the 6 SGPRs of VCC, FLAT_SCRATCH and
/// XNACK_MASK, so no kernel loses waves per SIMD (functions no kernel reaches: every kernel's).
pub(super) fn allocation_masks(prog: &Program, co: &CodeObject) -> Vec<Sgprs> {
    let n = prog.funcs.len();
    let limit = u32::from(sgpr_limit(prog.target));
    let mask = |top: u32| -> Sgprs { (1u128 << top.min(limit)) - 1 };
    if prog.target.family() != Family::Gfx9 {
        // gfx1010-gfx1013: a SALU write of an SGPR that a VMEM/DS/FLAT instruction still reads
        // needs `s_waitcnt_depctr` (LLVM `GCNHazardRecognizer::fixVMEMtoScalarWriteHazards`,
        // `amdgpu_isa::hazard` rule vmem-sgpr-salu-write): scratch never takes an SGPR that a
        // memory instruction of the function reads.
        let vmem_hazard = matches!(
            prog.target.name(),
            "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
        );
        // gfx12 (rule valu-sgpr-read): an SGPR a VALU wrote may be scratch; the address-trace
        // loop, the only snippet with a VALU reading scratch, waits `depctr_va_sdst(0)` first
        // (`snippets::Emitter`).
        return prog
            .funcs
            .iter()
            .map(|f| {
                let avoid: Sgprs = if vmem_hazard {
                    f.insts
                        .iter()
                        .zip(&f.reg_use)
                        .filter(|((_, i), _)| i.memory().is_some())
                        .fold(0, |a, (_, u)| a | u.operand_reads())
                } else {
                    0
                };
                mask(limit) & !avoid
            })
            .collect();
    }
    let mut top: Vec<Option<u32>> = vec![None; n];
    let mut lowest = limit;
    for (fi, k) in kernel_funcs(prog, co) {
        let b = gfx9_sgpr_budget(co, k).saturating_sub(6);
        lowest = lowest.min(b);
        for g in prog.reachable(fi) {
            top[g] = Some(top[g].map_or(b, |t| t.min(b)));
        }
    }
    top.into_iter().map(|t| mask(t.unwrap_or(lowest))).collect()
}

/// The scope-filter flag SGPR of a function, or why it has none (the skip reason of its
/// scope-filtered sites).
pub(super) type ScopeFlag = Result<u8, &'static str>;

/// Why a function has no scope flag: no SGPR is free in its call graph.
pub(super) const NO_SCOPE_SGPR: &str =
    "scope filtering: no SGPR is untouched by every function of this kernel call graph, so it has no scope flag";

/// Why a function has no scope flag: a kernel left alone reaches it.
const FLAGLESS_CALLER: &str = "scope filtering: a kernel left alone (its entry computes no scope flag) may call this function, so the flag is not set on every call";

/// The scope-filter flag SGPR of each function (issue 12 item 4; spec "Scope filtering":
/// computed once at kernel entry, read by every marker). Kernels that reach a common function
/// form one call graph and share one flag: the lowest SGPR that no function of the call graph
/// touches and that every one of them may use. Functions no kernel reaches form their own call
/// graph. A function without a flag gets the reason instead: its call graph has no such SGPR,
/// or a kernel left alone reaches it (that kernel's entry computes no flag, so a guard there
/// would read whatever the SGPR holds). Every flag is then withheld from the scratch registers
/// of every function.
pub(super) fn scope_flags(
    prog: &Program,
    verbatim: &Verbatim,
    sgprs: &mut SgprFacts,
) -> Vec<ScopeFlag> {
    let n = prog.funcs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut flagless = vec![false; n];
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.spec.kernel.is_none() {
            continue;
        }
        let left_alone = verbatim.is_left_alone(fi);
        for g in prog.reachable(fi) {
            let (a, b) = (root(&mut parent, fi), root(&mut parent, g));
            parent[a] = b;
            flagless[g] |= left_alone && g != fi;
        }
    }
    let mut untouched: BTreeMap<usize, Sgprs> = BTreeMap::new();
    for fi in 0..n {
        let r = root(&mut parent, fi);
        let e = untouched.entry(r).or_insert(ALL_SGPRS);
        *e &= sgprs.allowed(fi) & !sgprs.touched(fi);
    }
    let flag_of: BTreeMap<usize, u8> = untouched
        .into_iter()
        .filter(|(_, free)| *free != 0)
        .map(|(r, free)| (r, free.trailing_zeros() as u8))
        .collect();
    let flags: Vec<ScopeFlag> = (0..n)
        .map(|fi| match flag_of.get(&root(&mut parent, fi)) {
            _ if flagless[fi] => Err(FLAGLESS_CALLER),
            Some(&r) => Ok(r),
            None => Err(NO_SCOPE_SGPR),
        })
        .collect();
    sgprs.forbid(flags.iter().flatten().fold(0, |a, &r| a | 1u128 << r));
    flags
}
