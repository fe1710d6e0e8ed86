//! [`Check::Descriptor`]: kernel descriptors (AMDGPUUsage "Kernel Descriptor") are unchanged
//! except the register counts, which must cover what the rewritten kernel and its callees use.

use rayon::prelude::*;
use std::collections::BTreeSet;

use amdgpu_isa::Flow;
use hsaco::CodeObject;

use crate::program::{Program, Regs};
use crate::{Check, Finding};

/// Highest (SGPR, VGPR, AGPR) numbers + 1 used by some code.
pub(crate) type Usage = (u32, u32, u32);

/// The larger of two usages, per register file.
fn max_usage(a: Usage, b: Usage) -> Usage {
    (a.0.max(b.0), a.1.max(b.1), a.2.max(b.2))
}

/// Highest (SGPR, VGPR, AGPR) numbers + 1 used by a set of instructions, from their registers.
fn usage(regs: impl Iterator<Item = Regs>) -> Usage {
    let mut m = (0u32, 0u32, 0u32);
    for r in regs {
        m.0 = m.0.max(u32::from(r.sgpr_top()));
        m.1 = m.1.max(u32::from(r.vgpr_top));
        m.2 = m.2.max(u32::from(r.agpr_top));
    }
    m
}

/// Functions reachable from `root` through calls (any unresolved call: every function).
fn callees(p: &Program, root: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::from([root]);
    let mut stack = vec![root];
    while let Some(fi) = stack.pop() {
        let f = &p.funcs[fi];
        let mut next = Vec::new();
        for b in &f.builders {
            let Some(g) = f.orig.get(b.getpc) else {
                continue;
            };
            if let Some(t) = b.target_with(g.addr, |k| f.orig.get(k).map(|o| f.inst(o))) {
                next.extend(p.func_at(t));
            }
        }
        for o in f.orig.iter().filter(|o| f.regs(o).has(Regs::CALL)) {
            let i = f.inst(o);
            if i.flow() == Flow::Call {
                match i.branch_target(o.addr) {
                    Some(t) => next.extend(p.func_at(t)),
                    None if f.builders.is_empty() => next.extend(0..p.funcs.len()),
                    None => {}
                }
            }
        }
        for x in next {
            if seen.insert(x) {
                stack.push(x);
            }
        }
    }
    seen
}

/// Register usage (original, rewritten) of every function of `p`, in its order, computed once
/// (kernels share callees), in parallel.
pub(crate) fn usage_per_function(p: &Program) -> Vec<(Usage, Usage)> {
    p.funcs
        .par_iter()
        .map(|g| {
            let a = usage(g.orig.iter().map(|x| *g.regs(x)));
            // A copy with the original's bytes has the original's registers (decoded once);
            // any other copy (a relocated branch, a changed instruction) is decoded.
            let b = usage(
                g.orig
                    .iter()
                    .filter_map(|x| {
                        if x.copied_verbatim() {
                            Some(*g.regs(x))
                        } else {
                            g.copy(x).map(|n| Regs::of_inst(&n.inst))
                        }
                    })
                    .chain(g.inserted_regs(0..g.inserted.len()).copied()),
            );
            (a, b)
        })
        .collect()
}

