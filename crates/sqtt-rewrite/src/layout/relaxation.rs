//! Branch relaxation (part of [`crate::layout`]): the code of a long-branch island, the
//! sequence LLVM 22 emits for a SOPP branch pushed out of simm16 range.

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};

/// Placeholder that forces a 32-bit literal when an island is first built (inline constants would
/// change the island's size between layout passes).
const FORCE_LITERAL: u32 = 0x1234_5678;

/// Code of a long-branch island at `at` jumping to `dest` (bytes), the same sequences LLVM 22's
/// branch relaxation emits (checked against the corpus' long-branch fixtures):
/// - gfx9/gfx10/gfx11: `s_getpc_b64 s[p:p+1]`, `s_add_u32 sp, sp, lo`, `s_addc_u32 sp+1, sp+1,
///   hi`, `s_setpc_b64 s[p:p+1]` (offset relative to the getpc address + 4);
/// - gfx12: the same with `s_add_co_u32`/`s_add_co_ci_u32`, `s_wait_alu depctr_sa_sdst(0)`
///   after the getpc, and before the setpc `s_wait_alu depctr_sa_sdst(0) depctr_va_sdst(0)
///   depctr_va_vcc(0)`: an island is entered by a branch from code that may leave any SGPR or
///   VCC write uncommitted, and a setpc needs every such write committed (rule `setpc-pending`,
///   `amdgpu_isa::hazard::SETPC_PENDING`; LLVM 22 `AMDGPUWaitSGPRHazards`, IsSetPC);
/// - gfx1010-gfx1013: the gfx10 sequence with `s_waitcnt_vscnt null, 0` before the setpc, so the
///   island's branch cannot complete an LDS → branch → VMEM hazard (LLVM 22 GCNHazardRecognizer
///   `checkLdsBranchVmemWARHazard`);
/// - gfx1250: one `s_add_pc_i64` with a 64-bit literal (offset from the next instruction).
///
/// Clobbers SCC and the pair (not on gfx1250). The size never depends on `at`/`dest`.
pub fn island_code(t: Target, at: u64, dest: u64, pair: u8) -> Result<Vec<Instruction>, String> {
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    if t.family() == Family::Gfx1250 {
        let add = build::s_add_pc_i64(t, 0).map_err(e)?;
        let off = dest.wrapping_sub(at + add.len() as u64);
        return Ok(vec![add.with_literal(off).map_err(e)?]);
    }
    let gfx12 = t.family() == Family::Gfx12;
    // s_wait_alu depctr_sa_sdst(0): SALU SGPR write read by the next SALU (gfx12; llc-22 output).
    const SA_SDST0: u16 = 0xff9e;
    // s_wait_alu depctr_sa_sdst(0) depctr_va_sdst(0) depctr_va_vcc(0) (llvm-mc-22: 0xf19c).
    const ALL_SDST0: u16 = 0xf19c;
    let off = dest.wrapping_sub(at + 4);
    let p = Operand::Sgpr(pair);
    let p1 = Operand::Sgpr(pair + 1);
    let mut code = vec![build::s_getpc_b64(t, pair).map_err(e)?];
    if gfx12 {
        code.push(build::s_wait_alu(t, SA_SDST0).map_err(e)?);
    }
    let lo = build::s_add_u32(t, p, p, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(lo.with_literal(off & 0xffff_ffff).map_err(e)?);
    let hi = build::s_addc_u32(t, p1, p1, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(hi.with_literal(off >> 32).map_err(e)?);
    if gfx12 {
        code.push(build::s_wait_alu(t, ALL_SDST0).map_err(e)?);
    }
    if !super::may_add_branches(t) {
        // gfx1010-gfx1013: the island's branch sits between whatever LDS and VMEM accesses the
        // original branch's path has; `s_waitcnt_vscnt null, 0` ends that hazard whatever the
        // input's waits (LLVM 22 GCNHazardRecognizer `checkLdsBranchVmemWARHazard`).
        code.push(build::s_waitcnt_vscnt(t, 0).map_err(e)?);
    }
    code.push(build::s_setpc_b64(t, pair).map_err(e)?);
    Ok(code)
}
