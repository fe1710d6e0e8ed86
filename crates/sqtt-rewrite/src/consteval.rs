//! Constant evaluation of scalar arithmetic for address builders whose offset is computed in
//! another SGPR (issue 37): Tensile's long branch
//! `s_getpc_b64 s[a:a+1]; s_add_i32 sN, LIT, 4; s_add_u32 sa, sa, sN; s_addc_u32 sa+1, sa+1, 0;
//! s_setpc_b64 s[a:a+1]` and its backward form (`s_abs_i32 sN, sN`, then `s_sub_u32` /
//! `s_subb_u32`), on gfx12 with the `_co` names.
//!
//! The offset register's value is found by walking back from the add over its reaching
//! definitions (straight-line code after the `s_getpc`, no branch target in between): each must
//! be `s_mov_b32`, `s_add_*`, `s_sub_*`, `s_abs_i32` or `s_lshl_b32` of the register and inline
//! constants, ending in exactly one 32-bit literal. The result is an [`OffsetExpr`]: the
//! builder's byte offset as a function of that literal, so the layout can re-aim the literal
//! ([`OffsetExpr::solve`]) when code moves. Semantics: ISA manuals, "SOP1"/"SOP2" (32-bit
//! integer arithmetic; `s_addc_u32`/`s_subb_u32` add/subtract the carry/borrow in SCC).

use crate::insts::Insts;
use crate::reguse::RegUses;
use amdgpu_isa::{Flow, Instruction};
use std::collections::BTreeSet;

/// One step of the computation of the offset register from the literal (32-bit wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainOp {
    /// `x + c`.
    Add(i32),
    /// `x - c`.
    Sub(i32),
    /// `c - x`.
    SubFrom(i32),
    /// `|x|` (`s_abs_i32`).
    Abs,
    /// `x << k` (`s_lshl_b32`, k in 0..32).
    Shl(u8),
}

/// Most steps an offset computation may take (Tensile uses two).
pub const MAX_OPS: usize = 4;

/// The byte offset (relative to the `s_getpc` address + 4) of an evaluated builder as a
/// function of one literal: `v = ops(literal)` (32 bits), then the 64-bit value `hi:v` is added
/// to (or, with `sub`, subtracted from) the PC pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetExpr {
    ops: [Option<ChainOp>; MAX_OPS],
    /// High 32 bits added with carry (or subtracted with borrow): the constant of the high add.
    pub hi: u32,
    /// `s_sub_u32`/`s_subb_u32` instead of the adds.
    pub sub: bool,
    /// The 32-bit value is a signed offset, sign-extended to 64 bits (`hi` and `sub` unused):
    /// rocBLAS's signed long branch, whose `s_cmp_ge_i32 sN, 0` picks the add form for an
    /// offset ≥ 0 and the `s_abs_i32` + subtract form below 0; both paths reach
    /// `getpc + 4 + sext(v)` ([`signed_expr`]).
    pub signed: bool,
}

impl OffsetExpr {
    /// The offset for literal value `lit` (bytes, two's complement).
    pub fn eval(&self, lit: u32) -> i64 {
        let mut x = lit;
        for op in self.ops.iter().flatten() {
            x = match *op {
                ChainOp::Add(c) => x.wrapping_add(c as u32),
                ChainOp::Sub(c) => x.wrapping_sub(c as u32),
                ChainOp::SubFrom(c) => (c as u32).wrapping_sub(x),
                ChainOp::Abs => (x as i32).unsigned_abs(),
                ChainOp::Shl(k) => x << (k & 31),
            };
        }
        if self.signed {
            return i64::from(x as i32);
        }
        let v = (u64::from(self.hi) << 32) | u64::from(x);
        if self.sub {
            v.wrapping_neg() as i64
        } else {
            v as i64
        }
    }

