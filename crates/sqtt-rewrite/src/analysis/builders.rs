//! PC-relative address builders (part of [`crate::analysis`]): `s_getpc_b64` and the adds of a
//! linker-resolved offset that follow it, recognised in straight-line code, and the register
//! pair a `s_setpc_b64`/`s_swappc_b64` reads.

use super::Problem;
use crate::consteval::OffsetExpr;
use crate::insts::Insts;
use crate::regs::Sgprs;
use crate::reguse::{RegUse, RegUses};
use amdgpu_isa::{Flow, Instruction};
use std::collections::BTreeSet;

/// Whether SGPR `n` is in `s`.
pub(super) fn has(s: Sgprs, n: u16) -> bool {
    n < 128 && s >> n & 1 == 1
}

/// The pair `s[lo:lo+1]` at the top of the SGPRs an instruction writes (`s_getpc_b64`).
fn sgpr_pair_written(u: &RegUse) -> Option<u16> {
    let w = u.operand_writes();
    let lo = (w.checked_ilog2()? as u16).checked_sub(1)?;
    has(w, lo).then_some(lo)
}

/// Value of an inline integer constant or literal in scalar source field `name`, when the field
/// does not name register `reg` (ISA manuals, "Scalar ALU operands": 128..=192 → 0..=64,
/// 193..=208 → -1..=-16, 255 → literal).
pub(super) fn scalar_const(inst: &Instruction, name: &str) -> Option<u64> {
    let v = inst.field(name)?;
    match v {
        128..=192 => Some(u64::from(v - 128)),
        193..=208 => Some((-(i64::from(v) - 192)) as u64),
        255 => inst.literal(),
        _ => None,
    }
}

/// High half of a 64-bit add: the constant among `ssrc0`/`ssrc1`, sign-extended to 64 bits.
fn hi_const(inst: &Instruction) -> Option<u32> {
    scalar_const(inst, "ssrc1")
        .or_else(|| scalar_const(inst, "ssrc0"))
        .map(|v| v as u32)
}

const ADD_LO: [&str; 2] = ["s_add_u32", "s_add_co_u32"];
const ADD_HI: [&str; 2] = ["s_addc_u32", "s_add_co_ci_u32"];
const SUB_LO: [&str; 2] = ["s_sub_u32", "s_sub_co_u32"];
const SUB_HI: [&str; 2] = ["s_subb_u32", "s_sub_co_ci_u32"];

/// A recognised address builder inside one function, before classification of its use.
pub(super) struct Builder {
    pub(super) getpc: usize,
    pub(super) pair: u16,
    pub(super) target: u64,
    /// (instruction index, reloc) for the adds.
    pub(super) fixups: Vec<(usize, RelocPart)>,
    /// Index after which the pair holds the address.
    pub(super) done_at: usize,
    /// A second index after which the pair holds the same address, on another path: the add
    /// path of the signed form ([`match_signed`]), reached by a branch from inside the builder.
    pub(super) also_done: Option<usize>,
}

#[derive(Clone, Copy)]
pub(super) enum RelocPart {
    Lo,
    Hi,
    Whole,
    /// The literal of the offset computation of an evaluated builder ([`crate::consteval`]).
    Eval(OffsetExpr),
    /// The last instruction of an evaluated builder (nothing to re-encode).
    End,
}

