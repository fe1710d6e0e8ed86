//! Saving live SGPRs around a snippet in lanes of an unused VGPR (issue 12 item 3): when a
//! snippet needs more scratch SGPRs than are dead at its insertion point, live ones are saved
//! with `v_writelane_b32 vT, sK, lane` before it and restored with `v_readlane_b32 sK, vT, lane`
//! after it. Neither touches memory, SCC, M0 or EXEC, and both ignore EXEC (ISA manuals,
//! "V_WRITELANE_B32" / "V_READLANE_B32": the lane is selected by the constant, whatever EXEC is),
//! so the sequence works with any EXEC, including zero. Lanes are 0.. in SGPR order, at most 32
//! (valid in wave32 and wave64).
//!
//! The restore is a VALU write of the SGPR, so the original instruction after the snippet may
//! need a wait: gfx9 [`hazard::VALU_SGPR_VMEM`] (VMEM reading it) and
//! [`hazard::VALU_SGPR_LANESEL`] (lane select) are covered by `s_nop`s up to the larger window;
//! gfx1200/gfx1201 [`hazard::VALU_SGPR_READ`] by `s_wait_alu depctr_va_sdst(0)` (the emitter's
//! flush). Other families have no rule for a VALU-written SGPR read by the next instruction.

use super::{Emitter, SnippetError};
use crate::regs::{members, Sgprs};
use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{hazard, Instruction, Target};

/// Lanes used for saved SGPRs at most (lane numbers below the smallest wave size).
pub const MAX_SAVED: usize = 32;

/// `body` with the SGPRs `saved` saved in lanes 0.. of `v<vgpr>` before it and restored after
/// it, plus the waits the restores need before any original instruction. `body` is kept byte
/// for byte (its branches stay valid); its instructions are fed to the hazard scanner so the
/// restores wait for what it left pending. Errors: more than [`MAX_SAVED`] SGPRs, an encoding
/// failure, or a hazard only VALUs could resolve.
pub fn spill_wrap(
    t: Target,
    vgpr: u16,
    saved: Sgprs,
    body: Vec<Instruction>,
) -> Result<Vec<Instruction>, SnippetError> {
    if saved == 0 {
        return Ok(body);
    }
    let regs: Vec<u8> = members(saved).collect();
    if regs.len() > MAX_SAVED {
        return Err(SnippetError::Rule(format!(
            "{} SGPRs to save, at most {MAX_SAVED} lanes",
            regs.len()
        )));
    }
    let mut e = Emitter::new(t, true);
    for (lane, &r) in regs.iter().enumerate() {
        e.push(
            "v_writelane_b32",
            build::v_writelane_b32(t, vgpr, Operand::Sgpr(r), Operand::Imm(lane as i32)),
        )?;
    }
    for i in body {
        e.raw(i);
    }
    for (lane, &r) in regs.iter().enumerate() {
        e.push(
            "v_readlane_b32",
            build::v_readlane_b32(t, Operand::Sgpr(r), vgpr, Operand::Imm(lane as i32)),
        )?;
    }
    // gfx9: a VMEM instruction or lane select reading a restored SGPR needs wait states.
    let states = [&hazard::VALU_SGPR_VMEM, &hazard::VALU_SGPR_LANESEL]
        .iter()
        .filter(|r| r.scope.contains(t))
        .filter_map(|r| match r.fix {
            hazard::Fix::WaitStates(n) => Some(n),
            _ => None,
        })
        .max();
    if let Some(n) = states {
        let w = e.wait_for(hazard::Fix::WaitStates(n), "restored SGPR")?;
        e.raw(w);
    }
    e.flush()?;
    Ok(e.code)
}