    /// The literal that makes the offset `off`, found from `old` (the input's literal) by the
    /// expression's slope at `old`, and checked by evaluation; `None` when no literal on that
    /// line gives `off` (e.g. a backward branch would have to become a forward one).
    pub fn solve(&self, old: u32, off: i64) -> Option<u32> {
        let at = self.eval(old);
        let slope = self.eval(old.wrapping_add(1)).wrapping_sub(at);
        if slope == 0 {
            return None;
        }
        let delta = off.wrapping_sub(at);
        if delta % slope != 0 {
            return None;
        }
        let cand = i64::from(old).wrapping_add(delta / slope);
        let cand = u32::try_from(cand & 0xffff_ffff).ok()?;
        (self.eval(cand) == off).then_some(cand)
    }
}

/// Scalar source value of field `name` when it is an inline integer constant (ISA manuals,
/// "Scalar ALU operands": 128..=192 → 0..=64, 193..=208 → -1..=-16).
fn inline(inst: &Instruction, name: &str) -> Option<i32> {
    match inst.field(name)? {
        v @ 128..=192 => Some(v as i32 - 128),
        v @ 193..=208 => Some(192 - v as i32),
        _ => None,
    }
}

/// What a scalar source field holds.
enum Src {
    Literal,
    Inline(i32),
    Sgpr(u16),
}

fn src(inst: &Instruction, name: &str) -> Option<Src> {
    let v = inst.field(name)?;
    match v {
        0..=105 => Some(Src::Sgpr(v as u16)),
        255 => inst.literal().map(|_| Src::Literal),
        _ => inline(inst, name).map(Src::Inline),
    }
}

/// The literal and the steps from it to the value of `s` just before instruction `at`.
type Chain = (usize, Vec<ChainOp>);

/// Walks back from `at` (exclusive) to `first` (inclusive) for the reaching definition of SGPR
/// `s` and evaluates it (see the module docs). `leaders` are the function's branch targets; a
/// definition reached through one is not straight-line. Errors say why, for the report.
fn chain_of(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    first: usize,
    at: usize,
    s: u16,
) -> Result<Chain, String> {
    let mut k = at;
    while k > first {
        k -= 1;
        if leaders.contains(&(k + 1)) && k + 1 < at {
            return Err("branch target inside the offset computation".into());
        }
        let inst = insts.get(k);
        if inst.flow() != Flow::Fallthrough {
            return Err(format!("{} inside the offset computation", inst.mnemonic()));
        }
        let w = reg_use[k].operand_writes();
        if s >= 128 || w >> s & 1 == 0 {
            continue;
        }
        let m = inst.mnemonic();
        let var = |name: &str| -> Result<Chain, String> {
            match src(&inst, name) {
                Some(Src::Literal) => Ok((k, Vec::new())),
                Some(Src::Sgpr(r)) => chain_of(insts, reg_use, leaders, first, k, r),
                _ => Err(format!("{m} s{s} has no register or literal source")),
            }
        };
        let is_var = |name: &str| matches!(src(&inst, name), Some(Src::Literal | Src::Sgpr(_)));
        let konst = |name: &str| match src(&inst, name) {
            Some(Src::Inline(c)) => Ok(c),
            _ => Err(format!(
                "{m} s{s} combines two values that are not constants"
            )),
        };
        let (mut chain, op) = match m {
            "s_mov_b32" => (var("ssrc0")?, None),
            "s_add_i32" | "s_add_u32" | "s_add_co_i32" | "s_add_co_u32" => {
                if is_var("ssrc0") {
                    (var("ssrc0")?, Some(ChainOp::Add(konst("ssrc1")?)))
                } else {
                    (var("ssrc1")?, Some(ChainOp::Add(konst("ssrc0")?)))
                }
            }
            "s_sub_i32" | "s_sub_u32" | "s_sub_co_i32" | "s_sub_co_u32" => {
                if is_var("ssrc0") {
                    (var("ssrc0")?, Some(ChainOp::Sub(konst("ssrc1")?)))
                } else {
                    (var("ssrc1")?, Some(ChainOp::SubFrom(konst("ssrc0")?)))
                }
            }
            "s_abs_i32" => (var("ssrc0")?, Some(ChainOp::Abs)),
            "s_lshl_b32" => {
                let sh = konst("ssrc1")?;
                (var("ssrc0")?, Some(ChainOp::Shl((sh & 31) as u8)))
            }
            _ => return Err(format!("{m} writes the offset register s{s}")),
        };
        chain.1.extend(op);
        if chain.1.len() > MAX_OPS {
            return Err(format!("offset computed in more than {MAX_OPS} steps"));
        }
        return Ok(chain);
    }
    Err(format!("s{s} is not set between the s_getpc and its add"))
}

