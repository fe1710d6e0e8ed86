//! gfx12 shader-clock packed marker headers (spec "GFX12 Shader Clock Packing").

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Target};

use super::{Emitter, Snippet, SnippetError};

/// `HW_REG_SHADER_CYCLES_LO` on gfx12 (`llvm-mc-22 -mcpu=gfx1200`:
/// `s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES_LO, 4, 12)` encodes simm16 0x591d, id 29).
const HW_REG_SHADER_CYCLES_LO: u8 = 29;

/// A packed marker header: `clock << (32 - bits) | value`, where `clock` is bits
/// `shift .. shift + bits` of the shader-clock low word, sent with `s_ttracedata` (never the
/// `_imm` form). Decoding (spec): `exit_prev = val & 1`, `enter = (val >> 1) & 1`,
/// `id = (val >> 2) & ((1 << (30 - bits)) - 1)`, `clock = val >> (32 - bits)`.
///
/// - gfx1200/gfx1201 (and gfx12-generic): `s_getreg_b32 m0, hwreg(HW_REG_SHADER_CYCLES_LO,
///   shift, bits)`, `s_lshl_b32 m0, m0, 32 - bits`, `s_or_b32 m0, m0, value`, `s_nop 0`,
///   `s_ttracedata`. `tmp` is not used.
/// - gfx1250/gfx1251: `s_get_shader_cycles_u64 s[tmp:tmp+1]`, `s_lshr_b32 m0, s[tmp], shift`
///   (omitted when 0), `s_lshl_b32 m0, m0|s[tmp], 32 - bits`, `s_or_b32`, `s_nop 0`,
///   `s_ttracedata`; clobbers `s[tmp:tmp+1]`.
///
/// The `s_or_b32` is omitted when `value` is 0. Clobbers M0 and SCC. Errors: other targets;
/// `bits` outside 1..=29 or `bits + shift > 32` (the funcmap `M:` row would be ignored by the
/// decoder, `docs/background/funcmap-contract.md`); `value` with bits in the clock field (its id
/// would not survive decoding); odd `tmp` on gfx1250 (64-bit SGPR pairs are even-aligned).
pub fn clock_marker(
    t: Target,
    value: u32,
    bits: u32,
    shift: u32,
    tmp: u8,
) -> Result<Snippet, SnippetError> {
    if !matches!(t.family(), Family::Gfx12 | Family::Gfx1250) {
        return Err(SnippetError::ClockTarget { target: t.name() });
    }
    if !(1..=29).contains(&bits) || shift > 32 - bits {
        return Err(SnippetError::ClockBits { bits, shift });
    }
    let avail = 32 - bits;
    if value >> avail != 0 {
        return Err(SnippetError::ValueTooWide { value, bits, avail });
    }
    let mut e = Emitter::new(t, false);
    let left = Operand::Imm(avail as i32);
    if t.family() == Family::Gfx12 {
        e.push(
            "s_getreg_b32",
            build::s_getreg_b32(
                t,
                Operand::M0,
                HW_REG_SHADER_CYCLES_LO,
                shift as u8,
                bits as u8,
            ),
        )?;
        e.push(
            "s_lshl_b32",
            build::s_lshl_b32(t, Operand::M0, Operand::M0, left),
        )?;
    } else {
        if !tmp.is_multiple_of(2) {
            return Err(SnippetError::UnalignedPair {
                sgpr: tmp,
                what: "s_get_shader_cycles_u64",
            });
        }
        e.push(
            "s_get_shader_cycles_u64",
            build::s_get_shader_cycles_u64(t, tmp),
        )?;
        let mut src = Operand::Sgpr(tmp);
        if shift != 0 {
            e.push(
                "s_lshr_b32",
                build::s_lshr_b32(t, Operand::M0, src, Operand::Imm(shift as i32)),
            )?;
            src = Operand::M0;
        }
        e.push("s_lshl_b32", build::s_lshl_b32(t, Operand::M0, src, left))?;
    }
    if value != 0 {
        e.push(
            "s_or_b32",
            build::s_or_b32(t, Operand::M0, Operand::M0, Operand::Literal(value)),
        )?;
    }
    e.trace_m0()?;
    e.finish()
}