/// Recognises `s_getpc_b64 s[a:a+1]` followed (in straight-line code) by the adds of a
/// linker-resolved offset: `s_add_u32`/`s_addc_u32` (gfx9-gfx11), `s_add_co_u32`/
/// `s_add_co_ci_u32` with `s_sext_i32_i16` and `s_wait_alu` in between (gfx12), or one
/// `s_add_nc_u64` with a 64-bit literal (gfx1250). Offsets are relative to the getpc address + 4.
pub(super) fn match_builder(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    i: usize,
) -> Result<Builder, Problem> {
    let addr = &insts.addr(i);
    let fail = |at: u64, why: &str| Problem {
        addr: at,
        why: format!("unrecognised PC-relative sequence from s_getpc at {addr:#x}: {why}"),
    };
    let a =
        sgpr_pair_written(&reg_use[i]).ok_or_else(|| fail(*addr, "no SGPR pair destination"))?;
    // (instruction index, 32-bit constant) of the low and high adds once seen.
    type Half = Option<(usize, u32)>;
    let (mut lo, mut hi): (Half, Half) = (None, None);
    // (low add index, offset register, subtract) of an evaluated builder.
    let mut evaluated: Option<(usize, u16, bool)> = None;
    for (j, (ja, inst)) in (i + 1..).zip(insts.range(i + 1..insts.len())) {
        if leaders.contains(&j) {
            return Err(fail(ja, "branch target inside the sequence"));
        }
        let (r, w) = (reg_use[j].operand_reads(), reg_use[j].operand_writes());
        let touches_r = has(r, a) || has(r, a + 1);
        let touches_w = has(w, a) || has(w, a + 1);
        if !touches_r && !touches_w {
            if inst.flow() != Flow::Fallthrough {
                if lo.is_none() && j > i + 1 {
                    if let Some(b) = match_signed(insts, reg_use, leaders, i, a, j)? {
                        return Ok(b);
                    }
                }
                return Err(fail(ja, "control flow before the adds complete"));
            }
            continue;
        }
        let m = inst.mnemonic();
        // Each add must read the half it writes (`s_add_u32 sa, sa, K`): an add of another
        // source into the pair is not an offset from the PC.
        let (reads_lo, reads_hi) = (has(r, a), has(r, a + 1));
        let (writes_lo, writes_hi) = (has(w, a), has(w, a + 1));
        if m == "s_add_nc_u64"
            && writes_lo
            && writes_hi
            && reads_lo
            && reads_hi
            && lo.is_none()
            && hi.is_none()
        {
            if inst.len() != 12 {
                return Err(fail(ja, "64-bit add without a 64-bit literal"));
            }
            let off = inst.literal().ok_or_else(|| fail(ja, "no literal"))?;
            return Ok(Builder {
                getpc: i,
                pair: a,
                target: (addr + 4).wrapping_add(off),
                fixups: vec![(j, RelocPart::Whole)],
                done_at: j,
                also_done: None,
            });
        }
        let low_op = ADD_LO.contains(&m) || SUB_LO.contains(&m);
        if low_op && writes_lo && !writes_hi && reads_lo && !reads_hi && lo.is_none() {
            let sub = SUB_LO.contains(&m);
            match inst.literal() {
                Some(v) if !sub => lo = Some((j, v as u32)),
                _ => {
                    // Tensile: the offset is computed in another SGPR ([`crate::consteval`]).
                    let other = ["ssrc0", "ssrc1"]
                        .iter()
                        .filter_map(|f| inst.field(f))
                        .find(|&v| v < 106 && v != u32::from(a))
                        .ok_or_else(|| fail(ja, "low add without a literal or offset register"))?;
                    evaluated = Some((j, other as u16, sub));
                    lo = Some((j, 0));
                }
            }
        } else if (ADD_HI.contains(&m) || SUB_HI.contains(&m))
            && writes_hi
            && !writes_lo
            && reads_hi
            && !reads_lo
            && lo.is_some()
            && hi.is_none()
            && SUB_HI.contains(&m) == evaluated.is_some_and(|e| e.2)
        {
            let v = hi_const(&inst).ok_or_else(|| fail(ja, "high add without a constant"))?;
            if let Some((add, s, sub)) = evaluated {
                let (root, expr) =
                    crate::consteval::offset_expr(insts, reg_use, leaders, (i, add), s, v, sub)
                        .map_err(|why| fail(ja, &why))?;
                let lit = insts.get(root).literal().unwrap_or(0) as u32;
                return Ok(Builder {
                    getpc: i,
                    pair: a,
                    target: (addr + 4).wrapping_add(expr.eval(lit) as u64),
                    fixups: vec![(root, RelocPart::Eval(expr)), (j, RelocPart::End)],
                    done_at: j,
                    also_done: None,
                });
            }
            hi = Some((j, v));
        } else if m == "s_sext_i32_i16" && writes_hi && !writes_lo && lo.is_none() {
            // gfx12 canonicalises the PC's high half first; the address is unchanged.
        } else {
            return Err(fail(ja, &format!("{m} uses the PC register pair")));
        }
        if let (Some((lj, lv)), Some((hj, hv))) = (lo, hi) {
            let off = (u64::from(hv) << 32) | u64::from(lv);
            return Ok(Builder {
                getpc: i,
                pair: a,
                target: (addr + 4).wrapping_add(off),
                fixups: vec![(lj, RelocPart::Lo), (hj, RelocPart::Hi)],
                done_at: j,
                also_done: None,
            });
        }
    }
    Err(fail(*addr, "sequence runs off the function"))
}

/// Whether scalar source `field` of `inst` is SGPR `r`.
fn is_sgpr(inst: &Instruction, field: &str, r: u16) -> bool {
    inst.field(field) == Some(u32::from(r))
}