/// The literal instruction and the [`OffsetExpr`] of a builder whose low add (index `add`,
/// after the `s_getpc` at `getpc`) adds (`sub`: subtracts) SGPR `s`, with high constant `hi`.
pub fn offset_expr(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    (getpc, add): (usize, usize),
    s: u16,
    hi: u32,
    sub: bool,
) -> Result<(usize, OffsetExpr), String> {
    let (root, steps) = chain_of(insts, reg_use, leaders, getpc + 1, add, s)?;
    let mut ops = [None; MAX_OPS];
    for (slot, op) in ops.iter_mut().zip(steps) {
        *slot = Some(op);
    }
    Ok((
        root,
        OffsetExpr {
            ops,
            hi,
            sub,
            signed: false,
        },
    ))
}

/// The literal instruction and the signed [`OffsetExpr`] of SGPR `s` as it is just before
/// instruction `at` (the `s_cmp_ge_i32 sN, 0` of rocBLAS's signed long branch), computed after
/// the `s_getpc` at `getpc`.
pub fn signed_expr(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    getpc: usize,
    at: usize,
    s: u16,
) -> Result<(usize, OffsetExpr), String> {
    let (root, mut expr) = offset_expr(insts, reg_use, leaders, (getpc, at), s, 0, false)?;
    expr.signed = true;
    Ok((root, expr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(ops: &[ChainOp], sub: bool) -> OffsetExpr {
        let mut o = [None; MAX_OPS];
        for (s, op) in o.iter_mut().zip(ops) {
            *s = Some(*op);
        }
        OffsetExpr {
            ops: o,
            hi: 0,
            sub,
            signed: false,
        }
    }

    /// Tensile's forward long branch: offset = LIT + 4; re-aimed by the slope (+1).
    #[test]
    fn forward_long_branch() {
        let e = expr(&[ChainOp::Add(4)], false);
        assert_eq!(e.eval(0x85c), 0x860);
        assert_eq!(e.solve(0x85c, 0x900), Some(0x8fc));
    }

    /// The backward form: `s_add_i32 sN, LIT, 4; s_abs_i32 sN, sN; s_sub_u32; s_subb_u32`:
    /// offset = -|LIT + 4|, so a backward offset stays expressible and a forward one is not.
    #[test]
    fn backward_long_branch() {
        let e = expr(&[ChainOp::Add(4), ChainOp::Abs], true);
        let lit = (-0x1004i32) as u32; // LIT + 4 = -0x1000
        assert_eq!(e.eval(lit), -0x1000);
        let new = e.solve(lit, -0x1200).expect("backward offset");
        assert_eq!(e.eval(new), -0x1200);
        assert_eq!(e.solve(lit, 0x40), None);
    }

    /// The signed form (rocBLAS gfx90a DGEMM): offset = sext(LIT + 4) either way, so a forward
    /// branch may be re-aimed backward and the other way round, unlike the two unsigned forms.
    #[test]
    fn signed_long_branch() {
        let e = OffsetExpr {
            signed: true,
            ..expr(&[ChainOp::Add(4)], false)
        };
        assert_eq!(e.eval(0x85c), 0x860);
        assert_eq!(e.eval((-0x1004i32) as u32), -0x1000);
        let back = e.solve(0x85c, -0x200).expect("now backward");
        assert_eq!(back, (-0x204i32) as u32);
        assert_eq!(e.solve(back, 0x900), Some(0x8fc));
    }

    /// A shifted offset re-aims only to multiples of the slope.
    #[test]
    fn shifted_offset() {
        let e = expr(&[ChainOp::Shl(2)], false);
        assert_eq!(e.eval(0x10), 0x40);
        assert_eq!(e.solve(0x10, 0x80), Some(0x20));
        assert_eq!(e.solve(0x10, 0x82), None);
    }
}
