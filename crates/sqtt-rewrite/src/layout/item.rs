//! The items of the new `.text`, one type per kind of PC-relative code, each knowing its size
//! and encoding itself at its final address (the pattern of iced-x86's `BlockEncoder`: pass 1 of
//! [`super::lay_out`] adds up sizes to assign addresses, pass 2 asks every item for its bytes).
//!
//! Kinds (docs/background/rewriting.md, "Layout and relocation"):
//! - [`Fixed`]: nothing PC-relative (copied as decoded);
//! - [`ShortBranch`]: a SOPP branch to an original instruction (simm16 dwords, landing rule);
//! - [`BranchToIsland`]: a SOPP branch now aimed at the island that trails it;
//! - [`CallEntry`]: `s_call_b64` to a function entry (its whole inserted block runs);
//! - [`AddPc64`]: gfx1250 `s_add_pc_i64` with a 64-bit literal offset;
//! - [`PcRelPart`]: one add of an `s_getpc_b64` / `s_get_pc_i64` address builder;
//! - [`Island`]: a long-branch island or a landing block after a SOPP branch.
//!
//! An original instruction keeps its length whatever its new address (literals are never
//! added or removed; [`crate::idiom::with_high_offset`] keeps inline constants inline), and an
//! island's size never depends on where it lands ([`super::island_code`]); pass 2 checks that
//! every item wrote exactly its size.

use super::{code_len, island_code, Layout, LayoutError, PcRel, PcRelUse};
use amdgpu_isa::{build, EncodeError, Instruction, Target};

/// The final addresses an item needs in pass 2.
pub(super) struct Resolver<'a> {
    /// Where every original instruction went.
    pub layout: &'a Layout,
    /// Address builders ([`super::TextPlan::pcrels`]).
    pub pcrels: &'a [PcRel],
    /// New address of each island's first jump-or-marker instruction, in output order (bytes).
    pub islands: &'a [u64],
}

impl Resolver<'_> {
    /// New address of a branch to original `target` (the landing rule); the error names the
    /// branch at original address `old`.
    fn branch(&self, old: u64, target: u64) -> Result<u64, LayoutError> {
        self.layout
            .map_branch(target)
            .ok_or(LayoutError::BadTarget { at: old, target })
    }

    /// Offset (bytes) from the builder's `s_getpc` + 4 to its mapped target.
    fn pcrel_offset(&self, old: u64, idiom: usize) -> Result<i64, LayoutError> {
        let p = self
            .pcrels
            .get(idiom)
            .ok_or(LayoutError::BadTarget { at: old, target: 0 })?;
        let target = match p.use_kind {
            PcRelUse::Data => Some(p.target),
            PcRelUse::Call => self.layout.map_addr(p.target),
            PcRelUse::Branch => self.layout.map_branch(p.target),
        }
        .ok_or(LayoutError::BadTarget {
            at: p.getpc_addr,
            target: p.target,
        })?;
        let getpc_new = self
            .layout
            .new_inst_addr(p.getpc_addr)
            .ok_or(LayoutError::BadTarget {
                at: old,
                target: p.getpc_addr,
            })?;
        Ok(target.wrapping_sub(getpc_new + 4) as i64)
    }
}

/// Something of the new `.text` with a size fixed before addresses are known.
pub(super) trait Item {
    /// Size in bytes. Errors: code whose size cannot be known (a long jump that cannot be built).
    fn size(&self) -> Result<u64, LayoutError>;
    /// Appends exactly [`Item::size`] bytes for final address `at` (bytes). Errors name the
    /// original address of the code that cannot be encoded.
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError>;
}

/// The encoder's error for the instruction at original address `old`.
fn encode_error(old: u64) -> impl Fn(EncodeError) -> LayoutError {
    move |e| LayoutError::Encode {
        at: old,
        why: e.to_string(),
    }
}

