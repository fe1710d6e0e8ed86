//! HW_ID scope filtering (spec "Scope filtering (bitmasks)", "Architecture Support";
//! field positions: `docs/background/funcmap-contract.md` "Scope check fields"; hwreg ids
//! confirmed with `llvm-mc-22`: `hwreg(HW_REG_HW_ID)` = 4 on gfx9, `hwreg(HW_REG_HW_ID1)` = 23
//! and `hwreg(HW_REG_HW_ID2)` = 24 on gfx10/gfx11, spelled `HW_REG_WAVE_HW_ID1/2` on gfx12).

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};

use super::{simm16, Emitter, Snippet, SnippetError};

/// `SQTT_SCOPE_*` masks: a marker is emitted when bit `field` of every filtering mask is set,
/// where `field` is the wave, SIMD, CU/WGP or workgroup id of the running wave. `None` (or a
/// mask with every bit the field can select set, e.g. `0xFFFFFFFF`) does not filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopeMasks {
    /// `SQTT_SCOPE_WAVE` (wave id within the SIMD).
    pub wave: Option<u32>,
    /// `SQTT_SCOPE_SIMD`.
    pub simd: Option<u32>,
    /// `SQTT_SCOPE_CU` (CU on gfx9, WGP on gfx10+).
    pub cu: Option<u32>,
    /// `SQTT_SCOPE_WG` (thread group id on gfx9, workgroup id on gfx10+).
    pub wg: Option<u32>,
}

impl Default for ScopeMasks {
    /// The spec's defaults: WAVE 0xFFFFFFFF, SIMD 0xF, CU 0x3, WG 0xFFFFFFFF (only CU/WGP 0 and
    /// 1 emit).
    fn default() -> ScopeMasks {
        ScopeMasks {
            wave: None,
            simd: Some(0xf),
            cu: Some(0x3),
            wg: None,
        }
    }
}

impl ScopeMasks {
    /// No filtering at all.
    pub fn unfiltered() -> ScopeMasks {
        ScopeMasks {
            wave: None,
            simd: None,
            cu: None,
            wg: None,
        }
    }

    /// The fields that actually filter on `t`: `(hwreg id, bit offset, bit size, mask)`.
    fn active(&self, t: Target) -> Vec<(u8, u8, u8, u32)> {
        let fields: [(Option<u32>, u8, u8, u8); 4] = if t.family() == Family::Gfx9 {
            // HW_ID (4): WAVE_ID[3:0], SIMD_ID[5:4], CU_ID[11:8], TG_ID[19:16].
            [
                (self.wave, 4, 0, 4),
                (self.simd, 4, 4, 2),
                (self.cu, 4, 8, 4),
                (self.wg, 4, 16, 4),
            ]
        } else {
            // HW_ID1 (23): WAVE_ID[4:0], SIMD_ID[9:8], WGP_ID[13:10]; HW_ID2 (24): WG_ID[20:16].
            [
                (self.wave, 23, 0, 5),
                (self.simd, 23, 8, 2),
                (self.cu, 23, 10, 4),
                (self.wg, 24, 16, 5),
            ]
        };
        fields
            .into_iter()
            .filter_map(|(m, id, off, size)| {
                let m = m?;
                let values = 1u32 << size;
                let full = if values >= 32 {
                    u32::MAX
                } else {
                    (1u32 << values) - 1
                };
                (m & full != full).then_some((id, off, size, m))
            })
            .collect()
    }

    /// Whether any field filters on `t` (otherwise no scope check is needed).
    pub fn filters(&self, t: Target) -> bool {
        !self.active(t).is_empty()
    }
}

/// The once-per-kernel scope check: sets SGPR `flag` to 1 when the wave is in scope, else 0.
/// Per filtering field: `s_getreg_b32 tmp, hwreg(id, offset, size)`, `s_bitcmp1_b32 mask, tmp`
/// (SCC = bit `field` of the mask), `s_cselect_b32 flag, 1|flag, 0`; gfx1200/gfx1201 add one
/// `s_wait_alu depctr_sa_sdst(0)` per field and one at the end so later readers of `flag` need
/// none. Without a filtering field: `s_mov_b32 flag, 1`. Clobbers `flag`, `tmp` and SCC, not M0.
/// Errors: `flag == tmp`, encodings missing on `t`.
pub fn scope_init(
    t: Target,
    masks: &ScopeMasks,
    flag: u8,
    tmp: u8,
) -> Result<Snippet, SnippetError> {
    if flag == tmp {
        return Err(SnippetError::RegisterOverlap {
            sgpr: tmp,
            what: "the scope flag",
        });
    }
    let mut e = Emitter::new(t, false);
    let active = masks.active(t);
    if active.is_empty() {
        e.push(
            "s_mov_b32",
            build::s_mov_b32(t, Operand::Sgpr(flag), Operand::Imm(1)),
        )?;
    }
    for (i, &(id, off, size, mask)) in active.iter().enumerate() {
        e.push(
            "s_getreg_b32",
            build::s_getreg_b32(t, Operand::Sgpr(tmp), id, off, size),
        )?;
        e.push(
            "s_bitcmp1_b32",
            build::s_bitcmp1_b32(t, Operand::Literal(mask), Operand::Sgpr(tmp)),
        )?;
        let keep = if i == 0 {
            Operand::Imm(1)
        } else {
            Operand::Sgpr(flag)
        };
        e.push(
            "s_cselect_b32",
            build::s_cselect_b32(t, Operand::Sgpr(flag), keep, Operand::Imm(0)),
        )?;
    }
    e.flush()?;
    e.finish()
}

/// Wraps `body` (e.g. a marker or an address-trace block) in the scope check:
/// `s_cmp_lg_u32 flag, 0`, `s_cbranch_scc0 <past body>`, `body` (plus `s_waitcnt_vscnt null, 0`
/// after it on gfx1010..gfx1013, reached by both paths). `flag` must have been set by
/// [`scope_init`] (which commits it, so no gfx12 wait is needed here). Clobbers SCC plus what
/// `body` clobbers. Errors: a body longer than a `simm16` branch reaches, encodings missing.
pub fn scope_guard(t: Target, flag: u8, body: Vec<Instruction>) -> Result<Snippet, SnippetError> {
    let mut e = Emitter::new(t, false);
    let size: usize = body.iter().map(|i| i.len()).sum();
    e.push(
        "s_cmp_lg_u32",
        build::s_cmp(t, "s_cmp_lg_u32", Operand::Sgpr(flag), Operand::Imm(0)),
    )?;
    e.push(
        "s_cbranch_scc0",
        build::s_cbranch_scc0(t, simm16(size as i64)?),
    )?;
    // The body carries its own waits; its branches are relative, so it is copied unchanged.
    e.code.extend(body);
    e.branch_tail()?;
    e.finish()
}