/// Checks the descriptor of original kernel `ok` against its rewritten `nk`, whose function is
/// `p.funcs[fi]` (one pair of [`crate::program::kernel_pairs`]); `func_use`: the
/// [`usage_per_function`] of `p`.
pub(crate) fn check_descriptor(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    func_use: &[(Usage, Usage)],
    (ok, nk, fi): (&hsaco::Kernel, &hsaco::Kernel, usize),
    findings: &mut Vec<Finding>,
) {
    let gen = n.target.generation();
    let f = &p.funcs[fi];
    let kf = |message: String| Finding {
        check: Check::Descriptor,
        function: Some(ok.name.clone()),
        original_address: Some(ok.entry),
        new_address: Some(nk.entry),
        message,
    };
    if Some(nk.entry) != f.new_start {
        findings.push(kf(format!(
            "kernel_code_entry_byte_offset points at {:#x}, the kernel starts at {:#x}",
            nk.entry,
            f.new_start.unwrap_or_default()
        )));
    }
    if nk.entry % 256 != 0 {
        findings.push(kf("kernel entry is not 256-byte aligned".into()));
    }
    // Every field except entry offset, SGPR granule, a grown VGPR granule (VGPR lanes that
    // hold saved SGPRs, issue 12; not on the gfx90a family, whose granule also counts
    // AGPRs) and gfx11+ INST_PREF_SIZE is unchanged. Waves per SIMD are checked below.
    let mut want = ok.descriptor.clone();
    want.kernel_code_entry_byte_offset = nk.descriptor.kernel_code_entry_byte_offset;
    want.set_granulated_sgpr_count(nk.descriptor.granulated_sgpr_count());
    let vgpr_granule = nk.descriptor.granulated_vgpr_count();
    if !n.target.has_gfx90a_insts() && vgpr_granule > ok.descriptor.granulated_vgpr_count() {
        want.set_granulated_vgpr_count(vgpr_granule);
    }
    if let Some(v) = nk.descriptor.inst_pref_size(gen) {
        want.set_inst_pref_size(gen, v);
    }
    if want.encode() != nk.descriptor.encode() {
        let (a, b) = (want.encode(), nk.descriptor.encode());
        let at = a
            .iter()
            .zip(b.iter())
            .position(|(x, y)| x != y)
            .unwrap_or_default();
        findings.push(kf(format!("descriptor byte {at:#x} changed (only the entry offset, SGPR granule, a grown VGPR granule and INST_PREF_SIZE may change)")));
    }
    // Kernarg preload (AMDGPUUsage "Preloaded Kernel Arguments"): firmware may enter at
    // entry + 256, so the kernel's first 256 bytes keep their layout: no insertion there and
    // every original instruction at its original offset. Bytes are compared by the alignment
    // check (relocated PC-relative fields may differ); bytes past a shorter body belong to
    // other functions.
    // Only kernels that carry the prologue: an `s_branch` inside the first 256 bytes to
    // entry + 256 (gfx90a/gfx942/gfx950 emit it; gfx1250 preloads without one).
    // `f.orig` ascends by address: only the instructions of those 256 bytes are looked at,
    // and only for kernels that preload.
    let has_prologue = || {
        let first = f.orig.partition_point(|x| x.addr < ok.entry);
        f.orig[first..]
            .iter()
            .take_while(|x| x.addr - ok.entry < 256)
            .any(|x| {
                let i = f.inst(x);
                matches!(i.flow(), Flow::Branch { conditional: false })
                    && i.branch_target(x.addr) == Some(ok.entry + 256)
            })
    };
    if ok.descriptor.kernarg_preload_length() > 0 && has_prologue() {
        let moved = f
            .orig
            .iter()
            .take_while(|x| x.addr - ok.entry < 256)
            .find(|x| {
                f.copy(x)
                    .is_none_or(|n| n.addr.wrapping_sub(nk.entry) != x.addr - ok.entry)
            });
        if let Some(x) = moved {
            let at = f.copy(x).map_or("nowhere".to_string(), |n| {
                format!("+{:#x}", n.addr.wrapping_sub(nk.entry))
            });
            findings.push(kf(format!("kernarg-preload kernel: instruction at +{:#x} of the first 256 bytes moved to {at}", x.addr - ok.entry)));
        }
    }
    // Register coverage of the kernel and its callees.
    let (mut orig_use, mut new_use) = ((0, 0, 0), (0, 0, 0));
    for i in callees(p, fi) {
        let (a, b) = func_use[i];
        orig_use = max_usage(orig_use, a);
        new_use = max_usage(new_use, b);
    }
    let waves =
        |co: &CodeObject, k: &hsaco::Kernel| k.descriptor.occupancy(&co.target).waves_per_simd;
    let (wo, wn) = (waves(o, ok), waves(n, nk));
    if wn < wo {
        findings.push(kf(format!(
            "waves per SIMD drop from {wo} to {wn} (occupancy must not be lowered)"
        )));
    }
    let regs = nk.descriptor.registers(&n.target);
    let vgpr_cap = if n.target.has_gfx90a_insts() {
        regs.arch_vgprs
    } else {
        regs.vgprs_allocated
    };
    let agpr_cap = if n.target.has_gfx90a_insts() {
        regs.agprs
    } else {
        regs.vgprs_allocated
    };
    if new_use.1 > vgpr_cap && new_use.1 > orig_use.1 {
        findings.push(kf(format!(
            "descriptor allocates {vgpr_cap} VGPRs, code uses {}",
            new_use.1
        )));
    }
    if new_use.2 > agpr_cap && new_use.2 > orig_use.2 {
        findings.push(kf(format!(
            "descriptor allocates {agpr_cap} AGPRs, code uses {}",
            new_use.2
        )));
    }
    if let Some(s) = regs.sgprs {
        if new_use.0 > s && new_use.0 > orig_use.0 {
            findings.push(kf(format!(
                "descriptor allocates {s} SGPRs, code uses {}",
                new_use.0
            )));
        }
    }
}