/// Whether `inst` is `m` (one of the spellings) writing `dst` from `dst` (first source) and
/// `other` (SGPR `Some(r)`, or the inline constant 0 for `None`; second source), or, for an add
/// (`commutes`), in the other order too.
fn op_on(inst: &Instruction, m: &[&str], dst: u16, other: Option<u16>, commutes: bool) -> bool {
    let is_other = |f: &str| match other {
        Some(r) => is_sgpr(inst, f, r),
        None => scalar_const(inst, f) == Some(0),
    };
    m.contains(&inst.mnemonic())
        && is_sgpr(inst, "sdst", dst)
        && ((is_sgpr(inst, "ssrc0", dst) && is_other("ssrc1"))
            || (commutes && is_other("ssrc0") && is_sgpr(inst, "ssrc1", dst)))
}

/// rocBLAS's signed long branch (gfx90a `DGEMM_Aldebaran_*` kernels of rocBLAS 6.4 and 7.2):
/// after `s_getpc_b64 s[a:a+1]` (index `getpc`) and the offset's computation in `sN`,
/// `s_cmp_ge_i32 sN, 0; s_cbranch_scc1 P` (the branch at index `br`), then
/// `s_abs_i32 sN, sN; s_sub_u32 sa, sa, sN; s_subb_u32 sa+1, sa+1, 0; s_setpc_b64 s[a:a+1]`,
/// then `P: s_add_u32 sa, sa, sN; s_addc_u32 sa+1, sa+1, 0; s_setpc_b64 s[a:a+1]` (gfx12 `_co`
/// names). Whichever path the sign picks, the pair holds `getpc + 4 + sext(sN)`. `Ok(None)` when
/// the instructions are not this shape; an error when they are but the offset cannot be
/// evaluated or P is reached from elsewhere.
fn match_signed(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    getpc: usize,
    a: u16,
    br: usize,
) -> Result<Option<Builder>, Problem> {
    let n = insts.len();
    if br + 8 > n {
        return Ok(None);
    }
    let at = |k: usize| insts.get(k);
    let (cmp, branch) = (at(br - 1), at(br));
    let Some(s) = cmp.field("ssrc0").filter(|&v| v < 106).map(|v| v as u16) else {
        return Ok(None);
    };
    let (ba, p_addr) = (insts.addr(br), insts.addr(br + 5));
    let shape = cmp.mnemonic() == "s_cmp_ge_i32"
        && scalar_const(&cmp, "ssrc1") == Some(0)
        && s != a
        && s != a + 1
        && branch.mnemonic() == "s_cbranch_scc1"
        && branch.branch_target(ba) == Some(p_addr)
        && at(br + 1).mnemonic() == "s_abs_i32"
        && is_sgpr(&at(br + 1), "sdst", s)
        && is_sgpr(&at(br + 1), "ssrc0", s)
        && op_on(&at(br + 2), &SUB_LO, a, Some(s), false)
        && op_on(&at(br + 3), &SUB_HI, a + 1, None, false)
        && op_on(&at(br + 5), &ADD_LO, a, Some(s), true)
        && op_on(&at(br + 6), &ADD_HI, a + 1, None, true)
        && [br + 4, br + 7]
            .iter()
            .all(|&k| at(k).flow() == Flow::IndirectJump && pc_source(&reg_use[k]) == Some(a));
    if !shape {
        return Ok(None);
    }
    let fail = |why: String| Problem {
        addr: ba,
        why: format!(
            "signed long branch from s_getpc at {:#x}: {why}",
            insts.addr(getpc)
        ),
    };
    if let Some(k) = (br + 1..=br + 7).find(|&k| k != br + 5 && leaders.contains(&k)) {
        return Err(fail(format!(
            "branch target inside the sequence at {:#x}",
            insts.addr(k)
        )));
    }
    // The add path must be entered only from the branch: another way in would bring another
    // value of the pair or of sN.
    let into_p = insts
        .iter()
        .filter(|(x, inst)| inst.branch_target(*x) == Some(p_addr))
        .count();
    if into_p != 1 {
        return Err(fail(format!("{p_addr:#x} is entered from elsewhere too")));
    }
    let (root, expr) =
        crate::consteval::signed_expr(insts, reg_use, leaders, getpc, br - 1, s).map_err(fail)?;
    let lit = insts.get(root).literal().unwrap_or(0) as u32;
    Ok(Some(Builder {
        getpc,
        pair: a,
        target: (insts.addr(getpc) + 4).wrapping_add(expr.eval(lit) as u64),
        fixups: vec![(root, RelocPart::Eval(expr)), (br + 6, RelocPart::End)],
        done_at: br + 3,
        also_done: Some(br + 6),
    }))
}

/// The pair read by `s_setpc_b64`/`s_swappc_b64`-style instructions (lowest SGPR read).
pub(super) fn pc_source(u: &RegUse) -> Option<u16> {
    let r = u.operand_reads();
    (0..106u16).find(|&n| has(r, n) && has(r, n + 1))
}