/// Appends `inst` (from original address `old`) re-aimed, at new address `at`, at new target
/// `t` (SOPP simm16 or `s_call_b64` offset). Out of range is [`LayoutError::OutOfRange`] (which
/// the lay-out stage answers by relaxing the branch) only when `relaxable`; otherwise an
/// encoding error.
fn retarget(
    (old, inst): (u64, &Instruction),
    at: u64,
    t: u64,
    relaxable: bool,
    out: &mut Vec<u8>,
) -> Result<(), LayoutError> {
    let fixed = inst.with_branch_target(at, t).map_err(|e| match e {
        EncodeError::BranchOutOfRange { .. } if relaxable => {
            LayoutError::OutOfRange { at: vec![old] }
        }
        e => encode_error(old)(e),
    })?;
    out.extend_from_slice(fixed.bytes());
    Ok(())
}

/// An original instruction with nothing PC-relative.
pub(super) struct Fixed<'a>(pub &'a Instruction);

impl Item for Fixed<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.0.len() as u64)
    }
    fn encode(&self, _at: u64, _r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        out.extend_from_slice(self.0.bytes());
        Ok(())
    }
}

/// A SOPP branch at original address `old` to the original instruction at `target`; out of
/// simm16 range is [`LayoutError::OutOfRange`], which the lay-out stage answers by relaxing it.
pub(super) struct ShortBranch<'a> {
    pub old: u64,
    pub inst: &'a Instruction,
    pub target: u64,
}

impl Item for ShortBranch<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.inst.len() as u64)
    }
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let t = r.branch(self.old, self.target)?;
        retarget((self.old, self.inst), at, t, true, out)
    }
}

/// A SOPP branch aimed at island number `island` (in output order), which trails it.
pub(super) struct BranchToIsland<'a> {
    pub old: u64,
    pub inst: &'a Instruction,
    pub island: usize,
}

impl Item for BranchToIsland<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.inst.len() as u64)
    }
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let t = *r.islands.get(self.island).ok_or(LayoutError::BadTarget {
            at: self.old,
            target: 0,
        })?;
        retarget((self.old, self.inst), at, t, false, out)
    }
}

/// `s_call_b64` to the function entry at original `target`: lands on the entry's inserted block,
/// so the callee's entry marker runs.
pub(super) struct CallEntry<'a> {
    pub old: u64,
    pub inst: &'a Instruction,
    pub target: u64,
}

impl Item for CallEntry<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.inst.len() as u64)
    }
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let t = r
            .layout
            .map_addr(self.target)
            .ok_or(LayoutError::BadTarget {
                at: self.old,
                target: self.target,
            })?;
        retarget((self.old, self.inst), at, t, false, out)
    }
}

/// gfx1250 `s_add_pc_i64` with a 64-bit literal: the offset from the next instruction to the
/// mapped `target` (landing rule).
pub(super) struct AddPc64<'a> {
    pub old: u64,
    pub inst: &'a Instruction,
    pub target: u64,
}

impl Item for AddPc64<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.inst.len() as u64)
    }
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let t = r.branch(self.old, self.target)?;
        let off = t.wrapping_sub(at + self.inst.len() as u64);
        let fixed = self
            .inst
            .with_literal(off)
            .map_err(encode_error(self.old))?;
        out.extend_from_slice(fixed.bytes());
        Ok(())
    }
}

/// Which part of an address builder's offset an add carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Low 32 bits, in the add's 32-bit literal.
    Lo,
    /// High 32 bits, in a literal or an inline constant 0 / -1 (SOP2 `ssrc0`/`ssrc1`).
    Hi,
    /// All 64 bits, in a 64-bit literal (gfx1250 `s_add_nc_u64`).
    Whole,
    /// The literal an evaluated offset is computed from ([`crate::consteval::OffsetExpr`]).
    Eval(crate::consteval::OffsetExpr),
}

/// One add of the address builder `idiom` ([`super::TextPlan::pcrels`]).
pub(super) struct PcRelPart<'a> {
    pub old: u64,
    pub inst: &'a Instruction,
    pub idiom: usize,
    pub part: Part,
}

impl Item for PcRelPart<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.inst.len() as u64)
    }
    fn encode(&self, _at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let off = r.pcrel_offset(self.old, self.idiom)? as u64;
        let fixed = match self.part {
            Part::Lo => self.inst.with_literal(off & 0xffff_ffff),
            Part::Whole => self.inst.with_literal(off),
            Part::Eval(expr) => {
                let old = self.inst.literal().unwrap_or(0) as u32;
                let lit = expr
                    .solve(old, off as i64)
                    .ok_or_else(|| LayoutError::Encode {
                        at: self.old,
                        why: format!(
                            "the computed offset cannot be re-aimed to {:#x} by its literal",
                            off as i64
                        ),
                    })?;
                self.inst.with_literal(u64::from(lit))
            }
            Part::Hi => {
                return crate::idiom::with_high_offset(self.inst, (off >> 32) as u32)
                    .map_err(|why| LayoutError::Encode { at: self.old, why })
                    .map(|i| out.extend_from_slice(i.bytes()));
            }
        }
        .map_err(encode_error(self.old))?;
        out.extend_from_slice(fixed.bytes());
        Ok(())
    }
}

/// Code trailing the SOPP branch at original `from`, ending in a jump to the original `target`
/// (landing rule): a long-branch island (`markers` empty, `long`) or a landing block (`markers`
/// run on the branch edge only, then `s_branch`, or a long jump when the branch was relaxed).
/// With `skip`, it starts with an `s_branch` over itself (the fall-through path of a
/// conditional branch must not run it).
pub(super) struct Island<'a> {
    pub from: u64,
    pub target: u64,
    pub markers: &'a [Instruction],
    /// Jump through the SGPR pair `pair` ([`island_code`]) instead of `s_branch`.
    pub long: bool,
    pub pair: u8,
    pub isa: Target,
    pub skip: bool,
}

impl Island<'_> {
    /// Bytes before the markers: the `s_branch` over the island, when there is one.
    fn over(&self) -> u64 {
        if self.skip {
            4
        } else {
            0
        }
    }

    /// Size of the jump to the target (bytes): `s_branch`, or the long sequence.
    fn jump_size(&self) -> Result<u64, LayoutError> {
        if !self.long {
            return Ok(4);
        }
        island_code(self.isa, 0, 0, self.pair)
            .map(|c| code_len(&c))
            .map_err(|why| LayoutError::Encode { at: self.from, why })
    }

    /// New address of the island's first marker or jump (where its branch lands), for an island
    /// placed at `at`.
    pub fn entry(&self, at: u64) -> u64 {
        at + self.over()
    }
}

impl Item for Island<'_> {
    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.over() + code_len(self.markers) + self.jump_size()?)
    }
    fn encode(&self, at: u64, r: &Resolver, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let encode = |e: EncodeError| LayoutError::Encode {
            at,
            why: e.to_string(),
        };
        let dest = r
            .layout
            .map_branch(self.target)
            .ok_or(LayoutError::BadTarget {
                at,
                target: self.target,
            })?;
        let start = self.entry(at) + code_len(self.markers);
        let mut code = self.markers.to_vec();
        if self.long {
            code.extend(
                island_code(self.isa, start, dest, self.pair)
                    .map_err(|why| LayoutError::Encode { at, why })?,
            );
        } else {
            let dwords = (dest.wrapping_sub(start + 4) as i64) / 4;
            let d = i16::try_from(dwords).map_err(|_| LayoutError::OutOfRange {
                at: vec![self.from],
            })?;
            code.push(build::s_branch(self.isa, d).map_err(encode)?);
        }
        if self.skip {
            let over = build::s_branch(self.isa, (code_len(&code) / 4) as i16).map_err(encode)?;
            out.extend_from_slice(over.bytes());
        }
        for c in &code {
            out.extend_from_slice(c.bytes());
        }
        Ok(())
    }
}
